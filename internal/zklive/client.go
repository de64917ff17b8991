package zklive

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// maxFrame bounds a reply: a node's data is at most jute.maxbuffer (1 MiB by default), and a
// getChildren of a node with very many children is larger.
const maxFrame = 64 << 20

// errClosed is what calls on a closed or lost session return, wrapped with the cause.
var errClosed = errors.New("connection to ZooKeeper lost")

// reply is one answer to a call: its header and undecoded body.
type reply struct {
	hdr  encoding.ReplyHeader
	body []byte
}

// notification is a watch event with the zxid of its ReplyHeader (the transaction that fired it);
// or, with ping set, a ping's reply carrying ZooKeeper's last processed zxid; or, with lost set,
// the end of the connection, the last notification of a session.
type notification struct {
	ev   encoding.WatcherEvent
	zxid int64
	ping bool
	lost error
}

// session is one ZooKeeper session on one connection, with calls pipelined: any number of
// goroutines may call at once, replies are matched to calls by xid (ZooKeeper answers a
// session's requests in order). Watch notifications and ping replies go, in the order they
// arrive, to the function given to dial.
type session struct {
	conn    net.Conn
	id      int64
	timeout time.Duration // negotiated

	wmu   sync.Mutex // guards wbuf and xid
	wbuf  []byte     // requests not yet written, in xid order
	xid   encoding.Xid
	flush chan struct{} // has a value while wbuf may hold requests

	mu      sync.Mutex
	pending map[encoding.Xid]chan reply
	err     error // set once the connection is lost; pending is nil from then on

	done chan struct{} // closed when the reading goroutine ends
}

// dial opens a new session on the first of servers that accepts one, adds the credentials and
// starts reading; notify receives the notifications, in the order they arrive, from the reading
// goroutine (so it must not block long, nor call).
func dial(ctx context.Context, cfg *Config, notify func(notification)) (*session, error) {
	var errs []error
	for _, addr := range cfg.Servers {
		s, err := dialOne(ctx, cfg, addr, notify)
		if err == nil {
			return s, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no ZooKeeper server given")
	}
	return nil, errors.Join(errs...)
}

func dialOne(ctx context.Context, cfg *Config, addr string, notify func(notification)) (*session, error) {
	d := net.Dialer{Timeout: cfg.sessionTimeout()}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	resp, err := handshake(conn, r, cfg.sessionTimeout())
	if err != nil {
		conn.Close()
		return nil, err
	}
	s := &session{
		conn:    conn,
		id:      int64(resp.SessionID),
		timeout: time.Duration(resp.TimeOut) * time.Millisecond,
		pending: make(map[encoding.Xid]chan reply),
		flush:   make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go s.readLoop(r, notify)
	go s.writeLoop()
	for _, a := range cfg.Auth {
		if _, err := s.call(ctx, encoding.OpAuth, &encoding.AuthPacket{Scheme: a.Scheme, Auth: a.Auth}, nil); err != nil {
			s.close()
			return nil, fmt.Errorf("auth %s: %w", a.Scheme, err)
		}
	}
	return s, nil
}

func handshake(conn net.Conn, r *bufio.Reader, timeout time.Duration) (encoding.ConnectResponse, error) {
	var resp encoding.ConnectResponse
	conn.SetDeadline(time.Now().Add(timeout))
	defer conn.SetDeadline(time.Time{})
	req := &encoding.ConnectRequest{TimeOut: int32(timeout.Milliseconds()), Passwd: make([]byte, 16)}
	if _, err := encoding.WriteFrame(conn, nil, req); err != nil {
		return resp, fmt.Errorf("handshake: %w", err)
	}
	frame, err := encoding.ReadFrame(r, nil, maxFrame)
	if err != nil {
		return resp, fmt.Errorf("handshake: %w", err)
	}
	if err := encoding.DecodeRecord(frame, &resp); err != nil {
		return resp, fmt.Errorf("handshake: %w", err)
	}
	if resp.TimeOut <= 0 {
		return resp, errors.New("handshake: the server refused the session")
	}
	return resp, nil
}

// call sends one request and waits for its reply, decoding the body into resp (nil: none). It
// returns the reply's header; a ZooKeeper error comes back as an encoding.ErrCode.
func (s *session) call(ctx context.Context, op encoding.Op, req, resp encoding.Record) (encoding.ReplyHeader, error) {
	return s.start(op, req).wait(ctx, resp)
}

// send queues a request with the next xid for writeLoop and registers ch for its reply. The
// xid is taken and the request queued under one lock, so xids reach ZooKeeper in order.
func (s *session) send(op encoding.Op, req encoding.Record, ch chan reply) (encoding.Xid, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	xid := encoding.XidAuth
	switch op {
	case encoding.OpAuth:
	case encoding.OpPing:
		xid = encoding.XidPing
	default:
		s.xid++
		xid = s.xid
	}
	if ch != nil {
		s.mu.Lock()
		if s.pending == nil {
			s.mu.Unlock()
			return xid, s.lost()
		}
		s.pending[xid] = ch
		s.mu.Unlock()
	}
	s.wbuf = encoding.AppendFrame(s.wbuf, &encoding.RequestHeader{Xid: xid, Op: op}, req)
	select {
	case s.flush <- struct{}{}:
	default:
	}
	return xid, nil
}

// writeLoop writes what send queued, as many requests in one write as have been queued since
// the last, and sends a ping every third of the session timeout.
func (s *session) writeLoop() {
	t := time.NewTicker(s.timeout / 3)
	defer t.Stop()
	var out []byte
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if _, err := s.send(encoding.OpPing, nil, nil); err != nil {
				return
			}
			continue
		case <-s.flush:
		}
		s.wmu.Lock()
		out, s.wbuf = s.wbuf, out[:0]
		s.wmu.Unlock()
		if _, err := s.conn.Write(out); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *session) forget(xid encoding.Xid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, xid)
}

// lost returns why the connection is gone.
func (s *session) lost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Errorf("%w: %v", errClosed, s.err)
}

// fail marks the connection lost and wakes every pending call.
func (s *session) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return
	}
	s.err = err
	for _, ch := range s.pending {
		close(ch)
	}
	s.pending = nil
	s.conn.Close()
}

// readLoop reads frames until the connection fails. A frame read within two thirds of the
// session timeout keeps it alive: pings go out every third.
func (s *session) readLoop(r *bufio.Reader, notify func(notification)) {
	defer close(s.done)
	defer func() { notify(notification{lost: s.lost()}) }()
	for {
		s.conn.SetReadDeadline(time.Now().Add(s.timeout * 2 / 3))
		frame, err := encoding.ReadFrame(r, nil, maxFrame)
		if err != nil {
			s.fail(err)
			return
		}
		d := encoding.NewDecoder(frame)
		var hdr encoding.ReplyHeader
		hdr.Decode(d)
		if err := d.Err(); err != nil {
			s.fail(err)
			return
		}
		body := frame[len(frame)-d.Remaining():]
		switch hdr.Xid {
		case encoding.XidNotification:
			var ev encoding.WatcherEvent
			if err := encoding.DecodeRecord(body, &ev); err != nil {
				s.fail(fmt.Errorf("decode notification: %w", err))
				return
			}
			notify(notification{ev: ev, zxid: int64(hdr.Zxid)})
		case encoding.XidPing:
			notify(notification{ev: encoding.WatcherEvent{Type: encoding.EventNone}, zxid: int64(hdr.Zxid), ping: true})
		default:
			s.mu.Lock()
			ch, ok := s.pending[hdr.Xid]
			delete(s.pending, hdr.Xid)
			s.mu.Unlock()
			if ok {
				ch <- reply{hdr: hdr, body: body}
			}
		}
	}
}

// close ends the session (closeSession, so ZooKeeper forgets it at once) and the connection.
func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = s.call(ctx, encoding.OpCloseSession, nil, nil) // a lost connection ends it too, at its timeout
	s.fail(errors.New("closed"))
	<-s.done
}

// pendingCall is a request sent and not yet answered.
type pendingCall struct {
	s   *session
	op  encoding.Op
	xid encoding.Xid
	ch  chan reply
	err error // from sending
}

// start sends a request without waiting, so that many are in flight on the connection.
func (s *session) start(op encoding.Op, req encoding.Record) *pendingCall {
	c := &pendingCall{s: s, op: op, ch: make(chan reply, 1)}
	c.xid, c.err = s.send(op, req, c.ch)
	return c
}

// wait is call's second half.
func (c *pendingCall) wait(ctx context.Context, resp encoding.Record) (encoding.ReplyHeader, error) {
	if c.err != nil {
		return encoding.ReplyHeader{}, c.err
	}
	select {
	case r, ok := <-c.ch:
		if !ok {
			return encoding.ReplyHeader{}, c.s.lost()
		}
		if r.hdr.Err != encoding.ErrOK {
			return r.hdr, r.hdr.Err
		}
		if resp != nil {
			if err := encoding.DecodeRecord(r.body, resp); err != nil {
				return r.hdr, fmt.Errorf("decode %v reply: %w", c.op, err)
			}
		}
		return r.hdr, nil
	case <-ctx.Done():
		c.s.forget(c.xid)
		return encoding.ReplyHeader{}, ctx.Err()
	}
}

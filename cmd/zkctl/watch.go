package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

func init() {
	commands["watch"] = command{"[-R] [-n COUNT] PATH", "print changes of PATH (-R: of its whole subtree) until interrupted (-n: or COUNT events)", cmdWatch}
}

// watch uses addWatch (ZooKeeper 3.6+), a persistent watch that stays armed after it fires, so no
// change is missed between events. go-zookeeper has no addWatch, so this command speaks the
// protocol itself through the project's encoding package, on a session of its own.
func cmdWatch(e *env, args []string) error {
	l := newCmdLine("watch", 1, 1)
	recursive := l.Bool("R", false, "")
	count := l.Int("n", 0, "")
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	if err := validatePath(p); err != nil {
		return err
	}
	cs, err := parseConnectString(e.server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	s, err := dialRaw(ctx, cs.servers, e.timeout)
	if err != nil {
		return fmt.Errorf("connect %s: %w", e.server, err)
	}
	defer s.close()
	if e.auth != "" {
		if err := s.call(encoding.XidAuth, encoding.OpAuth, &encoding.AuthPacket{Scheme: "digest", Auth: []byte(e.auth)}, nil); err != nil {
			return opErr("auth", "digest", err)
		}
	}
	c := &client{chroot: cs.chroot}
	mode := encoding.AddWatchPersistent
	if *recursive {
		mode = encoding.AddWatchPersistentRecursive
	}
	if err := s.call(1, encoding.OpAddWatch, &encoding.AddWatchRequest{Path: c.abs(p), Mode: mode}, &encoding.ErrorResponse{}); err != nil {
		return opErr("watch", p, err)
	}
	fmt.Fprintf(e.stderr, "zkctl: watching %s (%s); interrupt to stop\n", p, mode)

	go s.pingLoop(ctx)
	stop := context.AfterFunc(ctx, s.abort) // unblocks the read below
	defer stop()
	for n := 0; *count <= 0 || n < *count; {
		ev, err := s.nextEvent()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return fmt.Errorf("watch %s: connection to the server lost: %w", p, err)
		}
		if ev.Type == encoding.EventNone {
			continue
		}
		if err := e.printEvent(ev.Type.String(), c.rel(ev.Path)); err != nil {
			return err
		}
		n++
	}
	return nil
}

// rawSession is a minimal ZooKeeper session on the project's wire codec: handshake, calls made
// one at a time, pings, and the watch events the server pushes.
type rawSession struct {
	conn    net.Conn
	timeout time.Duration // negotiated session timeout
	rbuf    []byte        // only used by the reading goroutine
	aborted atomic.Bool   // set by abort: reads fail from then on

	mu   sync.Mutex // mu serialises writes on conn and protects wbuf
	wbuf []byte
}

// dialRaw connects to the first server that answers and opens a new session.
func dialRaw(ctx context.Context, servers []string, timeout time.Duration) (*rawSession, error) {
	var lastErr error
	for _, addr := range servers {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			lastErr = err
			continue
		}
		s := &rawSession{conn: conn}
		if err := s.handshake(timeout); err != nil {
			conn.Close()
			lastErr = fmt.Errorf("%s: %w", addr, err)
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

func (s *rawSession) handshake(timeout time.Duration) error {
	s.conn.SetDeadline(time.Now().Add(timeout))
	req := &encoding.ConnectRequest{TimeOut: int32(timeout.Milliseconds()), Passwd: make([]byte, 16)}
	if _, err := encoding.WriteFrame(s.conn, nil, req); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	frame, err := encoding.ReadFrame(s.conn, nil, 0)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	var resp encoding.ConnectResponse
	if err := encoding.DecodeRecord(frame, &resp); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if resp.TimeOut <= 0 {
		return errors.New("handshake: the server refused the session")
	}
	s.timeout = time.Duration(resp.TimeOut) * time.Millisecond
	s.conn.SetDeadline(time.Time{})
	return nil
}

// send writes one request frame.
func (s *rawSession) send(xid encoding.Xid, op encoding.Op, body encoding.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	s.wbuf, err = encoding.WriteFrame(s.conn, s.wbuf, &encoding.RequestHeader{Xid: xid, Op: op}, body)
	return err
}

// read reads the next frame with its reply header; the rest of the frame is the body, valid
// until the next read.
func (s *rawSession) read() (encoding.ReplyHeader, []byte, error) {
	var hdr encoding.ReplyHeader
	// Pings come every third of the timeout; two thirds without any frame means the server is gone.
	s.conn.SetReadDeadline(time.Now().Add(s.timeout * 2 / 3))
	if s.aborted.Load() { // after setting the deadline, so an abort cannot be overwritten
		return hdr, nil, errors.New("aborted")
	}
	frame, err := encoding.ReadFrame(s.conn, s.rbuf, 0)
	if err != nil {
		return hdr, nil, err
	}
	s.rbuf = frame[:0]
	d := encoding.NewDecoder(frame)
	hdr.Decode(d)
	if err := d.Err(); err != nil {
		return hdr, nil, err
	}
	return hdr, frame[len(frame)-d.Remaining():], nil
}

// call sends one request and waits for its reply, decoding the body into resp (nil: none). It
// must not run concurrently with nextEvent. A ZooKeeper error comes back as an encoding.ErrCode.
func (s *rawSession) call(xid encoding.Xid, op encoding.Op, req, resp encoding.Record) error {
	if err := s.send(xid, op, req); err != nil {
		return err
	}
	for {
		hdr, body, err := s.read()
		if err != nil {
			return err
		}
		if hdr.Xid != xid {
			continue // a ping reply or an event of no interest yet
		}
		if hdr.Err != encoding.ErrOK {
			return hdr.Err
		}
		if resp != nil {
			return encoding.DecodeRecord(body, resp)
		}
		return nil
	}
}

// nextEvent returns the next watch event, skipping ping replies.
func (s *rawSession) nextEvent() (encoding.WatcherEvent, error) {
	for {
		hdr, body, err := s.read()
		if err != nil {
			return encoding.WatcherEvent{}, err
		}
		if hdr.Xid != encoding.XidNotification {
			continue
		}
		var ev encoding.WatcherEvent
		if err := encoding.DecodeRecord(body, &ev); err != nil {
			return ev, err
		}
		return ev, nil
	}
}

// pingLoop keeps the session alive until ctx ends.
func (s *rawSession) pingLoop(ctx context.Context) {
	t := time.NewTicker(s.timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.send(encoding.XidPing, encoding.OpPing, nil); err != nil {
				return
			}
		}
	}
}

// abort makes a blocked read return at once.
func (s *rawSession) abort() {
	s.aborted.Store(true)
	s.conn.SetReadDeadline(time.Now())
}

// close ends the session politely (closeSession) and closes the connection.
func (s *rawSession) close() {
	const xid = 1 << 30
	s.conn.SetDeadline(time.Now().Add(time.Second))
	if err := s.send(xid, encoding.OpCloseSession, nil); err == nil {
		for {
			frame, err := encoding.ReadFrame(s.conn, s.rbuf, 0)
			if err != nil {
				break
			}
			var hdr encoding.ReplyHeader
			if encoding.DecodeRecord(frame, &hdr) != nil || hdr.Xid == xid {
				break
			}
		}
	}
	s.conn.Close()
}

package xchk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

var (
	// errOracleExpired is the oracle's answer (timeout 0) to a session it does not know.
	errOracleExpired = errors.New("oracle: session expired or unknown")
	// errOracleHungUp fails the calls waiting when ZooKeeper closes the connection. ZooKeeper
	// does so on purpose for some requests (deleteContainer from a client), so it is an
	// answer to compare, not only a failure.
	errOracleHungUp = errors.New("oracle: ZooKeeper closed the connection")
)

// oracleConn is one twin session's TCP connection to the real ZooKeeper: a small pipelined
// client built on the encoding package. Requests are written in call order and ZooKeeper
// answers them in that order; replies are matched to calls by xid. Watch notifications (xid
// -1) go to onEvent, from the reader goroutine, in the order they arrive relative to replies,
// so an event is delivered before the reply that follows it on the wire.
//
// Goroutines: the reader (readLoop) owns reading nc; the pinger (pingLoop) sends a ping every
// third of the session timeout so the twin outlives idle clients. Both end when the
// connection closes. wmu serialises writes (and xid allocation with them, so the calls table
// sees xids in wire order); mu protects calls and err.
type oracleConn struct {
	nc      net.Conn
	timeout time.Duration // the twin's negotiated session timeout
	wtime   time.Duration // bound on one write
	onEvent func(encoding.WatcherEvent)

	wmu  sync.Mutex
	xid  encoding.Xid
	wbuf []byte

	mu    sync.Mutex
	calls map[encoding.Xid]*oracleCall
	err   error // set once, when the connection died

	closed chan struct{} // closed by close
	once   sync.Once
	done   chan struct{} // closed when the reader has returned
}

// oracleCall is one request in flight.
type oracleCall struct {
	op   encoding.Op
	done chan struct{} // closed when hdr/resp or err is set
	hdr  encoding.ReplyHeader
	resp encoding.Record // decoded body when hdr.Err is ErrOK (nil for header-only replies)
	err  error
}

// dialOracle connects to addr and opens (req.SessionID 0) or resumes a session, all within
// ctx. onEvent receives the notifications of the connection; it must not block for long.
func dialOracle(ctx context.Context, addr string, req encoding.ConnectRequest, wtime time.Duration, onEvent func(encoding.WatcherEvent)) (*oracleConn, encoding.ConnectResponse, error) {
	var resp encoding.ConnectResponse
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, resp, fmt.Errorf("oracle: dial %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if req.Passwd == nil {
		req.Passwd = make([]byte, 16)
	}
	req.HasReadOnly = true
	if _, err := encoding.WriteFrame(nc, nil, &req); err != nil {
		nc.Close()
		return nil, resp, fmt.Errorf("oracle: write connect request: %w", err)
	}
	r := bufio.NewReader(nc)
	frame, err := encoding.ReadFrame(r, nil, encoding.DefaultMaxFrameBytes)
	if err != nil {
		nc.Close()
		return nil, resp, fmt.Errorf("oracle: read connect response: %w", err)
	}
	if err := encoding.DecodeRecord(frame, &resp); err != nil {
		nc.Close()
		return nil, resp, fmt.Errorf("oracle: decode connect response: %w", err)
	}
	if resp.TimeOut <= 0 {
		nc.Close()
		return nil, resp, errOracleExpired
	}
	if !stop() {
		nc.Close()
		return nil, resp, ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	c := &oracleConn{
		nc:      nc,
		timeout: time.Duration(resp.TimeOut) * time.Millisecond,
		wtime:   wtime,
		onEvent: onEvent,
		calls:   make(map[encoding.Xid]*oracleCall),
		closed:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	go c.readLoop(r)
	go c.pingLoop()
	return c, resp, nil
}

// start sends one request and returns the call to wait on. It does not wait for the reply.
func (c *oracleConn) start(op encoding.Op, req encoding.Record) *oracleCall {
	call := &oracleCall{op: op, done: make(chan struct{})}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.xid++
	if c.xid <= 0 { // wrapped: negative xids are reserved
		c.xid = 1
	}
	xid := c.xid
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		call.fail(err)
		return call
	}
	c.calls[xid] = call
	c.mu.Unlock()
	if err := c.write(encoding.RequestHeader{Xid: xid, Op: op}, req); err != nil {
		c.fail(fmt.Errorf("oracle: write %v: %w", op, err))
	}
	return call
}

// write sends one frame; wmu must be held.
func (c *oracleConn) write(hdr encoding.RequestHeader, req encoding.Record) error {
	c.nc.SetWriteDeadline(time.Now().Add(c.wtime))
	var err error
	c.wbuf, err = encoding.WriteFrame(c.nc, c.wbuf, &hdr, req)
	return err
}

// wait returns the reply of call, or an error when it does not come within ctx.
func (call *oracleCall) wait(ctx context.Context) (encoding.ReplyHeader, encoding.Record, error) {
	select {
	case <-call.done:
		return call.hdr, call.resp, call.err
	case <-ctx.Done():
		return encoding.ReplyHeader{}, nil, fmt.Errorf("oracle: no reply to %v: %w", call.op, ctx.Err())
	}
}

func (call *oracleCall) fail(err error) {
	call.err = err
	close(call.done)
}

// call sends one request and waits for its reply within ctx.
func (c *oracleConn) call(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.ReplyHeader, encoding.Record, error) {
	return c.start(op, req).wait(ctx)
}

func (c *oracleConn) readLoop(r *bufio.Reader) {
	defer close(c.done)
	var buf []byte
	for {
		// Pings every timeout/3 keep replies coming; silence for a whole timeout means the
		// server or the network is gone.
		c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		frame, err := encoding.ReadFrame(r, buf, 0)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				err = fmt.Errorf("%w: %w", errOracleHungUp, err)
			}
			c.fail(fmt.Errorf("oracle: read: %w", err))
			return
		}
		buf = frame[:0]
		d := encoding.NewDecoder(frame)
		var hdr encoding.ReplyHeader
		hdr.Decode(d)
		if d.Err() != nil {
			c.fail(fmt.Errorf("oracle: decode reply header: %w", d.Err()))
			return
		}
		switch hdr.Xid {
		case encoding.XidNotification:
			var ev encoding.WatcherEvent
			ev.Decode(d)
			if d.Err() != nil {
				c.fail(fmt.Errorf("oracle: decode notification: %w", d.Err()))
				return
			}
			if c.onEvent != nil {
				c.onEvent(ev)
			}
			continue
		case encoding.XidPing:
			continue
		}
		c.mu.Lock()
		call := c.calls[hdr.Xid]
		delete(c.calls, hdr.Xid)
		c.mu.Unlock()
		if call == nil {
			continue // a reply nobody waits for any more
		}
		call.hdr = hdr
		if hdr.Err == encoding.ErrOK {
			if resp, ok := encoding.NewResponse(call.op); ok {
				resp.Decode(d)
				if d.Err() != nil {
					call.fail(fmt.Errorf("oracle: decode %v reply: %w", call.op, d.Err()))
					continue
				}
				call.resp = resp
			}
		}
		close(call.done)
	}
}

func (c *oracleConn) pingLoop() {
	t := time.NewTicker(max(c.timeout/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.closed:
			return
		}
		c.wmu.Lock()
		err := c.write(encoding.RequestHeader{Xid: encoding.XidPing, Op: encoding.OpPing}, nil)
		c.wmu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("oracle: ping: %w", err))
			return
		}
	}
}

// fail records the first error, closes the connection and fails every waiting call.
func (c *oracleConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	calls := c.calls
	c.calls = map[encoding.Xid]*oracleCall{}
	c.mu.Unlock()
	c.close()
	for _, call := range calls {
		call.fail(err)
	}
}

// close closes the socket; the reader then fails what is still waiting. Idempotent; it does
// not block on the network.
func (c *oracleConn) close() {
	c.once.Do(func() {
		close(c.closed)
		c.nc.Close()
	})
}

// dead reports whether the connection has failed or been closed.
func (c *oracleConn) dead() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// closeSession ends the twin session (its ephemerals are deleted on ZooKeeper) and closes the
// connection. It returns the zxid of ZooKeeper's closeSession.
func (c *oracleConn) closeSession(ctx context.Context) (encoding.Zxid, error) {
	defer c.close()
	hdr, _, err := c.call(ctx, encoding.OpCloseSession, nil)
	if err != nil {
		return 0, err
	}
	if hdr.Err != encoding.ErrOK {
		return hdr.Zxid, hdr.Err
	}
	return hdr.Zxid, nil
}

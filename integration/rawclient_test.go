package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// rawClient speaks the wire protocol with the project's own encoding, for what go-zookeeper
// cannot send (getChildren 8, create2, the 45-byte handshake, bad paths, garbage).
type rawClient struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	xid  encoding.Xid
	// Session is the ConnectResponse of the handshake.
	Session encoding.ConnectResponse
	// events are the watch notifications read so far and not yet taken.
	events []rawEvent
}

// rawEvent is one watch notification with the zxid of its header.
type rawEvent struct {
	encoding.WatcherEvent
	Zxid encoding.Zxid
}

func (e rawEvent) String() string { return fmt.Sprintf("%v %s", e.Type, e.Path) }

// dialRaw connects without a handshake.
func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawClient{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// handshake sends req and reads the ConnectResponse in the shape of the request.
func (c *rawClient) handshake(req encoding.ConnectRequest) (encoding.ConnectResponse, error) {
	if req.Passwd == nil {
		req.Passwd = make([]byte, 16)
	}
	if _, err := c.conn.Write(encoding.AppendFrame(nil, &req)); err != nil {
		return encoding.ConnectResponse{}, err
	}
	frame, err := encoding.ReadFrame(c.r, nil, encoding.DefaultMaxFrameBytes)
	if err != nil {
		return encoding.ConnectResponse{}, err
	}
	var resp encoding.ConnectResponse
	if err := encoding.DecodeRecord(frame, &resp); err != nil {
		return resp, err
	}
	if len(frame) != 36 && len(frame) != 37 {
		return resp, fmt.Errorf("ConnectResponse of %d bytes", len(frame))
	}
	resp.HasReadOnly = len(frame) == 37
	c.Session = resp
	return resp, nil
}

// connectRaw dials and opens a new session with the 45-byte (readOnly flag) handshake.
func connectRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	return connectRawTimeout(t, addr, 10000)
}

// connectRawTimeout is connectRaw asking for the given session timeout in ms.
func connectRawTimeout(t testing.TB, addr string, timeoutMs int32) *rawClient {
	t.Helper()
	c := dialRaw(t, addr)
	resp, err := c.handshake(encoding.ConnectRequest{TimeOut: timeoutMs, HasReadOnly: true})
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	if resp.SessionID == 0 {
		t.Fatalf("handshake with %s: no session", addr)
	}
	return c
}

// expectSessionGone asks, on a new connection to addr, to resume the session of sess with the
// given timeout, and checks that the answer is the one for a session that has ended (closed or
// expired): a ConnectResponse with timeout 0. what names the case in the error.
func expectSessionGone(t testing.TB, addr string, sess encoding.ConnectResponse, timeoutMs int32, what string) {
	t.Helper()
	c := dialRaw(t, addr)
	resp, err := c.handshake(encoding.ConnectRequest{SessionID: sess.SessionID, Passwd: sess.Passwd, TimeOut: timeoutMs, HasReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.TimeOut != 0 {
		t.Errorf("%s: %+v, want timeout 0", what, resp)
	}
}

// send writes one request frame with the next xid and returns that xid.
func (c *rawClient) send(op encoding.Op, req encoding.Record) encoding.Xid {
	xid, err := c.trySend(op, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return xid
}

// trySend is send returning the write error instead of failing the test (for goroutines
// other than the test's).
func (c *rawClient) trySend(op encoding.Op, req encoding.Record) (encoding.Xid, error) {
	c.xid++
	frame := appendRequest(c.buf[:0], c.xid, op, req)
	if _, err := c.conn.Write(frame); err != nil {
		return c.xid, fmt.Errorf("write %v: %w", op, err)
	}
	return c.xid, nil
}

// appendRequest appends the frame of request req (nil: none, a header alone) with xid and op.
func appendRequest(b []byte, xid encoding.Xid, op encoding.Op, req encoding.Record) []byte {
	hdr := encoding.RequestHeader{Xid: xid, Op: op}
	if req == nil {
		return encoding.AppendFrame(b, &hdr)
	}
	return encoding.AppendFrame(b, &hdr, req)
}

// decodeEvent decodes the body of a watch notification whose header is hdr.
func decodeEvent(hdr encoding.ReplyHeader, body []byte) (rawEvent, error) {
	var ev encoding.WatcherEvent
	if err := encoding.DecodeRecord(body, &ev); err != nil {
		return rawEvent{}, fmt.Errorf("decode notification: %w", err)
	}
	return rawEvent{ev, hdr.Zxid}, nil
}

// readReply reads the next frame and decodes its header; the body is returned undecoded.
func (c *rawClient) readReply() (encoding.ReplyHeader, []byte, error) {
	frame, err := encoding.ReadFrame(c.r, nil, 16<<20)
	if err != nil {
		return encoding.ReplyHeader{}, nil, err
	}
	d := encoding.NewDecoder(frame)
	var hdr encoding.ReplyHeader
	hdr.Decode(d)
	if d.Err() != nil {
		return hdr, nil, d.Err()
	}
	return hdr, frame[16:], nil
}

// call sends one request and reads its reply into resp (when the reply is not an error). It
// never fails the test itself, so goroutines other than the test's may use it.
func (c *rawClient) call(op encoding.Op, req, resp encoding.Record) (encoding.ReplyHeader, error) {
	xid, err := c.trySend(op, req)
	if err != nil {
		return encoding.ReplyHeader{}, err
	}
	for {
		hdr, body, err := c.readReply()
		if err != nil {
			return hdr, err
		}
		if hdr.Xid == encoding.XidNotification {
			ev, err := decodeEvent(hdr, body)
			if err != nil {
				return hdr, err
			}
			c.events = append(c.events, ev)
			continue
		}
		if hdr.Xid == encoding.XidPing {
			continue
		}
		if hdr.Xid != xid {
			return hdr, fmt.Errorf("reply xid %d, want %d", hdr.Xid, xid)
		}
		if hdr.Err == encoding.ErrOK && resp != nil {
			if err := encoding.DecodeRecord(body, resp); err != nil {
				return hdr, fmt.Errorf("decode %v reply: %w", op, err)
			}
		}
		return hdr, nil
	}
}

// mustCall is call that fails the test on transport errors and returns the reply's error code.
func (c *rawClient) mustCall(op encoding.Op, req, resp encoding.Record) encoding.ErrCode {
	c.t.Helper()
	hdr, err := c.call(op, req, resp)
	if err != nil {
		c.t.Fatalf("%v: %v", op, err)
	}
	return hdr.Err
}

// expectClosed reads until the server closes the connection, failing if it sends more than max
// frames before closing or does not close within the deadline.
func (c *rawClient) expectClosed(maxFrames int) {
	c.t.Helper()
	c.expectClosedWithin(maxFrames, 10*time.Second)
}

// expectClosedWithin is expectClosed with a deadline of its own.
func (c *rawClient) expectClosedWithin(maxFrames int, d time.Duration) {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(d))
	for i := 0; ; i++ {
		_, _, err := c.readReply()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isConnReset(err) {
			return
		}
		if err != nil {
			c.t.Fatalf("waiting for the server to close: %v", err)
		}
		if i >= maxFrames {
			c.t.Fatalf("server sent more than %d frames instead of closing", maxFrames)
		}
	}
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func (c *rawClient) close() { c.conn.Close() }

// takeEvents returns the notifications that arrived before the last reply read, and forgets them.
func (c *rawClient) takeEvents() []rawEvent {
	ev := c.events
	c.events = nil
	return ev
}

// waitEvents reads until n notifications have arrived (or fails after 10s) and takes them.
func (c *rawClient) waitEvents(n int) []rawEvent {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(c.events) < n {
		hdr, body, err := c.readReply()
		if err != nil {
			c.t.Fatalf("waiting for %d watch events (have %v): %v", n, c.events, err)
		}
		if hdr.Xid != encoding.XidNotification {
			c.t.Fatalf("waiting for watch events: unexpected reply %+v", hdr)
		}
		var ev encoding.WatcherEvent
		if err := encoding.DecodeRecord(body, &ev); err != nil {
			c.t.Fatal(err)
		}
		c.events = append(c.events, rawEvent{ev, hdr.Zxid})
	}
	return c.takeEvents()
}

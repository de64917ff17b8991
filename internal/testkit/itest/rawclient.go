package itest

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

// RawClient speaks the wire protocol with the project's own encoding, for what go-zookeeper
// cannot send (getChildren 8, create2, the 45-byte handshake, bad paths, garbage).
type RawClient struct {
	T    testing.TB
	Conn net.Conn
	R    *bufio.Reader
	buf  []byte
	Xid  encoding.Xid
	// Session is the ConnectResponse of the handshake.
	Session encoding.ConnectResponse
	// events are the watch notifications read so far and not yet taken.
	Events []RawEvent
}

// RawEvent is one watch notification with the zxid of its header.
type RawEvent struct {
	encoding.WatcherEvent
	Zxid encoding.Zxid
}

// String is the event's type and path.
func (e RawEvent) String() string { return fmt.Sprintf("%v %s", e.Type, e.Path) }

// DialRaw connects without a handshake.
func DialRaw(t testing.TB, addr string) *RawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return &RawClient{T: t, Conn: conn, R: bufio.NewReader(conn)}
}

// Handshake sends req and reads the ConnectResponse in the shape of the request.
func (c *RawClient) Handshake(req encoding.ConnectRequest) (encoding.ConnectResponse, error) {
	if req.Passwd == nil {
		req.Passwd = make([]byte, 16)
	}
	if _, err := c.Conn.Write(encoding.AppendFrame(nil, &req)); err != nil {
		return encoding.ConnectResponse{}, err
	}
	frame, err := encoding.ReadFrame(c.R, nil, encoding.DefaultMaxFrameBytes)
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

// ConnectRaw dials and opens a new session with the 45-byte (readOnly flag) handshake.
func ConnectRaw(t testing.TB, addr string) *RawClient {
	t.Helper()
	return ConnectRawTimeout(t, addr, 10000)
}

// ConnectRawTimeout is ConnectRaw asking for the given session timeout in ms.
func ConnectRawTimeout(t testing.TB, addr string, timeoutMs int32) *RawClient {
	t.Helper()
	c := DialRaw(t, addr)
	resp, err := c.Handshake(encoding.ConnectRequest{TimeOut: timeoutMs, HasReadOnly: true})
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	if resp.SessionID == 0 {
		t.Fatalf("handshake with %s: no session", addr)
	}
	return c
}

// Send writes one request frame with the next xid and returns that xid.
func (c *RawClient) Send(op encoding.Op, req encoding.Record) encoding.Xid {
	xid, err := c.TrySend(op, req)
	if err != nil {
		c.T.Fatal(err)
	}
	return xid
}

// TrySend is send returning the write error instead of failing the test (for goroutines
// other than the test's).
func (c *RawClient) TrySend(op encoding.Op, req encoding.Record) (encoding.Xid, error) {
	c.Xid++
	frame := AppendRequest(c.buf[:0], c.Xid, op, req)
	if _, err := c.Conn.Write(frame); err != nil {
		return c.Xid, fmt.Errorf("write %v: %w", op, err)
	}
	return c.Xid, nil
}

// AppendRequest appends the frame of request req (nil: none, a header alone) with xid and op.
func AppendRequest(b []byte, xid encoding.Xid, op encoding.Op, req encoding.Record) []byte {
	hdr := encoding.RequestHeader{Xid: xid, Op: op}
	if req == nil {
		return encoding.AppendFrame(b, &hdr)
	}
	return encoding.AppendFrame(b, &hdr, req)
}

// DecodeEvent decodes the body of a watch notification whose header is hdr.
func DecodeEvent(hdr encoding.ReplyHeader, body []byte) (RawEvent, error) {
	var ev encoding.WatcherEvent
	if err := encoding.DecodeRecord(body, &ev); err != nil {
		return RawEvent{}, fmt.Errorf("decode notification: %w", err)
	}
	return RawEvent{ev, hdr.Zxid}, nil
}

// ReadReply reads the next frame and decodes its header; the body is returned undecoded.
func (c *RawClient) ReadReply() (encoding.ReplyHeader, []byte, error) {
	frame, err := encoding.ReadFrame(c.R, nil, 16<<20)
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

// callTimeout is how long a Call may take: each has it from its start, so that a long script
// on one connection (a loaded machine's hundreds of calls) does not run out of a deadline set
// when it was dialled.
const callTimeout = 30 * time.Second

// Call sends one request and reads its reply into resp (when the reply is not an error), within
// callTimeout. It never fails the test itself, so goroutines other than the test's may use it.
func (c *RawClient) Call(op encoding.Op, req, resp encoding.Record) (encoding.ReplyHeader, error) {
	c.Conn.SetDeadline(time.Now().Add(callTimeout))
	xid, err := c.TrySend(op, req)
	if err != nil {
		return encoding.ReplyHeader{}, err
	}
	for {
		hdr, body, err := c.ReadReply()
		if err != nil {
			return hdr, err
		}
		if hdr.Xid == encoding.XidNotification {
			ev, err := DecodeEvent(hdr, body)
			if err != nil {
				return hdr, err
			}
			c.Events = append(c.Events, ev)
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

// MustCall is call that fails the test on transport errors and returns the reply's error code.
func (c *RawClient) MustCall(op encoding.Op, req, resp encoding.Record) encoding.ErrCode {
	c.T.Helper()
	hdr, err := c.Call(op, req, resp)
	if err != nil {
		c.T.Fatalf("%v: %v", op, err)
	}
	return hdr.Err
}

// ExpectClosed reads until the server closes the connection, failing if it sends more than max
// frames before closing or does not close within the deadline.
func (c *RawClient) ExpectClosed(maxFrames int) {
	c.T.Helper()
	c.ExpectClosedWithin(maxFrames, 10*time.Second)
}

// ExpectClosedWithin is ExpectClosed with a deadline of its own.
func (c *RawClient) ExpectClosedWithin(maxFrames int, d time.Duration) {
	c.T.Helper()
	c.Conn.SetReadDeadline(time.Now().Add(d))
	for i := 0; ; i++ {
		_, _, err := c.ReadReply()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || IsConnReset(err) {
			return
		}
		if err != nil {
			c.T.Fatalf("waiting for the server to close: %v", err)
		}
		if i >= maxFrames {
			c.T.Fatalf("server sent more than %d frames instead of closing", maxFrames)
		}
	}
}

// IsConnReset reports whether err is a connection error other than a timeout.
func IsConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// Close closes the connection.
func (c *RawClient) Close() { c.Conn.Close() }

// TakeEvents returns the notifications that arrived before the last reply read, and forgets them.
func (c *RawClient) TakeEvents() []RawEvent {
	ev := c.Events
	c.Events = nil
	return ev
}

// WaitEvents reads until n notifications have arrived (or fails after 10s) and takes them.
func (c *RawClient) WaitEvents(n int) []RawEvent {
	c.T.Helper()
	c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(c.Events) < n {
		hdr, body, err := c.ReadReply()
		if err != nil {
			c.T.Fatalf("waiting for %d watch events (have %v): %v", n, c.Events, err)
		}
		if hdr.Xid != encoding.XidNotification {
			c.T.Fatalf("waiting for watch events: unexpected reply %+v", hdr)
		}
		var ev encoding.WatcherEvent
		if err := encoding.DecodeRecord(body, &ev); err != nil {
			c.T.Fatal(err)
		}
		c.Events = append(c.Events, RawEvent{ev, hdr.Zxid})
	}
	return c.TakeEvents()
}

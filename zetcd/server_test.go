package zetcd_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// ---- harness ------------------------------------------------------------------------------

// testServer is a Server on 127.0.0.1:0 in front of a zetcdtest.Backend. It is closed in
// t.Cleanup, which also fails the test if the server recovered from more panics than
// allowedPanics.
type testServer struct {
	t    *testing.T
	srv  *zetcd.Server
	b    *zetcdtest.Backend
	addr string

	serveDone chan struct{}
	serveErr  error

	panics        atomic.Int32 // log entries about recovered panics
	allowedPanics int32
}

// testConfig is the configuration most tests use: short minimum timeout so expiry tests are
// fast, long maximum so other tests never expire.
func testConfig() zetcd.Config {
	return zetcd.Config{MinSessionTimeout: 200 * time.Millisecond, MaxSessionTimeout: 30 * time.Second, Version: "3.9.0-zetcd-test"}
}

func startTestServer(t *testing.T, cfg zetcd.Config) *testServer {
	t.Helper()
	return startTestServerWith(t, cfg, nil)
}

// startTestServerWith is startTestServer serving wrap(ts.b), unless wrap is nil.
func startTestServerWith(t *testing.T, cfg zetcd.Config, wrap func(*zetcdtest.Backend) zetcd.Backend) *testServer {
	t.Helper()
	ts := &testServer{t: t, b: zetcdtest.NewBackend(t), serveDone: make(chan struct{})}
	var backend zetcd.Backend = ts.b
	if wrap != nil {
		backend = wrap(ts.b)
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zapcore.DebugLevel), zaptest.WrapOptions(zap.Hooks(func(e zapcore.Entry) error {
			if strings.HasPrefix(e.Message, "panic") {
				ts.panics.Add(1)
			}
			return nil
		})))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ts.srv = zetcd.NewServer(backend, cfg)
	go func() {
		ts.serveErr = ts.srv.Serve(ln)
		close(ts.serveDone)
	}()
	t.Cleanup(func() {
		if err := ts.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case <-ts.serveDone:
			if ts.serveErr != nil {
				t.Errorf("Serve returned %v after Close, want nil", ts.serveErr)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
		if n := ts.panics.Load(); n > ts.allowedPanics {
			t.Errorf("server recovered from %d panics, want at most %d", n, ts.allowedPanics)
		}
	})
	return ts
}

// testClient speaks the protocol with raw frames over a real TCP connection.
type testClient struct {
	t      *testing.T
	nc     net.Conn
	br     *bufio.Reader
	xid    encoding.Xid
	sid    encoding.SessionID
	passwd []byte
}

const ioTimeout = 5 * time.Second

func (ts *testServer) dial() *testClient {
	ts.t.Helper()
	nc, err := net.DialTimeout("tcp", ts.addr, ioTimeout)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { nc.Close() })
	return &testClient{t: ts.t, nc: nc, br: bufio.NewReader(nc)}
}

// connect opens a new session with a 45-byte ConnectRequest asking for timeoutMs.
func (ts *testServer) connect(timeoutMs int32) *testClient {
	ts.t.Helper()
	c := ts.dial()
	resp, _ := c.handshake(&encoding.ConnectRequest{TimeOut: timeoutMs, Passwd: make([]byte, 16), HasReadOnly: true})
	if resp.TimeOut <= 0 || resp.SessionID == 0 {
		ts.t.Fatalf("connect: got %+v, want a session", resp)
	}
	return c
}

// resume resumes c's session on a new connection.
func (ts *testServer) resume(old *testClient, timeoutMs int32) *testClient {
	ts.t.Helper()
	c := ts.dial()
	resp, _ := c.handshake(&encoding.ConnectRequest{TimeOut: timeoutMs, SessionID: old.sid, Passwd: old.passwd})
	if resp.SessionID != old.sid {
		ts.t.Fatalf("resume: got %+v, want session %v", resp, old.sid)
	}
	return c
}

func (c *testClient) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *testClient) writeFrame(recs ...encoding.Record) {
	c.t.Helper()
	c.write(encoding.AppendFrame(nil, recs...))
}

// rawFrame frames payload.
func rawFrame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

func (c *testClient) readFrame() []byte {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := encoding.ReadFrame(c.br, nil, 16<<20)
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return b
}

// handshake sends req and returns the response and its payload size.
func (c *testClient) handshake(req *encoding.ConnectRequest) (encoding.ConnectResponse, int) {
	c.t.Helper()
	c.writeFrame(req)
	b := c.readFrame()
	var resp encoding.ConnectResponse
	if err := encoding.DecodeRecord(b, &resp); err != nil {
		c.t.Fatalf("decode connect response: %v", err)
	}
	c.sid, c.passwd = resp.SessionID, resp.Passwd
	return resp, len(b)
}

// send writes one request and returns its xid.
func (c *testClient) send(op encoding.Op, body encoding.Record) encoding.Xid {
	c.t.Helper()
	c.xid++
	c.writeFrame(&encoding.RequestHeader{Xid: c.xid, Op: op}, body)
	return c.xid
}

// readReply reads one reply, decoding the body into body when the reply is a success.
func (c *testClient) readReply(body encoding.Record) encoding.ReplyHeader {
	c.t.Helper()
	b := c.readFrame()
	var h encoding.ReplyHeader
	if err := encoding.DecodeRecord(b, &h); err != nil {
		c.t.Fatalf("decode reply header: %v", err)
	}
	if h.Err == encoding.ErrOK && body != nil {
		if err := encoding.DecodeRecord(b[encoding.ReplyHeaderSize:], body); err != nil {
			c.t.Fatalf("decode reply body (xid %v): %v", h.Xid, err)
		}
	}
	return h
}

// call sends a request and reads its reply, checking the xid.
func (c *testClient) call(op encoding.Op, req, resp encoding.Record) encoding.ReplyHeader {
	c.t.Helper()
	xid := c.send(op, req)
	h := c.readReply(resp)
	if h.Xid != xid {
		c.t.Fatalf("%v: reply xid %v, want %v", op, h.Xid, xid)
	}
	return h
}

func (c *testClient) ping() encoding.ReplyHeader {
	c.t.Helper()
	c.writeFrame(&encoding.RequestHeader{Xid: encoding.XidPing, Op: encoding.OpPing})
	h := c.readReply(nil)
	if h.Xid != encoding.XidPing || h.Err != encoding.ErrOK {
		c.t.Fatalf("ping reply %+v", h)
	}
	return h
}

// expectEOF checks that the server closes the connection with nothing more to read.
func (c *testClient) expectEOF() {
	c.t.Helper()
	c.expectClosed(false)
}

// expectClosedUnanswered checks that the server closes the connection without another frame.
// The close may come as a reset: the server does not read the rest of a request it refuses.
func (c *testClient) expectClosedUnanswered() {
	c.t.Helper()
	c.expectClosed(true)
}

// expectClosed reads to the end of the connection and checks that nothing came, and that it
// ended with EOF (or a reset, if allowed).
func (c *testClient) expectClosed(resetAllowed bool) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := io.ReadAll(c.br)
	if len(b) > 0 {
		c.t.Fatalf("expected the connection closed, read %d more bytes: %x", len(b), b)
	}
	if err != nil && !(resetAllowed && errors.Is(err, syscall.ECONNRESET)) {
		c.t.Fatalf("expected the connection closed, got %v", err)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// ---- handshake ----------------------------------------------------------------------------

func TestServerHandshakeShapes(t *testing.T) {
	for _, tc := range []struct {
		readOnlyByte       bool
		reqSize, respSize  int
		readOnlyFlagOnWire bool
	}{
		{false, 44, 36, false},
		{true, 45, 37, true},
	} {
		t.Run(fmt.Sprintf("request%d", tc.reqSize), func(t *testing.T) {
			ts := startTestServer(t, testConfig())
			c := ts.dial()
			req := &encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: tc.readOnlyByte}
			if n := len(encoding.AppendRecord(nil, req)); n != tc.reqSize {
				t.Fatalf("request encodes to %d bytes, want %d", n, tc.reqSize)
			}
			resp, size := c.handshake(req)
			if size != tc.respSize {
				t.Errorf("response is %d bytes, want %d", size, tc.respSize)
			}
			if resp.ProtocolVersion != 0 || resp.TimeOut != 10000 || resp.SessionID == 0 || len(resp.Passwd) != 16 || resp.ReadOnly {
				t.Errorf("response %+v", resp)
			}
			if string(resp.Passwd) != string(ts.b.Session(resp.SessionID).Password()) {
				t.Errorf("password %x, want the backend's", resp.Passwd)
			}
			c.ping()
		})
	}
}

func TestServerTimeoutClamp(t *testing.T) {
	cfg := testConfig()
	cfg.MinSessionTimeout, cfg.MaxSessionTimeout = 500*time.Millisecond, 5*time.Second
	ts := startTestServer(t, cfg)
	for _, tc := range []struct{ asked, want int32 }{{1, 500}, {-5, 500}, {499, 500}, {2000, 2000}, {5000, 5000}, {60000, 5000}} {
		c := ts.dial()
		resp, _ := c.handshake(&encoding.ConnectRequest{TimeOut: tc.asked, Passwd: make([]byte, 16)})
		if resp.TimeOut != tc.want {
			t.Errorf("asked %d ms: negotiated %d ms, want %d", tc.asked, resp.TimeOut, tc.want)
		}
		if got := ts.b.LastConnect().Timeout; got != time.Duration(tc.want)*time.Millisecond {
			t.Errorf("asked %d ms: backend got %v", tc.asked, got)
		}
	}
}

func TestSessionExpiredHandshake(t *testing.T) {
	ts := startTestServer(t, testConfig())
	live := ts.connect(10000)
	for _, tc := range []struct {
		name     string
		req      encoding.ConnectRequest
		respSize int
	}{
		{"unknown44", encoding.ConnectRequest{TimeOut: 10000, SessionID: 0x7777, Passwd: make([]byte, 16)}, 36},
		{"unknown45", encoding.ConnectRequest{TimeOut: 10000, SessionID: 0x7777, Passwd: make([]byte, 16), HasReadOnly: true}, 37},
		{"wrongPassword", encoding.ConnectRequest{TimeOut: 10000, SessionID: live.sid, Passwd: make([]byte, 16)}, 36},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dial()
			resp, size := c.handshake(&tc.req)
			want := encoding.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: tc.req.HasReadOnly}
			if resp.TimeOut != 0 || resp.SessionID != 0 || string(resp.Passwd) != string(want.Passwd) || resp.ReadOnly || size != tc.respSize {
				t.Errorf("response %+v (%d bytes), want %+v (%d bytes)", resp, size, want, tc.respSize)
			}
			c.expectEOF()
		})
	}
	live.ping() // the live session is unaffected by a wrong password
}

func TestServerConnectRefused(t *testing.T) {
	ts := startTestServer(t, testConfig())
	t.Run("zxidAhead", func(t *testing.T) {
		c := ts.dial()
		c.writeFrame(&encoding.ConnectRequest{TimeOut: 10000, LastZxidSeen: 1000, Passwd: make([]byte, 16)})
		c.expectEOF()
	})
	t.Run("backendError", func(t *testing.T) {
		ts.b.SetConnectHook(func(zetcd.ConnectParams) error { return errors.New("etcd down") })
		c := ts.dial()
		c.writeFrame(&encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
		c.expectEOF()
	})
}

func TestServerBadConnectFrames(t *testing.T) {
	ts := startTestServer(t, testConfig())
	for name, in := range map[string][]byte{
		"negative": binary.BigEndian.AppendUint32(nil, 0xfffffff0),
		"oversize": binary.BigEndian.AppendUint32(nil, encoding.DefaultMaxFrameBytes+1),
		"short":    rawFrame(make([]byte, 20)),
		"empty":    rawFrame(nil),
	} {
		t.Run(name, func(t *testing.T) {
			c := ts.dial()
			c.write(in)
			c.expectEOF()
		})
	}
	ts.connect(10000).ping()
}

// ---- requests -----------------------------------------------------------------------------

func TestConnPing(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	if h := c.ping(); h.Zxid != 0 {
		t.Errorf("first ping zxid %v, want 0", h.Zxid)
	}
	var cr encoding.CreateResponse
	h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/a", Data: []byte("x")}, &cr)
	if h.Err != encoding.ErrOK || cr.Path != "/a" || h.Zxid <= 0 {
		t.Fatalf("create: %+v %+v", h, cr)
	}
	if p := c.ping(); p.Zxid != h.Zxid {
		t.Errorf("ping zxid %v, want the last reply's %v", p.Zxid, h.Zxid)
	}
}

// TestConnPingWhileArmingWatch: a ping answered while a request that arms a watch executes
// carries no zxid past what the connection has written, nor does the reply after it: the
// backend may still hand over that watch's events up to its LastZxid (Session.LastZxid), and a
// client takes every zxid it is sent as seen, so a reconnect's setWatches would skip them.
// Before and after that request, pings carry LastZxid.
func TestConnPingWhileArmingWatch(t *testing.T) {
	const ahead = 1000
	entered, release := make(chan struct{}), make(chan struct{})
	ts := startTestServerWith(t, testConfig(), func(b *zetcdtest.Backend) zetcd.Backend {
		return &armingBackend{Backend: b, ahead: ahead, entered: entered, release: release}
	})
	c := ts.connect(10000)
	h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/a"}, nil)
	if h.Err != encoding.ErrOK || h.Zxid <= 0 {
		t.Fatalf("create: %+v", h)
	}
	if p := c.ping(); p.Zxid != h.Zxid+ahead {
		t.Errorf("ping before the watch: zxid %v, want LastZxid %v", p.Zxid, h.Zxid+ahead)
	}
	written := h.Zxid + ahead

	xid := c.send(encoding.OpGetData, &encoding.GetDataRequest{Path: "/a", Watch: true})
	waitClosed(t, entered, ioTimeout, "getData to arm its watch")
	// Another session writes meanwhile: LastZxid moves on.
	other := ts.connect(10000).call(encoding.OpCreate, &encoding.CreateRequest{Path: "/b"}, nil)
	if other.Err != encoding.ErrOK || other.Zxid <= h.Zxid {
		t.Fatalf("create by another session: %+v", other)
	}
	if p := c.ping(); p.Zxid != written {
		t.Errorf("ping while a watch is armed: zxid %v, want %v, the highest written", p.Zxid, written)
	}
	close(release)
	if r := c.readReply(nil); r.Xid != xid || r.Err != encoding.ErrOK || r.Zxid != written {
		t.Errorf("getData reply %+v, want xid %v OK at zxid %v", r, xid, written)
	}
	if p := c.ping(); p.Zxid != other.Zxid+ahead {
		t.Errorf("ping after the watch: zxid %v, want LastZxid %v", p.Zxid, other.Zxid+ahead)
	}
}

// armingBackend's sessions know of a zxid (LastZxid) ahead of the newest they answered by
// ahead, as a backend whose feed has applied other sessions' writes, and hold a getData that
// arms a watch, after closing entered, until release is closed.
type armingBackend struct {
	*zetcdtest.Backend
	ahead            encoding.Zxid
	entered, release chan struct{}
}

type armingSession struct {
	zetcd.Session
	lastZxid func() encoding.Zxid
}

func (b *armingBackend) Connect(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	s, err := b.Backend.Connect(ctx, p)
	if err != nil {
		return nil, err
	}
	call := zetcd.Call(s)
	inv := func(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
		if gd, ok := req.(*encoding.GetDataRequest); ok && gd.Watch {
			close(b.entered)
			<-b.release
		}
		return call(ctx, op, req)
	}
	return &armingSession{Session: zetcd.Forward(s, inv), lastZxid: func() encoding.Zxid { return s.LastZxid() + b.ahead }}, nil
}

func (s *armingSession) LastZxid() encoding.Zxid { return s.lastZxid() }

// ReadyToRead is false: the executor runs the getData, and the reader answers pings meanwhile.
func (s *armingSession) ReadyToRead() bool { return false }

// TestConnIdleIsOneGoroutine: a connection that has been served and is waiting for its next
// request is one goroutine, its reader, moved to a goroutine of its own once idle (awaitIdle);
// the executor and the writer have exited, and a new request starts them again.
func TestConnIdleIsOneGoroutine(t *testing.T) {
	t.Cleanup(zetcd.SetIdleAfter(100 * time.Millisecond))
	ts := startTestServer(t, testConfig())
	const n = 20
	clients := make([]*testClient, n)
	for i := range clients {
		c := ts.connect(10000)
		var cr encoding.CreateResponse
		if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: fmt.Sprintf("/idle%d", i)}, &cr); h.Err != encoding.ErrOK {
			t.Fatalf("create: %+v", h)
		}
		c.ping()
		clients[i] = c
	}
	// Connection goroutines by role: once idle, the reader waits in a goroutine of its own
	// (awaitIdle).
	roles := func() (readers, others int) {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			switch {
			case strings.Contains(g, "(*Server).awaitIdle"):
				readers++
			case strings.Contains(g, "(*clientConn)."):
				others++
			}
		}
		return readers, others
	}
	deadline := time.Now().Add(ioTimeout)
	for {
		readers, others := roles()
		if readers == n && others == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle: %d readers waiting and %d other connection goroutines, want %d and 0", readers, others, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Served again after being idle: requests and pings still answered, in order.
	for i, c := range clients {
		var gr encoding.GetDataResponse
		if h := c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: fmt.Sprintf("/idle%d", i)}, &gr); h.Err != encoding.ErrOK {
			t.Fatalf("getData after idle: %+v", h)
		}
		c.ping()
	}
}

// TestFrameSlowerThanIdleProbe: a frame whose first bytes come while the reader waits for an
// idle connection's next request, and whose rest comes later than the idle probe (but well
// within the session timeout), is served: the probe only moves an idle wait to a new
// goroutine, it never bounds the reading of a frame.
func TestFrameSlowerThanIdleProbe(t *testing.T) {
	t.Cleanup(zetcd.SetIdleAfter(50 * time.Millisecond))
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	var cr encoding.CreateResponse
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/slow", Data: []byte("d")}, &cr); h.Err != encoding.ErrOK {
		t.Fatalf("create: %+v", h)
	}
	for _, split := range []int{2, 10, 20} { // inside the length prefix, the header, the body
		c.xid++
		frame := encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: c.xid, Op: encoding.OpGetData}, &encoding.GetDataRequest{Path: "/slow"})
		c.write(frame[:split])
		time.Sleep(200 * time.Millisecond)
		c.write(frame[split:])
		var gr encoding.GetDataResponse
		if h := c.readReply(&gr); h.Xid != c.xid || h.Err != encoding.ErrOK || string(gr.Data) != "d" {
			t.Fatalf("frame split after %d bytes: reply %+v %q", split, h, gr.Data)
		}
	}
}

// TestPipelinedReadsAfterWrites: a read the reader could run itself (the backend answers it
// from memory) still waits for the requests read before it: pipelined creates, each followed
// by a getData and an exists of its node, are answered in order, and every read sees its node.
func TestPipelinedReadsAfterWrites(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	const n = 300
	var frames []byte
	var xid encoding.Xid
	for i := range n {
		path := fmt.Sprintf("/pipe%d", i)
		for _, req := range []struct {
			op   encoding.Op
			body encoding.Record
		}{
			{encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: []byte("d")}},
			{encoding.OpGetData, &encoding.GetDataRequest{Path: path}},
			{encoding.OpExists, &encoding.ExistsRequest{Path: path}},
		} {
			xid++
			frames = encoding.AppendFrame(frames, &encoding.RequestHeader{Xid: xid, Op: req.op}, req.body)
		}
	}
	c.write(frames)
	for want := encoding.Xid(1); want <= xid; want++ {
		h := c.readReply(nil)
		if h.Xid != want || h.Err != encoding.ErrOK {
			t.Fatalf("reply %+v, want xid %v and no error", h, want)
		}
	}
	c.ping()
}

// TestConnWriterRestarts: the writer exits whenever its queue is empty and the next frame
// starts it again; no frame queued as it exits is stranded. Each round trip here finds the
// writer (and the executor) gone or going.
func TestConnWriterRestarts(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	var cr encoding.CreateResponse
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/w"}, &cr); h.Err != encoding.ErrOK {
		t.Fatalf("create: %+v", h)
	}
	for i := range 500 {
		if i%2 == 0 {
			c.ping()
			continue
		}
		var er encoding.ExistsResponse
		if h := c.call(encoding.OpExists, &encoding.ExistsRequest{Path: "/w"}, &er); h.Err != encoding.ErrOK {
			t.Fatalf("exists: %+v", h)
		}
	}
}

// TestConnFrameSizes: frames smaller and larger than the reader's buffer, sent back to back in
// one write (so that frames straddle the buffer's end), each read whole and answered in order.
func TestConnFrameSizes(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	sizes := []int{0, 100, 4000, 4070, 4096, 4097, 5000, 20000, 1, 9000}
	var batch []byte
	for i, n := range sizes {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i + j)
		}
		c.xid++
		batch = encoding.AppendFrame(batch, &encoding.RequestHeader{Xid: c.xid, Op: encoding.OpCreate},
			&encoding.CreateRequest{Path: fmt.Sprintf("/f%d", i), Data: data})
	}
	c.write(batch)
	for i := range sizes {
		var cr encoding.CreateResponse
		if h := c.readReply(&cr); h.Err != encoding.ErrOK || cr.Path != fmt.Sprintf("/f%d", i) {
			t.Fatalf("create %d: %+v %+v", i, h, cr)
		}
	}
	for i, n := range sizes {
		var gr encoding.GetDataResponse
		if h := c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: fmt.Sprintf("/f%d", i)}, &gr); h.Err != encoding.ErrOK {
			t.Fatalf("getData %d: %+v", i, h)
		}
		if len(gr.Data) != n || n > 0 && (gr.Data[0] != byte(i) || gr.Data[n-1] != byte(i+n-1)) {
			t.Errorf("getData /f%d: %d bytes, want the %d written", i, len(gr.Data), n)
		}
	}
}

// TestConnFrameByteByByte: frames that arrive a few bytes at a time, small and larger than the
// reader's buffer, are read whole.
func TestConnFrameByteByByte(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	var batch []byte
	for i, n := range []int{10, 6000} {
		c.xid++
		batch = encoding.AppendFrame(batch, &encoding.RequestHeader{Xid: c.xid, Op: encoding.OpCreate},
			&encoding.CreateRequest{Path: fmt.Sprintf("/b%d", i), Data: make([]byte, n)})
	}
	for len(batch) > 0 {
		k := min(len(batch), 3)
		c.write(batch[:k])
		batch = batch[k:]
		if len(batch)%512 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	for i := range 2 {
		var cr encoding.CreateResponse
		if h := c.readReply(&cr); h.Err != encoding.ErrOK || cr.Path != fmt.Sprintf("/b%d", i) {
			t.Fatalf("create %d: %+v %+v", i, h, cr)
		}
	}
}

func TestConnRequests(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/n", Data: []byte("v1")}, &encoding.CreateResponse{}); h.Err != 0 {
		t.Fatalf("create: %v", h.Err)
	}
	var gd encoding.GetDataResponse
	if h := c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/n"}, &gd); h.Err != 0 || string(gd.Data) != "v1" {
		t.Fatalf("getData: %+v %q", h, gd.Data)
	}
	// An ErrCode is a header-only reply carrying the handler's zxid; the connection stays.
	h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/n"}, nil)
	if h.Err != encoding.ErrNodeExists || h.Zxid == 0 {
		t.Fatalf("second create: %+v, want NodeExists with a zxid", h)
	}
	if h := c.call(encoding.OpExists, &encoding.ExistsRequest{Path: "/missing"}, nil); h.Err != encoding.ErrNoNode {
		t.Fatalf("exists: %+v", h)
	}
	if h := c.call(encoding.OpDelete, &encoding.DeleteRequest{Path: "/n", Version: -1}, nil); h.Err != 0 {
		t.Fatalf("delete: %+v", h)
	}
	var cr2 encoding.Create2Response
	if h := c.call(encoding.OpCreate2, &encoding.CreateRequest{Path: "/c2", Data: []byte("abc")}, &cr2); h.Err != 0 || cr2.Path != "/c2" || cr2.Stat.DataLength != 3 {
		t.Fatalf("create2: %+v %+v", h, cr2)
	}
	var sr encoding.SyncResponse
	if h := c.call(encoding.OpSync, &encoding.SyncRequest{Path: "/c2"}, &sr); h.Err != 0 || sr.Path != "/c2" {
		t.Fatalf("sync: %+v %+v", h, sr)
	}
}

func TestConnPipelined(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	const n = 100
	var out []byte
	for i := 1; i <= n; i++ {
		out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: encoding.Xid(i), Op: encoding.OpCreate},
			&encoding.CreateRequest{Path: fmt.Sprintf("/p%d", i)})
	}
	c.write(out)
	var last encoding.Zxid
	for i := 1; i <= n; i++ {
		var cr encoding.CreateResponse
		h := c.readReply(&cr)
		if h.Xid != encoding.Xid(i) || h.Err != 0 || cr.Path != fmt.Sprintf("/p%d", i) {
			t.Fatalf("reply %d: %+v %q", i, h, cr.Path)
		}
		if h.Zxid <= last {
			t.Fatalf("reply %d: zxid %v not above %v", i, h.Zxid, last)
		}
		last = h.Zxid
	}
}

// Requests sent right behind the ConnectRequest, before its answer, are buffered and served.
func TestConnEarlyPipelined(t *testing.T) {
	ts := startTestServer(t, testConfig())
	ts.b.SetConnectDelay(200 * time.Millisecond)
	c := ts.dial()
	out := encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true})
	out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: -4, Op: encoding.OpCreate}, &encoding.CreateRequest{Path: "/early"})
	out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: -8, Op: encoding.OpExists}, &encoding.ExistsRequest{Path: "/early"})
	out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: 1, Op: encoding.OpSync}, &encoding.SyncRequest{Path: "/"})
	c.write(out)
	var resp encoding.ConnectResponse
	if err := encoding.DecodeRecord(c.readFrame(), &resp); err != nil || resp.SessionID == 0 {
		t.Fatalf("connect response %+v, %v", resp, err)
	}
	for _, want := range []encoding.Xid{-4, -8, 1} {
		if h := c.readReply(nil); h.Xid != want || h.Err != 0 {
			t.Fatalf("reply %+v, want xid %v OK", h, want)
		}
	}
}

func TestConnSessionsIndependent(t *testing.T) {
	ts := startTestServer(t, testConfig())
	a := ts.connect(10000)
	b := ts.connect(10000)
	blockedXid := a.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/block/a"})
	ts.awaitBlocked(t, 1) // A's executor is in the blocking handler

	// Pings of the blocked session are not queued behind its slow request.
	start := time.Now()
	a.ping()
	// Session B is served while A's handler is blocked.
	if h := b.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/b"}, &encoding.CreateResponse{}); h.Err != 0 {
		t.Fatalf("B create: %+v", h)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("B (and A's ping) took %v while A was blocked", d)
	}
	close(ts.b.Unblock)
	if h := a.readReply(nil); h.Xid != blockedXid || h.Err != 0 {
		t.Fatalf("A's blocked create: %+v", h)
	}
}

// TestConnSessionGone: when the backend reports the session ended or moved elsewhere
// (Session.Done), the server closes the connection and only detaches the Session: no expiry,
// no close.
func TestConnSessionGone(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	c.call(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{})
	s := ts.b.Session(c.sid)
	close(s.Gone)
	c.expectEOF()
	select {
	case <-s.Detached:
	case <-time.After(5 * time.Second):
		t.Fatal("session not detached after Done")
	}
	if s.ExpireCalls.Load() != 0 || s.CloseCalls.Load() != 0 {
		t.Errorf("Expire called %d times, Close %d times; want neither", s.ExpireCalls.Load(), s.CloseCalls.Load())
	}
}

// TestConnSessionNotVouched: when the backend can no longer vouch for the session (Session.Done
// with Err wrapping ErrNotServing: cut off from its store), the server closes the connection as
// if the client had dropped it: the session stays resumable, and is expired at its timeout
// after the client's last packet unless it is resumed.
func TestConnSessionNotVouched(t *testing.T) {
	ts := startTestServer(t, testConfig())
	for _, resumed := range []bool{false, true} {
		c := ts.connect(300)
		c.ping()
		last := time.Now()
		s := ts.b.Session(c.sid)
		s.GoneErr = fmt.Errorf("lease lapsed: %w", zetcd.ErrNotServing)
		close(s.Gone)
		c.expectEOF()
		waitClosed(t, s.Detached, ioTimeout, "Detach")
		if !resumed {
			waitClosed(t, s.Expired, 3*time.Second, "Expire")
			if d := time.Since(last); d < 250*time.Millisecond {
				t.Errorf("expired %v after the last packet, want about 300ms", d)
			}
			continue
		}
		r := ts.resume(c, 10000)
		time.Sleep(700 * time.Millisecond) // well past the dropped connection's expiry time
		if n := s.ExpireCalls.Load(); n != 0 {
			t.Errorf("expired %d times although resumed", n)
		}
		r.ping()
	}
}

// TestConnEventBeforeReply: an event the handler hands to the EventSink while serving a
// request is written before that request's reply, and carries xid -1 and the event's zxid.
func TestConnEventBeforeReply(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	c.write(encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: 1, Op: encoding.OpAddWatch}, &encoding.AddWatchRequest{Path: "/w"}))
	var ev encoding.WatcherEvent
	h := c.readReply(&ev)
	if h.Xid != encoding.XidNotification || ev.Path != "/w" || ev.Type != encoding.EventNodeCreated {
		t.Fatalf("first frame %+v %+v, want the NodeCreated event for /w", h, ev)
	}
	var body encoding.ErrorResponse
	if h := c.readReply(&body); h.Xid != 1 || h.Err != 0 || body.Err != 0 {
		t.Fatalf("second frame %+v %+v, want the addWatch reply with ErrorResponse{0}", h, body)
	}
}

func TestConnUnimplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   encoding.Op
		body encoding.Record
	}{
		{"unknown999", 999, nil},
		{"notification0", encoding.OpNotification, nil},
		{"checkOutsideMulti13", encoding.OpCheck, &encoding.CheckVersionRequest{Path: "/", Version: 0}},
		{"unused10", 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startTestServer(t, testConfig())
			c := ts.connect(10000)
			// Pipelined: the earlier reply arrives first, then Unimplemented, then the close;
			// the request after it is not served. Unimplemented carries zxid -1, as
			// ZooKeeper's UnimplementedRequestProcessor does, though the connection has seen
			// a later one.
			out := encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: 1, Op: encoding.OpCreate}, &encoding.CreateRequest{Path: "/before"})
			out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: 2, Op: tc.op}, tc.body)
			out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: 3, Op: encoding.OpSync}, &encoding.SyncRequest{Path: "/"})
			c.write(out)
			if h := c.readReply(nil); h.Xid != 1 || h.Err != 0 || h.Zxid <= 0 {
				t.Fatalf("first reply %+v", h)
			}
			if h := c.readReply(nil); h.Xid != 2 || h.Err != encoding.ErrUnimplemented || h.Zxid != -1 {
				t.Fatalf("second reply %+v, want xid 2 Unimplemented at zxid -1", h)
			}
			c.expectEOF()
			s := ts.b.Session(c.sid)
			waitClosed(t, s.Detached, ioTimeout, "Detach")
			if s.CloseCalls.Load() != 0 || s.ExpireCalls.Load() != 0 {
				t.Errorf("session ended: close %d expire %d", s.CloseCalls.Load(), s.ExpireCalls.Load())
			}
		})
	}
}

func TestConnBadFrames(t *testing.T) {
	for name, in := range map[string][]byte{
		"oversize":    binary.BigEndian.AppendUint32(nil, encoding.DefaultMaxFrameBytes+1),
		"negative":    binary.BigEndian.AppendUint32(nil, 0x80000000),
		"shortHeader": rawFrame([]byte{0, 0, 0}),
	} {
		t.Run(name, func(t *testing.T) {
			ts := startTestServer(t, testConfig())
			c := ts.connect(10000)
			c.write(in)
			c.expectEOF()
			waitClosed(t, ts.b.Session(c.sid).Detached, ioTimeout, "Detach")
		})
	}
}

func TestConnMaxFrameBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxFrameBytes = 1024
	ts := startTestServer(t, cfg)
	c := ts.connect(10000)
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/fits", Data: make([]byte, 900)}, nil); h.Err != 0 {
		t.Fatalf("create within the limit: %+v", h)
	}
	c.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/big", Data: make([]byte, 1100)})
	c.expectClosedUnanswered()
}

func TestConnGarbageBody(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	for i, body := range [][]byte{
		{0, 0, 0, 5, '/'},             // path longer than the frame
		{0xff, 0xff, 0xff, 0xf0},      // negative path length
		{},                            // nothing at all
		{0, 0, 0, 1, '/', 0xff, 0xff}, // data length cut short
	} {
		xid := encoding.Xid(100 + i)
		payload := encoding.AppendRecord(nil, &encoding.RequestHeader{Xid: xid, Op: encoding.OpCreate})
		c.write(rawFrame(append(payload, body...)))
		if h := c.readReply(nil); h.Xid != xid || h.Err != encoding.ErrMarshallingError {
			t.Fatalf("body %x: reply %+v, want MarshallingError", body, h)
		}
	}
	// The connection still works.
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/ok"}, &encoding.CreateResponse{}); h.Err != 0 {
		t.Fatalf("create after garbage: %+v", h)
	}
}

func TestConnCloseSession(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(200)
	s := ts.b.Session(c.sid)
	c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/x"}, nil)
	xid := c.send(encoding.OpCloseSession, nil)
	if h := c.readReply(nil); h.Xid != xid || h.Err != 0 || h.Zxid == 0 {
		t.Fatalf("closeSession reply %+v", h)
	}
	c.expectEOF()
	if n := s.CloseCalls.Load(); n != 1 {
		t.Fatalf("Close called %d times", n)
	}
	time.Sleep(500 * time.Millisecond) // past the session timeout
	if d, e := s.DetachCalls.Load(), s.ExpireCalls.Load(); d != 0 || e != 0 {
		t.Errorf("after closeSession: Detach %d, Expire %d calls, want none", d, e)
	}
	// The session is gone: resuming it is refused.
	r := ts.dial()
	if resp, _ := r.handshake(&encoding.ConnectRequest{TimeOut: 10000, SessionID: c.sid, Passwd: c.passwd}); resp.TimeOut != 0 {
		t.Errorf("resume after close: %+v", resp)
	}
}

// A client that sends closeSession and hangs up at once still has its session closed.
func TestConnCloseSessionThenHangUp(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	c.send(encoding.OpCloseSession, nil)
	c.nc.Close()
	s := ts.b.Session(c.sid)
	waitClosed(t, s.Closed, ioTimeout, "Close")
}

// TestConnHandlerError: a request the backend cannot serve (a Go error, not a ZooKeeper code)
// closes the connection without a reply, and the session survives for the client to resume.
// ErrNotServing (the backend behind etcd) is logged as a warning, any other error as an error.
func TestConnHandlerError(t *testing.T) {
	for _, tc := range []struct {
		path  string
		level zapcore.Level
	}{
		{"/fail", zapcore.ErrorLevel},
		{"/notserving", zapcore.WarnLevel},
	} {
		t.Run(tc.path[1:], func(t *testing.T) {
			cfg := testConfig()
			core, logs := observer.New(zapcore.InfoLevel)
			cfg.Logger = zap.New(core)
			ts := startTestServer(t, cfg)
			c := ts.connect(10000)
			c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/before"}, nil)
			c.send(encoding.OpCreate, &encoding.CreateRequest{Path: tc.path})
			c.expectEOF()
			s := ts.b.Session(c.sid)
			waitClosed(t, s.Detached, ioTimeout, "Detach")
			if s.CloseCalls.Load() != 0 || s.ExpireCalls.Load() != 0 {
				t.Errorf("session ended after a backend error")
			}
			// The session survives: the client resumes it.
			r := ts.resume(c, 10000)
			r.ping()
			closing := logs.FilterMessageSnippet("closing the connection").All()
			if len(closing) != 1 || closing[0].Level != tc.level {
				t.Errorf("log entries on closing the connection: %v, want one at %v", closing, tc.level)
			}
		})
	}
}

func TestConnHandlerBugs(t *testing.T) {
	ts := startTestServer(t, testConfig())
	ts.allowedPanics = 1
	t.Run("panic", func(t *testing.T) {
		c := ts.connect(10000)
		c.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/panic"})
		c.expectEOF()
		waitClosed(t, ts.b.Session(c.sid).Detached, ioTimeout, "Detach")
	})
	t.Run("nilResponse", func(t *testing.T) {
		c := ts.connect(10000)
		c.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/nilresp"})
		c.expectEOF()
	})
	ts.connect(10000).ping()
	if n := ts.panics.Load(); n != 1 {
		t.Errorf("recovered %d panics, want 1", n)
	}
}

// ---- sessions -----------------------------------------------------------------------------

func TestSessionExpiresWhenSilent(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(200)
	start := time.Now()
	s := ts.b.Session(c.sid)
	waitClosed(t, s.Expired, 3*time.Second, "Expire")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("expired after %v, want about 200ms", d)
	}
	c.expectEOF()
	if s.ExpireNoop.Load() || s.CloseCalls.Load() != 0 {
		t.Errorf("expire noop %v, close calls %d", s.ExpireNoop.Load(), s.CloseCalls.Load())
	}
}

func TestSessionPingsKeepAlive(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(1000)
	s := ts.b.Session(c.sid)
	for range 4 { // 1.6 s, longer than the timeout; a stall of 0.6 s is tolerated
		time.Sleep(400 * time.Millisecond)
		c.ping()
	}
	if s.ExpireCalls.Load() != 0 {
		t.Fatalf("session expired although it pinged")
	}
}

func TestSessionDetachThenExpire(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(1000)
	s := ts.b.Session(c.sid)
	c.ping()
	last := time.Now()
	c.nc.Close()
	waitClosed(t, s.Detached, ioTimeout, "Detach")
	if s.ExpireCalls.Load() != 0 {
		t.Fatalf("expired at once")
	}
	waitClosed(t, s.Expired, 5*time.Second, "Expire")
	if d := time.Since(last); d < 900*time.Millisecond {
		t.Errorf("expired %v after the last packet, want about its timeout, 1s", d)
	}
}

func TestSessionResumeCancelsExpiry(t *testing.T) {
	ts := startTestServer(t, testConfig())
	a := ts.connect(300)
	old := ts.b.Session(a.sid)
	a.nc.Close()
	waitClosed(t, old.Detached, ioTimeout, "Detach")
	b := ts.resume(a, 10000)
	time.Sleep(700 * time.Millisecond) // well past the old connection's expiry time
	for i, s := range ts.b.Sessions(a.sid) {
		if n := s.ExpireCalls.Load(); n != 0 {
			t.Errorf("Session object %d: Expire called %d times after resume", i, n)
		}
	}
	b.ping()
}

// TestSessionResumeRefusedKeepsAlive: a detached session whose client keeps asking to resume
// it, and is refused because the backend cannot reach its store, does not expire while it asks
// (each attempt restarts its timeout); an attempt with a wrong password does not count. Once
// the backend serves again, the client resumes it.
func TestSessionResumeRefusedKeepsAlive(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(400)
	s := ts.b.Session(c.sid)
	c.nc.Close()
	waitClosed(t, s.Detached, ioTimeout, "Detach")
	ts.b.SetConnectHook(func(p zetcd.ConnectParams) error {
		return fmt.Errorf("store out of reach: %w", zetcd.ErrNotServing)
	})
	for range 8 { // 1.2 s, three timeouts
		time.Sleep(150 * time.Millisecond)
		r := ts.dial()
		r.writeFrame(&encoding.ConnectRequest{TimeOut: 400, SessionID: c.sid, Passwd: c.passwd})
		r.expectEOF()
	}
	if n := s.ExpireCalls.Load(); n != 0 {
		t.Fatalf("expired %d times while its client kept asking to resume it", n)
	}
	ts.b.SetConnectHook(nil)
	ts.resume(c, 400).ping()

	// A wrong password is not the client.
	c2 := ts.connect(300)
	s2 := ts.b.Session(c2.sid)
	c2.nc.Close()
	waitClosed(t, s2.Detached, ioTimeout, "Detach")
	ts.b.SetConnectHook(func(p zetcd.ConnectParams) error { return errors.New("store out of reach") })
	for range 4 {
		time.Sleep(100 * time.Millisecond)
		r := ts.dial()
		r.writeFrame(&encoding.ConnectRequest{TimeOut: 300, SessionID: c2.sid, Passwd: make([]byte, 16)})
		r.expectEOF()
	}
	waitClosed(t, s2.Expired, 3*time.Second, "Expire")
}

// TestExpiryRetried: a session whose expiry fails (the store out of reach) is expired again,
// a fresh timeout after the store next answers (looked at every min(timeout, 2 s)), until it
// succeeds, whether its client went away (detached) or went silent on an open connection; one
// resumed meanwhile is not.
func TestExpiryRetried(t *testing.T) {
	ts := startTestServer(t, testConfig())
	for _, gone := range []string{"closed", "silent"} {
		c := ts.connect(300)
		s := ts.b.Session(c.sid)
		s.ExpireFailures.Store(2)
		if gone == "closed" {
			c.nc.Close()
		}
		waitClosed(t, s.Expired, 3*time.Second, "Expire")
		if n := s.ExpireCalls.Load(); n != 3 {
			t.Errorf("client %s: expired after %d calls, want 3 (two failed)", gone, n)
		}
	}

	c2 := ts.connect(300)
	s2 := ts.b.Session(c2.sid)
	s2.ExpireFailures.Store(1000)
	c2.nc.Close()
	for deadline := time.Now().Add(3 * time.Second); s2.ExpireCalls.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d expiry calls 3 s after the client went, want 2 or more", s2.ExpireCalls.Load())
		}
	}
	ts.resume(c2, 300).ping()
	n := s2.ExpireCalls.Load()
	time.Sleep(time.Second)
	if m := s2.ExpireCalls.Load(); m > n+1 { // one may have been under way
		t.Errorf("expiry tried %d more times after the session was resumed", m-n)
	}
}

func TestSessionResumeClosesOldConnection(t *testing.T) {
	ts := startTestServer(t, testConfig())
	a := ts.connect(10000)
	a.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/mine"}, nil)
	b := ts.resume(a, 10000)
	a.expectEOF()
	objs := ts.b.Sessions(a.sid)
	if len(objs) != 2 {
		t.Fatalf("%d Session objects, want 2", len(objs))
	}
	waitClosed(t, objs[0].Detached, ioTimeout, "Detach of the superseded Session")
	if h := b.call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/mine"}, &encoding.GetDataResponse{}); h.Err != 0 {
		t.Fatalf("getData on the resumed session: %+v", h)
	}
	time.Sleep(100 * time.Millisecond)
	for i, s := range objs {
		if s.ExpireCalls.Load() != 0 || s.CloseCalls.Load() != 0 {
			t.Errorf("Session object %d ended", i)
		}
	}
	if objs[1].DetachCalls.Load() != 0 {
		t.Errorf("the live Session was detached")
	}
}

func TestServerClose(t *testing.T) {
	ts := startTestServer(t, testConfig())
	a := ts.connect(10000)
	b := ts.connect(200)
	b.nc.Close() // detached, with an expiry timer pending
	bs := ts.b.Session(b.sid)
	waitClosed(t, bs.Detached, ioTimeout, "Detach")
	blocked := ts.connect(10000)
	blocked.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/block/x"})
	ts.awaitBlocked(t, 1)

	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ts.serveDone, ioTimeout, "Serve to return")
	if ts.serveErr != nil {
		t.Errorf("Serve: %v", ts.serveErr)
	}
	a.expectEOF()
	blocked.expectEOF()
	for _, c := range []*testClient{a, blocked} {
		s := ts.b.Session(c.sid)
		if s.DetachCalls.Load() == 0 {
			t.Errorf("session %v not detached", c.sid)
		}
	}
	time.Sleep(300 * time.Millisecond) // b's expiry time has passed
	for _, c := range []*testClient{a, b, blocked} {
		if s := ts.b.Session(c.sid); s.ExpireCalls.Load() != 0 || s.CloseCalls.Load() != 0 {
			t.Errorf("session %v ended by Close", c.sid)
		}
	}
	if err := ts.srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := ts.srv.Serve(mustListen(t)); err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
}

func mustListen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// ---- four-letter words --------------------------------------------------------------------

// awaitBlocked waits until n creates of "/block..." paths wait in the backend.
func (ts *testServer) awaitBlocked(t *testing.T, n int64) {
	t.Helper()
	waitFor(t, func() bool { return ts.b.Blocked.Load() == n }, fmt.Sprintf("%d blocked creates", n))
}

// awaitOutstanding waits until the server holds n requests read and not yet taken up by an
// executor (srvr).
func (ts *testServer) awaitOutstanding(t *testing.T, n int) {
	t.Helper()
	want := fmt.Sprintf("\nOutstanding: %d\n", n)
	waitFor(t, func() bool { return strings.Contains(fourLetter(t, ts.addr, "srvr"), want) }, want[1:len(want)-1])
}

func fourLetter(t *testing.T, addr, in string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(nc, in); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("%q: %v", in, err)
	}
	return string(out)
}

func Test4lw(t *testing.T) {
	ts := startTestServer(t, testConfig())
	for in, want := range map[string]string{
		"ruok":   "imok",
		"ruok\n": "imok",
		"isro":   "rw",
		"wchc":   "wchc is not executed because it is not in the whitelist.\n",
		"dump":   "dump is not executed because it is not in the whitelist.\n",
		"stmk":   "stmk is not executed because it is not in the whitelist.\n",
	} {
		if got := fourLetter(t, ts.addr, in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// Test4lwDataDirs: conf and dirs report and measure the directories Config.DataDirs names.
func Test4lwDataDirs(t *testing.T) {
	snap, log := t.TempDir(), t.TempDir()
	for dir, size := range map[string]int{snap: 3, log: 5} {
		if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	cfg.FourLetterWords = []string{"conf", "dirs"}
	cfg.DataDirs = zetcd.DataDirs{Snap: snap, Log: log}
	ts := startTestServer(t, cfg)
	if got, want := fourLetter(t, ts.addr, "dirs"), "datadir_size: 3\nlogdir_size: 5\n"; got != want {
		t.Errorf("dirs: %q, want %q", got, want)
	}
	conf := fourLetter(t, ts.addr, "conf")
	for _, line := range []string{"dataDir=" + snap, "dataDirSize=3", "dataLogDir=" + log, "dataLogSize=5"} {
		if !strings.Contains(conf, line+"\n") {
			t.Errorf("conf lacks %q:\n%s", line, conf)
		}
	}
}

func Test4lwSrvr(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/z"}, nil)
	out := fourLetter(t, ts.addr, "srvr")
	for _, re := range []string{
		`(?m)^Zookeeper version: 3\.9\.0-zetcd-test, built on \d{4}-\d\d-\d\d \d\d:\d\d UTC$`,
		`(?m)^Latency min/avg/max: \d+/\d+\.\d+(E-?\d+)?/\d+$`,
		`(?m)^Received: [1-9]\d*$`,
		`(?m)^Sent: [1-9]\d*$`,
		`(?m)^Connections: [1-9]\d*$`,
		`(?m)^Outstanding: 0$`,
		fmt.Sprintf(`(?m)^Zxid: 0x%x$`, int64(h.Zxid)),
		`(?m)^Mode: standalone$`,
		`(?m)^Node count: \d+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("srvr output lacks %s:\n%s", re, out)
		}
	}
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 9 {
		t.Errorf("srvr output has %d lines:\n%s", strings.Count(out, "\n"), out)
	}
}

// ---- robustness and real clients ---------------------------------------------------------

// Random bytes into fresh connections never crash or wedge the server.
func TestServerRandomInput(t *testing.T) {
	ts := startTestServer(t, testConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	validHello := encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 200, Passwd: make([]byte, 16)})
	ops := []encoding.Op{-11, -10, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 21, 22, 100, 101, 105, 106, 107, 999}
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for i := range 300 {
		var in []byte
		switch i % 5 {
		case 0: // pure noise
			in = randBytes(rng.IntN(200))
		case 1: // a plausible small first length, then noise
			in = rawFrame(randBytes(rng.IntN(80)))
		case 2: // a handshake, then noise
			in = append(append([]byte(nil), validHello...), randBytes(rng.IntN(200))...)
		case 3: // a handshake, then well-framed requests with random ops and bodies
			in = append([]byte(nil), validHello...)
			for range 1 + rng.IntN(5) {
				payload := encoding.AppendRecord(nil, &encoding.RequestHeader{Xid: encoding.Xid(rng.Int32()), Op: ops[rng.IntN(len(ops))]})
				in = append(in, rawFrame(append(payload, randBytes(rng.IntN(60))...))...)
			}
		case 4: // a random ConnectRequest
			in = rawFrame(append(binary.BigEndian.AppendUint32(nil, 0), randBytes(40+rng.IntN(8))...))
		}
		nc, err := net.DialTimeout("tcp", ts.addr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(ioTimeout))
		nc.Write(in)
		nc.(*net.TCPConn).CloseWrite()
		_, err = io.Copy(io.Discard, nc)
		nc.Close()
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("input %d (%x): %v", i, in, err)
		}
	}
	c := ts.connect(10000)
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/after-noise"}, &encoding.CreateResponse{}); h.Err != 0 {
		t.Fatalf("create after noise: %+v", h)
	}
	c.ping()
}

type nopZkLogger struct{}

func (nopZkLogger) Printf(string, ...any) {}

func TestServerGoZookeeperClient(t *testing.T) {
	ts := startTestServer(t, testConfig())
	conn, events, err := zk.Connect([]string{ts.addr}, 10*time.Second, zk.WithLogger(nopZkLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	timeout := time.After(ioTimeout)
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-timeout:
			t.Fatal("no session")
		}
	}
	if p, err := conn.Create("/gozk", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil || p != "/gozk" {
		t.Fatalf("create: %q %v", p, err)
	}
	if data, _, err := conn.Get("/gozk"); err != nil || string(data) != "hello" {
		t.Fatalf("get: %q %v", data, err)
	}
	if ok, _, err := conn.Exists("/nope"); err != nil || ok {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if children, _, err := conn.Children("/"); err != nil || !slices.Contains(children, "gozk") {
		t.Fatalf("children: %v %v", children, err)
	}
	if _, err := conn.Create("/gozk", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := conn.Delete("/gozk", -1); err != nil {
		t.Fatalf("delete: %v", err)
	}
	sid := encoding.SessionID(conn.SessionID())
	conn.Close()
	waitClosed(t, ts.b.Session(sid).Closed, ioTimeout, "Close")
}

// TestExpiryDeferredWhileStoreOutOfReach: a detached session whose timeout runs out while the
// store is out of reach (its StatsSource not serving) is not expired meanwhile, nor at the
// moment the store answers again: it gets a fresh timeout then, as a ZooKeeper leader elected
// after an outage gives every session. Its client, which kept trying, resumes it within that
// timeout and keeps it; a session whose client does not come back is expired after it.
func TestExpiryDeferredWhileStoreOutOfReach(t *testing.T) {
	const timeout = 400 * time.Millisecond
	ts, store := startSwitchableServer(t)
	back, gone := ts.connect(int32(timeout/time.Millisecond)), ts.connect(int32(timeout/time.Millisecond))
	sBack, sGone := ts.b.Session(back.sid), ts.b.Session(gone.sid)

	store.down.Store(true)
	back.nc.Close()
	gone.nc.Close()
	time.Sleep(4 * timeout)
	for _, s := range []*zetcdtest.Session{sBack, sGone} {
		if n := s.ExpireCalls.Load(); n != 0 {
			t.Fatalf("session %v: %d expiry calls while the store was out of reach, want 0", s.ID(), n)
		}
	}

	store.down.Store(false)
	answered := time.Now()
	resumed := ts.resume(back, int32(timeout/time.Millisecond))
	for expired := false; !expired; { // the resumed client keeps its session meanwhile
		resumed.ping()
		select {
		case <-sGone.Expired:
			expired = true
		case <-time.After(timeout / 4):
			if time.Since(answered) > 5*timeout {
				t.Fatal("the session whose client went away was not expired")
			}
		}
	}
	if d := time.Since(answered); d < timeout {
		t.Errorf("session expired %v after the store answered again, before a fresh timeout %v", d, timeout)
	}
	for range 4 {
		time.Sleep(timeout / 2)
		resumed.ping()
	}
	objs := ts.b.Sessions(back.sid)
	for _, s := range []*zetcdtest.Session{sBack, objs[len(objs)-1]} {
		if n := s.ExpireCalls.Load(); n != 0 {
			t.Errorf("the session resumed after the outage had %d expiry calls, want 0", n)
		}
	}
}

// startSwitchableServer starts a test server whose store can be taken out of reach.
func startSwitchableServer(t *testing.T) (*testServer, *switchableStats) {
	store := &switchableStats{}
	cfg := testConfig()
	cfg.Stats = store
	return startTestServer(t, cfg), store
}

// switchableStats is a StatsSource whose Stats fails with ErrNotServing while down is set, as
// etcdstore's does while etcd is out of reach; refused counts those failures.
type switchableStats struct {
	down    atomic.Bool
	refused atomic.Int32
}

func (s *switchableStats) Stats(context.Context) (zetcd.BackendStats, error) {
	if s.down.Load() {
		s.refused.Add(1)
		return zetcd.BackendStats{}, fmt.Errorf("test store out of reach: %w", zetcd.ErrNotServing)
	}
	return zetcd.BackendStats{}, nil
}

func (s *switchableStats) TreeStats(context.Context) (zetcd.TreeStats, error) {
	return zetcd.TreeStats{}, nil
}

func (s *switchableStats) Watches() []zetcd.WatchInfo { return nil }

// TestResumeAfterDeferredExpiryDetachesOldSession: a client that goes silent while the store is
// out of reach has its connection closed at its timeout and its expiry put off, with its
// Session not yet detached; once the store is back it resumes here. The Session its old
// connection held is detached then (the backend keeps a session's lease refreshed, and its
// watches, for as long as one of its Session values is neither detached nor ended).
func TestResumeAfterDeferredExpiryDetachesOldSession(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts, store := startSwitchableServer(t)
	c := ts.connect(int32(timeout / time.Millisecond))
	old := ts.b.Session(c.sid)

	store.down.Store(true)
	c.expectEOF() // silent past its timeout: closed, its expiry put off
	// The server asks the store only once the connection is closed (nothing else asks it here):
	// the store comes back after it has refused the expiry, not before it is asked.
	waitFor(t, func() bool { return store.refused.Load() > 0 }, "the expiry put off")
	store.down.Store(false)
	ts.resume(c, int32(timeout/time.Millisecond)).ping()
	waitFor(t, func() bool { return old.DetachCalls.Load() > 0 }, "the old Session detached")
	if n := old.ExpireCalls.Load(); n != 0 {
		t.Errorf("the resumed session had %d expiry calls, want 0", n)
	}
}

package zetcd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// readOnlyFake is the fake backend with a switch for being cut off from its store; its
// read-only sessions are the fake's own, which the server must keep to reads.
type readOnlyFake struct {
	*zetcdtest.Backend
	cutOff   atomic.Bool
	roConns  atomic.Int32
	lastRoID atomic.Int64
}

func (b *readOnlyFake) CutOff() bool { return b.cutOff.Load() }

func (b *readOnlyFake) ReadOnlyStats() zetcd.BackendStats { return zetcd.BackendStats{NodeCount: 7} }

func (b *readOnlyFake) ConnectReadOnly(ctx context.Context, p zetcd.ConnectParams) (zetcd.Session, error) {
	b.roConns.Add(1)
	s, err := b.Backend.Connect(ctx, p)
	if err == nil {
		b.lastRoID.Store(int64(s.ID()))
	}
	return s, err
}

func startReadOnlyServer(t *testing.T, on bool) (*testServer, *readOnlyFake) {
	t.Helper()
	cfg := testConfig()
	cfg.ReadOnlyMode = on
	var fake *readOnlyFake
	ts := startTestServerWith(t, cfg, func(b *zetcdtest.Backend) zetcd.Backend {
		fake = &readOnlyFake{Backend: b}
		return fake
	})
	return ts, fake
}

// TestReadOnlyMode: while the backend is cut off, a client asking for read-only gets a 37-byte
// ConnectResponse with readOnly set; its reads are served, and every request
// ReadOnlyRequestProcessor refuses is answered NotReadOnly at the last zxid without reaching
// the backend; a client that did not ask for read-only, in the 45- or the 44-byte form, is
// refused without an answer; isro answers ro and is_read_only true. When the read-only
// session ends (the store back), its connection closes.
func TestReadOnlyMode(t *testing.T) {
	ts, fake := startReadOnlyServer(t, true)
	rw := ts.connect(10000)
	if h := rw.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/a", Data: []byte("x"), ACL: worldAll}, &encoding.CreateResponse{}); h.Err != encoding.ErrOK {
		t.Fatalf("create before the cut: %v", h.Err)
	}
	if got := fourLetter(t, ts.addr, "isro"); got != "rw" {
		t.Fatalf("isro: %q, want rw", got)
	}
	fake.cutOff.Store(true)
	if got := fourLetter(t, ts.addr, "isro"); got != "ro" {
		t.Errorf("isro while cut off: %q, want ro", got)
	}
	if got := fourLetter(t, ts.addr, "srvr"); !strings.Contains(got, "Mode: read-only\nNode count: 7\n") {
		t.Errorf("srvr while cut off:\n%s\nwant Mode: read-only and the read-only state's node count", got)
	}
	if got := fourLetter(t, ts.addr, "mntr"); !strings.Contains(got, "zk_server_state\tread-only\n") {
		t.Errorf("mntr while cut off:\n%s\nwant zk_server_state read-only", got)
	}
	h := ts.srv.AdminHandler(zetcd.AdminConfig{ClientPort: -1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	if status, out := adminGet(t, http.MethodGet, srv.URL+"/commands/is_read_only", ""); status != 200 || out["read_only"] != true {
		t.Errorf("is_read_only while cut off: %d %v, want read_only true", status, out)
	}

	for _, req := range []*encoding.ConnectRequest{
		{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true},
		{TimeOut: 10000, Passwd: make([]byte, 16)},
	} {
		c := ts.dial()
		c.writeFrame(req)
		c.expectClosedUnanswered()
	}
	if n := fake.roConns.Load(); n != 0 {
		t.Errorf("%d read-only sessions opened for clients that did not ask", n)
	}

	ro := ts.dial()
	resp, size := ro.handshake(&encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true})
	if !resp.ReadOnly || size != 37 || resp.SessionID == 0 {
		t.Fatalf("read-only handshake: %+v in %d bytes, want a 37-byte read-only session", resp, size)
	}
	var data encoding.GetDataResponse
	if h := ro.call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/a"}, &data); h.Err != encoding.ErrOK || string(data.Data) != "x" {
		t.Fatalf("read-only getData: %v %q", h.Err, data.Data)
	}
	last := fake.Session(resp.SessionID).LastZxid()
	for _, r := range []struct {
		op  encoding.Op
		req encoding.Record
	}{
		{encoding.OpCreate, &encoding.CreateRequest{Path: "/b", ACL: worldAll}},
		{encoding.OpCreate2, &encoding.CreateRequest{Path: "/e", ACL: worldAll, Flags: encoding.ModeEphemeral}},
		{encoding.OpSetData, &encoding.SetDataRequest{Path: "/a", Version: -1}},
		{encoding.OpDelete, &encoding.DeleteRequest{Path: "/a", Version: -1}},
		{encoding.OpSync, &encoding.SyncRequest{Path: "/a"}},
		{encoding.OpSetACL, &encoding.SetACLRequest{Path: "/a", ACL: worldAll, Version: -1}},
		{encoding.OpReconfig, &encoding.ReconfigRequest{CurConfigID: -1}},
		{encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/a", Version: -1}}}}},
		{encoding.OpCheck, &encoding.CheckVersionRequest{Path: "/a", Version: 0}},
	} {
		h := ro.call(r.op, r.req, nil)
		if h.Err != encoding.ErrNotReadOnly || h.Zxid != last {
			t.Errorf("%v in a read-only session: %v at %v, want NotReadOnly at %v", r.op, h.Err, h.Zxid, last)
		}
	}
	if h := ro.call(encoding.OpExists, &encoding.ExistsRequest{Path: "/b"}, nil); h.Err != encoding.ErrNoNode {
		t.Errorf("a refused create reached the backend: exists /b %v", h.Err)
	}
	ro.ping()

	fake.cutOff.Store(false)
	close(fake.Session(resp.SessionID).Gone)
	ro.expectEOF()
	if got := fourLetter(t, ts.addr, "isro"); got != "rw" {
		t.Errorf("isro once back: %q, want rw", got)
	}
	again := ts.connect(10000)
	if h := again.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/c", ACL: worldAll}, &encoding.CreateResponse{}); h.Err != encoding.ErrOK {
		t.Errorf("create once back: %v", h.Err)
	}
}

// TestReadOnlyModeOff: without Config.ReadOnlyMode, a backend cut off changes nothing: isro
// answers rw, and a client asking for read-only gets an ordinary session.
func TestReadOnlyModeOff(t *testing.T) {
	ts, fake := startReadOnlyServer(t, false)
	fake.cutOff.Store(true)
	if got := fourLetter(t, ts.addr, "isro"); got != "rw" {
		t.Errorf("isro: %q, want rw", got)
	}
	c := ts.dial()
	resp, _ := c.handshake(&encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true})
	if resp.ReadOnly || resp.SessionID == 0 || fake.roConns.Load() != 0 {
		t.Errorf("handshake: %+v (read-only sessions opened: %d), want an ordinary session", resp, fake.roConns.Load())
	}
	if h := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/a", ACL: worldAll}, &encoding.CreateResponse{}); h.Err != encoding.ErrOK {
		t.Errorf("create: %v", h.Err)
	}
}

var worldAll = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

// TestReadOnlyModeDecorated: beneath the metrics and logging decorators, the backend's read-only
// sessions are found, served through the decorators, and counted in zetcd_sessions.
func TestReadOnlyModeDecorated(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := zetcd.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.ReadOnlyMode = true
	var fake *readOnlyFake
	ts := startTestServerWith(t, cfg, func(b *zetcdtest.Backend) zetcd.Backend {
		fake = &readOnlyFake{Backend: b}
		return m.WrapBackend(zetcd.WithLogging(fake, zaptest.NewLogger(t)))
	})
	fake.cutOff.Store(true)
	if got := fourLetter(t, ts.addr, "isro"); got != "ro" {
		t.Errorf("isro while cut off: %q, want ro", got)
	}
	ro := ts.dial()
	resp, _ := ro.handshake(&encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true})
	if !resp.ReadOnly || fake.roConns.Load() != 1 {
		t.Fatalf("read-only handshake: %+v (read-only sessions opened: %d), want one read-only session", resp, fake.roConns.Load())
	}
	if h := ro.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/b", ACL: worldAll}, nil); h.Err != encoding.ErrNotReadOnly {
		t.Errorf("create in a read-only session: %v, want NotReadOnly", h.Err)
	}
	if h := ro.call(encoding.OpExists, &encoding.ExistsRequest{Path: "/b"}, nil); h.Err != encoding.ErrNoNode {
		t.Errorf("exists in a read-only session: %v, want NoNode", h.Err)
	}
	if n := gauge(t, reg, "zetcd_sessions"); n != 1 {
		t.Errorf("zetcd_sessions %v, want 1", n)
	}
}

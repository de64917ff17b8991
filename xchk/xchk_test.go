package xchk_test

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/xchk"
	"github.com/zetcd/zetcd/zetcd"
)

var openACL = zk.WorldACL(zk.PermAll)

// checked is a zetcd cross-checked against an oracle, with the xchk Backend, its own metrics
// registry and its log lines.
type checked struct {
	addr string
	b    *xchk.Backend
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
}

// startChecked starts a zetcd on a fresh etcd wrapped by xchk with cfg (OracleAddr, Logger and
// Registerer are filled in). With oracleAddr "" a fresh ZooKeeper is started.
func startChecked(t *testing.T, cfg xchk.Config, server ...zetcd.Config) *checked {
	t.Helper()
	if cfg.OracleAddr == "" {
		cfg.OracleAddr = zkserver.Start(t, zkserver.Options{}).Addr
	}
	core, logs := observer.New(zapcore.DebugLevel)
	cfg.Logger = zap.New(core)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c := &checked{logs: logs, reg: reg}
	t.Cleanup(func() {
		if c.b != nil {
			c.b.Close()
		}
	})
	opts := testenv.Options{}
	if len(server) > 0 {
		opts.Config = &server[0]
	}
	opts.Wrap = func(inner zetcd.Backend) zetcd.Backend {
		b, err := xchk.NewBackend(inner, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.b = b
		return b
	}
	c.addr = testenv.StartZetcdOn(t, testenv.StartEtcd(t), opts).Addr
	return c
}

// count reads zetcd_xchk_mismatches_total{op, field}.
func (c *checked) count(op, field string) float64 {
	return testutil.ToFloat64(c.b.Mismatches().WithLabelValues(op, field))
}

// total is the number of differences of every kind, and the labels of those that occurred.
func (c *checked) total(t *testing.T) (float64, []string) {
	t.Helper()
	families, err := c.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	var kinds []string
	for _, f := range families {
		if f.GetName() != "zetcd_xchk_mismatches_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
			kinds = append(kinds, m.String())
		}
	}
	return sum, kinds
}

// lines returns the logged differences as "op path field zetcd zookeeper".
func (c *checked) lines() []map[string]any {
	var out []map[string]any
	for _, e := range c.logs.FilterMessage("xchk: zetcd and ZooKeeper differ").All() {
		out = append(out, e.ContextMap())
	}
	return out
}

// TestCleanWorkloadHasNoDifferences: the foundation operations through go-zookeeper on a
// cross-checked zetcd produce no difference, and are really compared.
func TestCleanWorkloadHasNoDifferences(t *testing.T) {
	c := startChecked(t, xchk.Config{FailFast: true})
	a := testenv.Connect(t, c.addr)
	b := testenv.Connect(t, c.addr)
	if _, err := a.Create("/app", []byte("v"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := a.Create("/app/seq-", nil, zk.FlagSequence|zk.FlagEphemeral, openACL); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Set("/app", []byte("w"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set("/app", []byte("w"), 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatal(err)
	}
	if _, _, err := b.Children("/app"); err != nil {
		t.Fatal(err)
	}
	if _, st, err := b.Exists("/app/seq-0000000001"); err != nil || st.EphemeralOwner != a.SessionID() {
		t.Fatalf("exists: %+v %v", st, err)
	}
	if err := b.Delete("/app/seq-0000000000", -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get("/missing"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	a.Close()
	// Wait for a's ephemerals to be gone on both sides, reading through b all along.
	testenv.WaitChildren(t, b, "/app", 0)
	if _, _, err := b.Get("/app"); err != nil {
		t.Fatal(err)
	}
	if n, kinds := c.total(t); n != 0 {
		t.Errorf("%v differences: %v\n%v", n, kinds, c.lines())
	}
	if n := testutil.ToFloat64(c.b.Requests().WithLabelValues("getData")); n < 2 {
		t.Errorf("getData requests cross-checked: %v", n)
	}
}

// TestMutatedStatFieldIsReported: a Cversion changed on zetcd's answer is reported as
// stat.cversion, with both values, and nothing else is.
func TestMutatedStatFieldIsReported(t *testing.T) {
	c := startChecked(t, xchk.Config{Mutate: func(op encoding.Op, resp encoding.Record, err error) (encoding.Record, error) {
		if r, ok := resp.(*encoding.GetDataResponse); ok && op == encoding.OpGetData {
			r.Stat.Cversion += 5
		}
		return resp, err
	}})
	cl := testenv.Connect(t, c.addr)
	if _, err := cl.Create("/node", []byte("x"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, st, err := cl.Get("/node"); err != nil || st.Cversion != 5 {
		t.Fatalf("get: %+v %v (not fail-fast: the client gets zetcd's mutated answer)", st, err)
	}
	if got := c.count("getData", "stat.cversion"); got != 1 {
		t.Errorf("zetcd_xchk_mismatches_total{op=getData,field=stat.cversion} = %v, want 1", got)
	}
	if n, kinds := c.total(t); n != 1 {
		t.Errorf("%v differences in all: %v", n, kinds)
	}
	lines := c.lines()
	if len(lines) != 1 {
		t.Fatalf("logged %v", lines)
	}
	l := lines[0]
	if l["op"] != "getData" || l["path"] != "/node" || l["field"] != "stat.cversion" || l["zetcd"] != "5" || l["zookeeper"] != "0" || l["session"] == "" {
		t.Errorf("log line %v", l)
	}
}

// TestMutatedErrorCodeIsReported: an error code changed on zetcd's answer is reported as err,
// and under FailFast the client's connection is closed.
func TestMutatedErrorCodeIsReported(t *testing.T) {
	c := startChecked(t, xchk.Config{FailFast: true, Mutate: func(op encoding.Op, resp encoding.Record, err error) (encoding.Record, error) {
		if op == encoding.OpDelete && err == nil {
			return resp, encoding.ErrNotEmpty
		}
		return resp, err
	}})
	cl := testenv.Connect(t, c.addr)
	if _, err := cl.Create("/gone", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	err := cl.Delete("/gone", -1)
	if err == nil || errors.Is(err, zk.ErrNotEmpty) {
		t.Errorf("delete: %v, want the connection closed (fail-fast)", err)
	}
	if got := c.count("delete", "err"); got != 1 {
		t.Errorf("zetcd_xchk_mismatches_total{op=delete,field=err} = %v, want 1", got)
	}
	lines := c.lines()
	if len(lines) != 1 || lines[0]["field"] != "err" || lines[0]["zetcd"] != "NotEmpty" || lines[0]["zookeeper"] != "OK" || lines[0]["path"] != "/gone" {
		t.Errorf("logged %v", lines)
	}
}

// TestAnswerZooKeeper: the client gets ZooKeeper's answer (here where zetcd's is mutated),
// expressed in its own zetcd session's ids.
func TestAnswerZooKeeper(t *testing.T) {
	c := startChecked(t, xchk.Config{Answer: xchk.AnswerZooKeeper, Mutate: func(op encoding.Op, resp encoding.Record, err error) (encoding.Record, error) {
		if r, ok := resp.(*encoding.GetDataResponse); ok {
			r.Data = []byte("zetcd's")
		}
		return resp, err
	}})
	cl := testenv.Connect(t, c.addr)
	if _, err := cl.Create("/e", []byte("real"), zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	data, st, err := cl.Get("/e")
	if err != nil || string(data) != "real" {
		t.Fatalf("get = %q, %v; want ZooKeeper's %q", data, err, "real")
	}
	if st.EphemeralOwner != cl.SessionID() {
		t.Errorf("ephemeralOwner %x, want the client's session %x", st.EphemeralOwner, cl.SessionID())
	}
	_, est, err := cl.Exists("/e")
	if err != nil || est.Czxid != st.Czxid || est.Mzxid != st.Mzxid {
		t.Errorf("exists stat %+v (%v) vs get stat %+v", est, err, st)
	}
	if got := c.count("getData", "data"); got != 1 {
		t.Errorf("data differences %v, want 1", got)
	}
}

// TestWatchEventsPaired: a watch fired on both sides is paired, not reported.
func TestWatchEventsPaired(t *testing.T) {
	c := startChecked(t, xchk.Config{FailFast: true, EventWait: 500 * time.Millisecond})
	cl := testenv.Connect(t, c.addr)
	if _, err := cl.Create("/w", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := cl.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Set("/w", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	time.Sleep(time.Second) // past EventWait
	if _, _, err := cl.Get("/w"); err != nil {
		t.Fatal(err)
	}
	if n, kinds := c.total(t); n != 0 {
		t.Errorf("%v differences: %v %v", n, kinds, c.lines())
	}
}

// TestOracleDown: with nothing listening at the oracle address, clients are served by zetcd
// and every unchecked session and request is counted under field "oracle".
func TestOracleDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := startChecked(t, xchk.Config{OracleAddr: addr, FailFast: true, OracleTimeout: 500 * time.Millisecond})
	cl := testenv.Connect(t, c.addr)
	if _, err := cl.Create("/x", []byte("x"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	if data, _, err := cl.Get("/x"); err != nil || string(data) != "x" {
		t.Fatalf("get = %q, %v", data, err)
	}
	if got := c.count("createSession", "oracle"); got < 1 {
		t.Errorf("createSession oracle failures %v", got)
	}
	if got := c.count("getData", "oracle"); got != 1 {
		t.Errorf("getData unchecked %v, want 1", got)
	}
	if n := len(c.logs.FilterMessage("xchk: zetcd and ZooKeeper differ").All()); n != 0 {
		t.Errorf("%d differences reported against a dead oracle", n)
	}
}

// silentOracle accepts connections, answers the handshake when handshake is set, and then
// never answers anything.
func silentOracle(t *testing.T, handshake bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := bufio.NewReader(nc)
				frame, err := encoding.ReadFrame(r, nil, 0)
				if err != nil {
					return
				}
				var req encoding.ConnectRequest
				if encoding.DecodeRecord(frame, &req) != nil {
					return
				}
				if handshake {
					resp := encoding.ConnectResponse{TimeOut: req.TimeOut, SessionID: 0x5157, Passwd: make([]byte, 16), HasReadOnly: req.HasReadOnly}
					if _, err := encoding.WriteFrame(nc, nil, &resp); err != nil {
						return
					}
				}
				for {
					if _, err := encoding.ReadFrame(r, nil, 0); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestOracleSlow: an oracle that stops answering costs a client at most one OracleTimeout, at
// the handshake or at one request, and is counted; the client is served by zetcd throughout.
func TestOracleSlow(t *testing.T) {
	for _, handshake := range []bool{false, true} {
		name := map[bool]string{false: "handshake", true: "request"}[handshake]
		t.Run(name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			c := startChecked(t, xchk.Config{OracleAddr: silentOracle(t, handshake), FailFast: true, OracleTimeout: timeout})
			cl := testenv.Connect(t, c.addr)
			start := time.Now()
			for i := 0; i < 5; i++ {
				if _, err := cl.Create("/n", nil, 0, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					t.Fatal(err)
				}
			}
			if el := time.Since(start); el > 4*timeout {
				t.Errorf("5 creates took %v with an oracle timeout of %v", el, timeout)
			}
			var failures float64
			for _, op := range []string{"createSession", "create"} {
				failures += c.count(op, "oracle")
			}
			if failures < 1 {
				t.Errorf("no oracle failure counted")
			}
			if n := len(c.logs.FilterMessage("xchk: not cross-checked").All()); n < 1 {
				t.Errorf("no oracle failure logged")
			}
		})
	}
}

// dial opens a raw connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// handshake sends a ConnectRequest on a raw connection and reads the answer.
func handshake(t *testing.T, conn net.Conn, r *bufio.Reader, req encoding.ConnectRequest) encoding.ConnectResponse {
	t.Helper()
	if req.Passwd == nil {
		req.Passwd = make([]byte, 16)
	}
	if _, err := encoding.WriteFrame(conn, nil, &req); err != nil {
		t.Fatal(err)
	}
	frame, err := encoding.ReadFrame(r, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var resp encoding.ConnectResponse
	if err := encoding.DecodeRecord(frame, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// roundTrip sends one request on a raw connection and reads its reply into resp.
func roundTrip(t *testing.T, conn net.Conn, r *bufio.Reader, xid encoding.Xid, op encoding.Op, req, resp encoding.Record) encoding.ReplyHeader {
	t.Helper()
	if _, err := encoding.WriteFrame(conn, nil, &encoding.RequestHeader{Xid: xid, Op: op}, req); err != nil {
		t.Fatal(err)
	}
	frame, err := encoding.ReadFrame(r, nil, 0)
	if err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	d := encoding.NewDecoder(frame)
	var hdr encoding.ReplyHeader
	hdr.Decode(d)
	if hdr.Err == 0 && resp != nil {
		resp.Decode(d)
	}
	return hdr
}

// TestResumeKeepsTwin: a session resumed on a new connection keeps its twin: its ephemeral is
// still there on both sides and stats still compare equal.
func TestResumeKeepsTwin(t *testing.T) {
	c := startChecked(t, xchk.Config{FailFast: true})
	conn, r := dial(t, c.addr)
	sess := handshake(t, conn, r, encoding.ConnectRequest{TimeOut: 10000})
	if hdr := roundTrip(t, conn, r, 1, encoding.OpCreate, &encoding.CreateRequest{Path: "/eph", Flags: encoding.ModeEphemeral}, nil); hdr.Err != encoding.ErrInvalidACL {
		t.Fatalf("create with no ACL: %v", hdr.Err)
	}
	acl := []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}
	hdr := roundTrip(t, conn, r, 2, encoding.OpCreate, &encoding.CreateRequest{Path: "/eph", ACL: acl, Flags: encoding.ModeEphemeral}, nil)
	if hdr.Err != 0 {
		t.Fatal(hdr.Err)
	}
	conn.Close()

	conn2, r2 := dial(t, c.addr)
	resp := handshake(t, conn2, r2, encoding.ConnectRequest{TimeOut: 10000, SessionID: sess.SessionID, Passwd: sess.Passwd, LastZxidSeen: hdr.Zxid})
	if resp.SessionID != sess.SessionID {
		t.Fatalf("resume: %+v", resp)
	}
	var ex encoding.ExistsResponse
	if h := roundTrip(t, conn2, r2, 3, encoding.OpExists, &encoding.ExistsRequest{Path: "/eph"}, &ex); h.Err != 0 || ex.Stat.EphemeralOwner != sess.SessionID {
		t.Fatalf("exists after resume: %v %+v", h.Err, ex.Stat)
	}
	if h := roundTrip(t, conn2, r2, 4, encoding.OpCloseSession, nil, nil); h.Err != 0 {
		t.Fatal(h.Err)
	}
	other := testenv.Connect(t, c.addr)
	if ok, _, err := other.Exists("/eph"); ok || err != nil {
		t.Errorf("ephemeral after closeSession: %v %v", ok, err)
	}
	if n, kinds := c.total(t); n != 0 {
		t.Errorf("%v differences: %v %v", n, kinds, c.lines())
	}
}

// TestSessionTimeoutCompared: a twin opened with zetcd's negotiated timeout that ZooKeeper
// negotiates differently is a difference of the handshake (here zetcd allows 60s sessions and
// ZooKeeper at most 40s); under FailFast the connection is refused.
func TestSessionTimeoutCompared(t *testing.T) {
	c := startChecked(t, xchk.Config{FailFast: true}, zetcd.Config{MinSessionTimeout: 4 * time.Second, MaxSessionTimeout: 60 * time.Second})
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := encoding.WriteFrame(conn, nil, &encoding.ConnectRequest{TimeOut: 50000, Passwd: make([]byte, 16)}); err != nil {
		t.Fatal(err)
	}
	if _, err := encoding.ReadFrame(bufio.NewReader(conn), nil, 0); err == nil {
		t.Error("got a ConnectResponse; want the connection closed")
	}
	if got := c.count("createSession", "timeout"); got != 1 {
		t.Errorf("createSession timeout differences %v, want 1", got)
	}
	lines := c.lines()
	if len(lines) != 1 || lines[0]["zetcd"] != "50000" || lines[0]["zookeeper"] != "40000" {
		t.Errorf("logged %v", lines)
	}
}

// TestHangUpIsAnAnswer: ZooKeeper 3.9 closes the connection of a client that sends
// deleteContainer instead of answering. Closing is compared as an answer: zetcd doing the same
// is no difference; zetcd answering is one (field err, zookeeper "connection closed").
func TestHangUpIsAnAnswer(t *testing.T) {
	for _, answer := range []bool{false, true} {
		t.Run(map[bool]string{false: "both close", true: "zetcd answers"}[answer], func(t *testing.T) {
			var mutate func(encoding.Op, encoding.Record, error) (encoding.Record, error)
			if answer {
				mutate = func(op encoding.Op, resp encoding.Record, err error) (encoding.Record, error) {
					if op == encoding.OpDeleteContainer {
						return resp, encoding.ErrNoNode
					}
					return resp, err
				}
			}
			c := startChecked(t, xchk.Config{Mutate: mutate})
			cl := testenv.Connect(t, c.addr)
			if _, err := cl.CreateContainer("/box", nil, zk.FlagContainer, openACL); err != nil {
				t.Fatal(err)
			}
			conn, err := net.Dial("tcp", c.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(conn)
			handshake(t, conn, r, encoding.ConnectRequest{TimeOut: 10000})
			if _, err := encoding.WriteFrame(conn, nil, &encoding.RequestHeader{Xid: 1, Op: encoding.OpDeleteContainer},
				&encoding.DeleteContainerRequest{Path: "/box"}); err != nil {
				t.Fatal(err)
			}
			_, err = encoding.ReadFrame(r, nil, 0)
			if answer {
				if got := c.count("deleteContainer", "err"); got != 1 || err != nil {
					t.Errorf("differences %v (read %v), want 1 and zetcd's answer", got, err)
				}
				if l := c.lines(); len(l) != 1 || l[0]["zookeeper"] != "connection closed" || l[0]["zetcd"] != "NoNode" {
					t.Errorf("logged %v", l)
				}
				return
			}
			if err == nil {
				t.Error("got a reply; want the connection closed")
			}
			if ok, _, err := cl.Exists("/box"); !ok || err != nil {
				t.Errorf("/box after deleteContainer: %v %v", ok, err)
			}
			if n, kinds := c.total(t); n != 0 {
				t.Errorf("%v differences: %v %v", n, kinds, c.lines())
			}
		})
	}
}

// TestSetWatchesAfterResumeTranslated: a client whose last zxid comes from a read (no pair: each
// server answers reads with its own newest zxid) resumes and sets its watch again with it; the
// twin gets the newest zxid ZooKeeper answered the session, so neither server fires a change
// the client had already seen, and there is no difference.
func TestSetWatchesAfterResumeTranslated(t *testing.T) {
	c := startChecked(t, xchk.Config{FailFast: true, EventWait: 500 * time.Millisecond})
	writer := testenv.Connect(t, c.addr)
	for _, p := range []string{"/p", "/p/a"} {
		if _, err := writer.Create(p, nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	conn, r := dial(t, c.addr)
	sess := handshake(t, conn, r, encoding.ConnectRequest{TimeOut: 10000})
	hdr := roundTrip(t, conn, r, 1, encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/p", Watch: true}, &encoding.GetChildrenResponse{})
	if hdr.Err != 0 {
		t.Fatal(hdr.Err)
	}
	conn.Close()

	conn2, r2 := dial(t, c.addr)
	handshake(t, conn2, r2, encoding.ConnectRequest{TimeOut: 10000, SessionID: sess.SessionID, Passwd: sess.Passwd, LastZxidSeen: hdr.Zxid})
	sw := &encoding.SetWatches{RelativeZxid: hdr.Zxid, DataWatches: []string{}, ExistWatches: []string{}, ChildWatches: []string{"/p"}}
	if h := roundTrip(t, conn2, r2, 2, encoding.OpSetWatches, sw, nil); h.Err != 0 {
		t.Fatal(h.Err)
	}
	time.Sleep(time.Second) // past EventWait: an event on one side only is reported by then
	if _, _, err := writer.Get("/p"); err != nil {
		t.Fatal(err)
	}
	if n, kinds := c.total(t); n != 0 {
		t.Errorf("%v differences: %v %v", n, kinds, c.lines())
	}
}

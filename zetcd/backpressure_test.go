package zetcd_test

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// The bytes a connection holds for a client that does not read stay bounded (backpressure.go),
// and other sessions are served meanwhile. queued_bytes, the server's own count, is sampled
// while a client pipelines requests for large replies, or is sent watch events, and never
// reads; kernel socket buffers come on top and are not the server's to count.

// startBoundedServer starts a test server with the given bounds and a metrics registry, and
// returns it with a function reading its queued_bytes gauge.
func startBoundedServer(t *testing.T, perConn, total int64) (*testServer, func() int64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := zetcd.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Metrics, cfg.MaxConnQueuedBytes, cfg.MaxQueuedBytes = m, perConn, total
	ts := startTestServer(t, cfg)
	return ts, func() int64 { return int64(gauge(t, reg, "zetcd_queued_bytes")) }
}

// gauge reads the value of an unlabelled metric.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// sampleMax samples f every millisecond until stop is closed, and returns the largest value.
func sampleMax(f func() int64, stop <-chan struct{}) <-chan int64 {
	res := make(chan int64, 1)
	go func() {
		var m int64
		for {
			m = max(m, f())
			select {
			case <-stop:
				res <- m
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return res
}

// nonReader connects a session whose socket buffers the kernel keeps small, so that the
// server's own queue is what fills.
func (ts *testServer) nonReader(timeoutMs int32) *testClient {
	ts.t.Helper()
	c := ts.connect(timeoutMs)
	if err := c.nc.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		ts.t.Fatal(err)
	}
	return c
}

// flood sends the request over and over until stop is closed or the connection fails: a
// client that keeps writing and never reads (so never lets its session expire for silence).
func (c *testClient) flood(op encoding.Op, req encoding.Record, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c.xid++
		c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := c.nc.Write(encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: c.xid, Op: op}, req)); err != nil {
			return
		}
	}
}

// bystander runs getData calls on a new session until stop is closed, failing t if one fails,
// and returns how many succeeded.
func (ts *testServer) bystander(stop <-chan struct{}) <-chan int {
	c := ts.connect(30000)
	res := make(chan int, 1)
	go func() {
		n := 0
		defer func() { res <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var resp encoding.GetDataResponse
			if h := c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/small"}, &resp); h.Err != 0 || string(resp.Data) != "s" {
				c.t.Errorf("bystander getData: %v %q", h.Err, resp.Data)
				return
			}
			n++
		}
	}()
	return res
}

// createBigAndSmall creates /big, whose data is reply bytes, and /small, the bystander's.
func (ts *testServer) createBigAndSmall(reply int) {
	setup := ts.connect(30000)
	setup.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/big", Data: bytes.Repeat([]byte("b"), reply)}, nil)
	setup.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/small", Data: []byte("s")}, nil)
}

func TestBackpressureRepliesOfANonReader(t *testing.T) {
	const perConn, reply = 1 << 20, 256 << 10
	ts, queued := startBoundedServer(t, perConn, 1<<30)
	ts.createBigAndSmall(reply)

	stop := make(chan struct{})
	peak := sampleMax(queued, stop)
	bystanderCalls := ts.bystander(stop)
	// 400 replies of 256 KiB are 100 MiB; a 2 s session timeout is the write deadline.
	c := ts.nonReader(2000)
	go c.flood(encoding.OpGetData, &encoding.GetDataRequest{Path: "/big"}, stop)
	// Its write deadline is its session timeout: the connection is closed then, and its
	// session detached (not expired: the client may resume it).
	waitClosed(t, ts.b.Session(c.sid).Detached, 10*time.Second, "the non-reader's connection closed")
	close(stop)
	if n := <-bystanderCalls; n == 0 {
		t.Error("the bystander session made no call while the other client did not read")
	}
	if p := <-peak; p > perConn+2*reply {
		t.Errorf("queued bytes peaked at %d, want at most the bound %d plus a reply and a request", p, perConn)
	}
	waitFor(t, func() bool { return queued() == 0 }, "queued bytes back to 0 after the close")
}

func TestBackpressureServerBound(t *testing.T) {
	const perConn, total, reply, clients = 4 << 20, 2 << 20, 256 << 10, 4
	ts, queued := startBoundedServer(t, perConn, total)
	ts.createBigAndSmall(reply)

	stop := make(chan struct{})
	peak := sampleMax(queued, stop)
	bystanderCalls := ts.bystander(stop)
	var wg sync.WaitGroup
	for range clients {
		c := ts.nonReader(2000)
		wg.Go(func() {
			for range 100 {
				c.send(encoding.OpGetData, &encoding.GetDataRequest{Path: "/big"})
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Second)
	close(stop)
	if n := <-bystanderCalls; n == 0 {
		t.Error("the bystander session made no call while the server was over its bound")
	}
	// Without the server's bound the clients could hold clients×perConn = 16 MiB.
	p, want := <-peak, int64(total+clients*2*reply)
	if p > want {
		t.Errorf("queued bytes peaked at %d, want at most %d (the server's bound plus a reply and a request per client)", p, want)
	}
}

func TestBackpressureEventsOfANonReader(t *testing.T) {
	const perConn = 256 << 10
	ts, queued := startBoundedServer(t, perConn, 1<<30)
	c := ts.nonReader(30000)
	sess := ts.b.Session(c.sid)
	stop := make(chan struct{})
	peak := sampleMax(queued, stop)
	// 100,000 events of 1 KiB are 100 MiB.
	path := "/" + strings.Repeat("e", 1<<10)
	for i := range 100000 {
		sess.Emit(encoding.WatcherEvent{Type: encoding.EventNodeDataChanged, State: encoding.StateSyncConnected, Path: path}, encoding.Zxid(i+1))
	}
	waitClosed(t, sess.Detached, 10*time.Second, "the non-reader's connection closed")
	close(stop)
	if p, want := <-peak, int64(4*perConn+4<<10); p > want {
		t.Errorf("queued bytes peaked at %d, want at most %d", p, want)
	}
	waitFor(t, func() bool { return queued() == 0 }, "queued bytes back to 0 after the close")
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventsOfASlowReader fills a client's socket with watch events while it does not read,
// staying below the connection's bound: the goroutine that fires them (here the test's, in
// zetcd the committer or the watch feed) never waits for the client, and when the client
// reads, every event arrives whole, in order.
func TestEventsOfASlowReader(t *testing.T) {
	ts, queued := startBoundedServer(t, 64<<20, 1<<30)
	c := ts.connect(30000)
	sess := ts.b.Session(c.sid)
	const n = 16000 // 1 KiB each: more than the kernel's socket buffers hold
	path := "/" + strings.Repeat("e", 1000)
	fired := make(chan struct{})
	go func() {
		defer close(fired)
		for i := range n {
			sess.Emit(encoding.WatcherEvent{Type: encoding.EventNodeDataChanged, State: encoding.StateSyncConnected, Path: path}, encoding.Zxid(i+1))
		}
	}()
	waitClosed(t, fired, 10*time.Second, "the events fired while the client does not read")
	if queued() == 0 {
		t.Fatal("nothing queued for a client that has not read: the sockets took 16 MB of events")
	}
	for i := range n {
		var ev encoding.WatcherEvent
		h := c.readReply(&ev)
		if h.Xid != encoding.XidNotification || h.Zxid != encoding.Zxid(i+1) || ev.Path != path || ev.Type != encoding.EventNodeDataChanged {
			t.Fatalf("frame %d: %+v %v %q, want the event of zxid %d", i, h, ev.Type, ev.Path[:min(len(ev.Path), 8)], i+1)
		}
	}
	waitFor(t, func() bool { return queued() == 0 }, "queued bytes back to 0 once the client read everything")
}

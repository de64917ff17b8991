package etcdstore

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// TestMetricsDecorators: the Handler decorator counts each request by op and code, and the KV
// decorator attributes exactly the round trips countingKV sees to the op that made them.
func TestMetricsDecorators(t *testing.T) {
	cli := startEtcd(t)
	counting := &countingKV{KV: cli.KV}
	m, reg := newTestMetrics(t)
	ctx := context.Background()
	// Outside the leader election, whose background round trips countingKV would also see.
	b, err := New(ctx, Config{Client: cli, KV: WrapKV(counting, m), Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	backend := m.WrapBackend(b)
	s, err := backend.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "zetcd_sessions"); got != 1 {
		t.Errorf("sessions = %v after Connect", got)
	}
	if series(t, reg, "zetcd_etcd_round_trips_total", "op", zetcd.OpLabelConnect) < 1 {
		t.Error("Connect's round trips not attributed to connect")
	}

	step := func(op encoding.Op, code encoding.ErrCode, f func() error) {
		t.Helper()
		before := counting.n.Load()
		rtBefore := series(t, reg, "zetcd_etcd_round_trips_total", "op", op.String())
		reqBefore := series(t, reg, "zetcd_requests_total", "op", op.String(), "code", code.String())
		err := f()
		if code == encoding.ErrOK && err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		if code != encoding.ErrOK {
			wantCode(t, err, code)
		}
		want := float64(counting.n.Load() - before)
		// Reads are answered from the replica: no round trip; everything else makes some.
		fromTree := op == encoding.OpGetData || op == encoding.OpExists || op == encoding.OpGetChildren2
		if got := series(t, reg, "zetcd_etcd_round_trips_total", "op", op.String()) - rtBefore; got != want || (want == 0) != fromTree {
			t.Errorf("%v: %v round trips attributed, countingKV saw %v", op, got, want)
		}
		if got := series(t, reg, "zetcd_requests_total", "op", op.String(), "code", code.String()) - reqBefore; got != 1 {
			t.Errorf("%v %v: requests moved by %v, want 1", op, code, got)
		}
	}
	step(encoding.OpCreate, encoding.ErrOK, func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a", ACL: openACL})
		return err
	})
	step(encoding.OpCreate, encoding.ErrNodeExists, func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a", ACL: openACL})
		return err
	})
	step(encoding.OpCreate2, encoding.ErrOK, func() error {
		_, _, err := s.Create2(ctx, &encoding.CreateRequest{Path: "/a/s-", ACL: openACL, Flags: encoding.ModePersistentSequential})
		return err
	})
	step(encoding.OpGetData, encoding.ErrOK, func() error {
		_, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/a", Watch: true})
		return err
	})
	step(encoding.OpGetData, encoding.ErrNoNode, func() error {
		_, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/none"})
		return err
	})
	step(encoding.OpSetData, encoding.ErrOK, func() error {
		_, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/a", Data: []byte("x"), Version: -1})
		return err
	})
	step(encoding.OpGetChildren2, encoding.ErrOK, func() error {
		_, _, err := s.GetChildren2(ctx, &encoding.GetChildren2Request{Path: "/a"})
		return err
	})
	step(encoding.OpExists, encoding.ErrOK, func() error {
		_, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/a"})
		return err
	})
	step(encoding.OpDelete, encoding.ErrNotEmpty, func() error {
		_, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/a", Version: -1})
		return err
	})
	if n := seriesCount(t, reg, "zetcd_request_duration_seconds"); n < 7 {
		t.Errorf("latency histograms for %d ops, want one per op used", n)
	}
	if n := seriesCount(t, reg, "zetcd_etcd_errors_total"); n != 0 {
		t.Errorf("%d etcd error series, want none", n)
	}

	// Detach then Expire of the same Session value is one session leaving.
	s.Detach()
	if err := s.Expire(ctx); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "zetcd_sessions"); got != 0 {
		t.Errorf("sessions = %v after Detach and Expire", got)
	}
}

// TestMetricsServerCollector: a Server given Metrics exports its connection and watch gauges
// and the tree counts of its backend, found beneath the decorator.
func TestMetricsServerCollector(t *testing.T) {
	cli := startEtcd(t)
	m, reg := newTestMetrics(t)
	ctx := context.Background()
	b, err := New(ctx, Config{Client: cli, KV: WrapKV(cli.KV, m)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// The tree gauges below come from the Store's StatsSource, which the Server finds beneath
	// the decorator.
	wrapped := m.WrapBackend(b)
	srv := zetcd.NewServer(wrapped, zetcd.Config{Metrics: m})
	t.Cleanup(func() { srv.Close() })
	s, err := wrapped.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Detach()
	if _, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/nope", Watch: true}); err == nil {
		t.Fatal("exists /nope succeeded")
	}
	if _, _, err := s.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/", Watch: true}); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range mm.GetLabel() {
				name += "/" + l.GetValue()
			}
			if g := mm.GetGauge(); g != nil {
				got[name] = g.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"zetcd_watches/exist":        1,
		"zetcd_watches/child":        1,
		"zetcd_watches/data":         0,
		"zetcd_znodes":               5, // /, /zookeeper, quota, config, and the root twice
		"zetcd_global_sessions":      1,
		"zetcd_connections":          0,
		"zetcd_draining":             0,
		"zetcd_sessions":             1,
		"zetcd_outstanding_requests": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// newTestMetrics returns metrics registered on a registry of their own, and the registry.
func newTestMetrics(t *testing.T) (*zetcd.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := zetcd.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// series returns the value of the counter or gauge name whose labels include the given
// name/value pairs, gathered from reg; 0 when there is no such series.
func series(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// seriesCount returns how many series of name reg holds.
func seriesCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

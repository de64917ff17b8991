package zetcd_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// gather returns reg's families by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// TestZKMetrics: a Server with Metrics exports ZooKeeper's names: its latency summaries count
// each request once, as an update if ZooKeeper makes a transaction of it (pings not at all);
// its gauges are left out while the backend cannot tell its numbers, its counters are not.
func TestZKMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := zetcd.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	store := &switchableStats{}
	cfg := testConfig()
	cfg.Stats = store
	cfg.Metrics = m
	ts := startTestServer(t, cfg)
	c := ts.connect(30000)
	c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/a", Data: []byte("x"), ACL: []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}}, &encoding.CreateResponse{})
	c.call(encoding.OpSetData, &encoding.SetDataRequest{Path: "/a", Data: []byte("y"), Version: -1}, &encoding.SetDataResponse{})
	c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/a"}, &encoding.GetDataResponse{})
	c.call(encoding.OpExists, &encoding.ExistsRequest{Path: "/b"}, &encoding.ExistsResponse{})
	c.ping()

	fams := gather(t, reg)
	for name, want := range map[string]uint64{"updatelatency": 2, "readlatency": 2} {
		if n := fams[name].GetMetric()[0].GetSummary().GetSampleCount(); n != want {
			t.Errorf("%s_count = %d, want %d", name, n, want)
		}
	}
	for _, name := range []string{"znode_count", "num_alive_connections", "packets_received", "uptime", "connection_request_count"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	if n := fams["connection_request_count"].GetMetric()[0].GetCounter().GetValue(); n != 1 {
		t.Errorf("connection_request_count = %v, want 1", n)
	}

	store.down.Store(true)
	fams = gather(t, reg)
	for _, name := range []string{"znode_count", "num_alive_connections", "uptime"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exported while the backend is not serving", name)
		}
	}
	for _, name := range []string{"connection_request_count", "response_bytes", "readlatency"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing while the backend is not serving", name)
		}
	}
}

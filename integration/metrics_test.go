package integration

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// series builds a canonical series name: series("m", "op", "create", "code", "OK").
func series(name string, kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+`="`+kv[i+1]+`"`)
	}
	if len(parts) == 0 {
		return name
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// TestProcessMetrics runs the zetcd binary with --metrics-addr, runs a known workload and checks
// that /metrics moved by exactly that workload: requests by op and code, latency observations,
// etcd round trips by op (one per create and per getData, as TestEtcdRoundTrips measures), the
// watch and session gauges; and that /healthz and /readyz answer.
func TestProcessMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	addr, maddr := itest.FreePort(t), itest.FreePort(t)
	itest.StartProcessArgs(t, addr, "--data-dir", t.TempDir(), "--metrics-addr", maddr)
	base := "http://" + maddr
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
			t.Errorf("GET %s: %s %q", path, resp.Status, body)
		}
	}

	c := connect(t, addr)
	before := itest.Scrape(t, base+"/metrics")
	for i := 0; i < 5; i++ {
		if _, err := c.Create("/m"+strconv.Itoa(i), []byte("v"), 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, _, err := c.Get("/m" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/nope1", "/nope2"} {
		if _, _, err := c.Get(p); err != zk.ErrNoNode {
			t.Fatalf("get %s: %v, want NoNode", p, err)
		}
	}
	if _, _, _, err := c.ExistsW("/m4"); err != nil {
		t.Fatal(err)
	}
	after := itest.Scrape(t, base+"/metrics")

	delta := func(s string) float64 { return after[s] - before[s] }
	for s, want := range map[string]float64{
		series("zetcd_requests_total", "op", "create", "code", "OK"):      5,
		series("zetcd_requests_total", "op", "getData", "code", "OK"):     3,
		series("zetcd_requests_total", "op", "getData", "code", "NoNode"): 2,
		series("zetcd_requests_total", "op", "exists", "code", "OK"):      1,
		series("zetcd_request_duration_seconds_count", "op", "create"):    5,
		series("zetcd_request_duration_seconds_count", "op", "getData"):   5,
		series("zetcd_request_duration_seconds_count", "op", "exists"):    1,
		series("zetcd_etcd_round_trips_total", "op", "create"):            5,
		// Reads are answered from the in-memory replica.
		series("zetcd_etcd_round_trips_total", "op", "getData"):                        0,
		series("zetcd_etcd_round_trips_total", "op", "exists"):                         0,
		series("zetcd_request_duration_seconds_bucket", "op", "getData", "le", "+Inf"): 5,
	} {
		if got := delta(s); got != want {
			t.Errorf("%s moved by %v, want %v", s, got, want)
		}
	}
	// Nothing else was requested, and etcd did not fail.
	for s, v := range after {
		if strings.HasPrefix(s, "zetcd_requests_total{") {
			if d := v - before[s]; d != 0 && !strings.Contains(s, `op="create"`) && !strings.Contains(s, `op="getData"`) && !strings.Contains(s, `op="exists"`) {
				t.Errorf("%s moved by %v", s, d)
			}
		}
		if strings.HasPrefix(s, "zetcd_etcd_errors_total") && v != 0 {
			t.Errorf("%s = %v", s, v)
		}
	}
	for s, want := range map[string]float64{
		series("zetcd_watches", "kind", "data"):  1,
		series("zetcd_watches", "kind", "exist"): 0,
		series("zetcd_watches", "kind", "child"): 0,
		series("zetcd_sessions"):                 1,
		series("zetcd_global_sessions"):          1,
		series("zetcd_znodes"):                   4 + 5 + 1, // system nodes, ours, the root twice
		series("zetcd_draining"):                 0,
	} {
		if got, ok := after[s]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"zetcd_received_bytes_total", "zetcd_sent_bytes_total"} {
		if delta(s) <= 0 {
			t.Errorf("%s did not grow: %v → %v", s, before[s], after[s])
		}
	}
	if after["zetcd_connections"] < 1 {
		t.Errorf("zetcd_connections = %v", after["zetcd_connections"])
	}
	for _, s := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := after[s]; !ok {
			t.Errorf("%s missing: runtime and process collectors not registered", s)
		}
	}
	// The session's own setup: one connect, round trips counted under "connect".
	if before[series("zetcd_etcd_round_trips_total", "op", "connect")] < 1 {
		t.Errorf("no etcd round trip attributed to connect")
	}

	// Closing the session is a request of its own.
	c.Close()
	testenv.Eventually(t, 10*time.Second, "after close: closeSession 1, sessions 0", func() error {
		m := itest.Scrape(t, base+"/metrics")
		if closes, sessions := m[series("zetcd_requests_total", "op", "closeSession", "code", "OK")], m["zetcd_sessions"]; closes != 1 || sessions != 0 {
			return fmt.Errorf("closeSession %v, sessions %v", closes, sessions)
		}
		return nil
	})
}

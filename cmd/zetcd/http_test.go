package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestHTTPProbes(t *testing.T) {
	serving, ready := true, true
	var etcdErr error
	var etcdDeadline time.Duration
	h := newHTTPHandler(newRegistry(), probes{
		serving: func() bool { return serving },
		ready:   func() bool { return ready },
		etcd: func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			etcdDeadline = time.Until(d)
			return etcdErr
		},
	}, false)

	for _, tc := range []struct {
		serving, ready bool
		etcd           error
		healthz        int
		readyz         int
	}{
		{true, true, nil, 200, 200},
		{true, false, nil, 200, 503}, // draining: still healthy, not ready
		{true, true, errors.New("no leader"), 503, 200},
		{false, false, nil, 503, 503},
	} {
		serving, ready, etcdErr = tc.serving, tc.ready, tc.etcd
		if code, body := get(t, h, "/healthz"); code != tc.healthz {
			t.Errorf("%+v: /healthz %d %q, want %d", tc, code, body, tc.healthz)
		}
		if code, body := get(t, h, "/readyz"); code != tc.readyz {
			t.Errorf("%+v: /readyz %d %q, want %d", tc, code, body, tc.readyz)
		}
	}
	if etcdDeadline <= 0 || etcdDeadline > healthCheckTimeout {
		t.Errorf("etcd check deadline %v, want within %v", etcdDeadline, healthCheckTimeout)
	}
	if code, body := get(t, h, "/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics %d without the Go collector", code)
	}
	if code, _ := get(t, h, "/debug/pprof/"); code != 404 {
		t.Errorf("pprof served without --pprof: %d", code)
	}
	withPprof := newHTTPHandler(newRegistry(), probes{serving: func() bool { return true }, ready: func() bool { return true },
		etcd: func(context.Context) error { return nil }}, true)
	if code, _ := get(t, withPprof, "/debug/pprof/"); code != 200 {
		t.Errorf("pprof with --pprof: %d", code)
	}
}

func TestParseOperatorFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.metricsAddr != "" || o.pprof || o.drainTimeout != 10*time.Second || len(o.fourLetterWords) != 10 || o.logRequests {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseFlags([]string{"--4lw-whitelist", "*", "--metrics-addr", "127.0.0.1:0", "--pprof", "--drain-timeout", "3s", "--log-requests"})
	if err != nil || o.fourLetterWords[0] != "*" || !o.pprof || o.drainTimeout != 3*time.Second || !o.logRequests {
		t.Errorf("%+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"--4lw-whitelist", "ruok,bogus"},
		{"--pprof"},
		{"--drain-timeout", "-1s"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestGrafanaDashboard: deploy/grafana-dashboard.json parses, every panel queries something,
// and every zetcd_ metric it queries is one zetcd exports (or the cross-checker's).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{
		"zetcd_requests_total": true, "zetcd_request_duration_seconds_bucket": true,
		"zetcd_etcd_round_trips_total": true, "zetcd_etcd_errors_total": true,
		"zetcd_sessions": true, "zetcd_connections": true, "zetcd_outstanding_requests": true,
		"zetcd_watches": true, "zetcd_received_bytes_total": true, "zetcd_sent_bytes_total": true,
		"zetcd_draining": true, "zetcd_znodes": true, "zetcd_global_sessions": true,
		"zetcd_last_zxid": true, "zetcd_xchk_mismatches_total": true,
		"zetcd_etcd_db_size_bytes": true, "zetcd_etcd_db_size_in_use_bytes": true, "zetcd_etcd_quota_bytes": true,
		"zetcd_data_limit_bytes": true, "zetcd_etcd_nospace_alarm": true,
	}
	name := regexp.MustCompile(`zetcd_[a-z_]+`)
	n := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				if !exported[m] {
					t.Errorf("panel %q queries %s, which zetcd does not export", p.Title, m)
				}
			}
		}
		n++
	}
	if n < 10 {
		t.Errorf("%d panels", n)
	}
}

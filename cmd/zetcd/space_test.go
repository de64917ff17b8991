package main

import (
	"context"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
)

func TestParseSpaceFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.quotaBytes != embedetcd.DefaultQuotaBytes || o.dataLimitBytes != 0 {
		t.Errorf("defaults: quota %d, limit %d, %v", o.quotaBytes, o.dataLimitBytes, err)
	}
	o, err = parseFlags([]string{"--quota-backend-bytes", "8589934592", "--data-limit-bytes", "4294967296"})
	if err != nil || o.quotaBytes != 8<<30 || o.dataLimitBytes != 4<<30 {
		t.Errorf("quota %d, limit %d, %v", o.quotaBytes, o.dataLimitBytes, err)
	}
	if o, err = parseFlags([]string{"--data-limit-bytes", "-1"}); err != nil || o.dataLimitBytes != -1 {
		t.Errorf("no limit: %d, %v", o.dataLimitBytes, err)
	}
	// An external etcd's quota may be larger than --quota-backend-bytes, which only stands in
	// for it when etcd does not report its own.
	if _, err := parseFlags([]string{"--endpoints", "http://127.0.0.1:2379", "--data-limit-bytes", "4294967296"}); err != nil {
		t.Errorf("limit above the default quota with --endpoints: %v", err)
	}
	for _, bad := range [][]string{
		{"--quota-backend-bytes", "0"},
		{"--quota-backend-bytes", "1048576", "--data-limit-bytes", "1048576"},
		{"--data-limit-bytes", "3GiB"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestHealthNoSpace: etcd's NOSPACE alarm fails /healthz, with what to do, unless excluded as
// etcd's own /health?exclude=NOSPACE; the space gauges show it.
func TestHealthNoSpace(t *testing.T) {
	space := etcdstore.Space{DBSize: 100, DBSizeInUse: 60, Quota: 128, Limit: 96}
	reg := newRegistry()
	if err := registerSpaceMetrics(reg, func() etcdstore.Space { return space }); err != nil {
		t.Fatal(err)
	}
	h := newHTTPHandler(reg, probes{
		serving: func() bool { return true },
		ready:   func() bool { return true },
		etcd:    func(context.Context) error { return nil },
		noSpace: func() error { return noSpaceAlarm(space) },
	}, false)
	if code, body := get(t, h, "/healthz"); code != 200 {
		t.Errorf("/healthz without alarm: %d %q", code, body)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, "zetcd_etcd_nospace_alarm 0") ||
		!strings.Contains(body, "zetcd_etcd_db_size_bytes 100") || !strings.Contains(body, "zetcd_etcd_db_size_in_use_bytes 60") ||
		!strings.Contains(body, "zetcd_etcd_quota_bytes 128") || !strings.Contains(body, "zetcd_data_limit_bytes 96") {
		t.Errorf("space gauges missing from /metrics:\n%s", body)
	}
	space.NoSpace = true
	if code, body := get(t, h, "/healthz"); code != 503 || !strings.Contains(body, "NOSPACE") || !strings.Contains(body, "etcdctl") {
		t.Errorf("/healthz with the NOSPACE alarm: %d %q, want 503 naming it", code, body)
	}
	if code, body := get(t, h, "/healthz?exclude=NOSPACE"); code != 200 {
		t.Errorf("/healthz?exclude=NOSPACE with the alarm: %d %q", code, body)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, "zetcd_etcd_nospace_alarm 1") {
		t.Errorf("zetcd_etcd_nospace_alarm not 1 with the alarm")
	}
}

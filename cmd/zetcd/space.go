package main

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zetcd/zetcd/etcdstore"
)

// etcd's space, as the operator sees it: gauges on /metrics, and /healthz failing while etcd's
// NOSPACE alarm is raised (unless asked to exclude it, as etcd's own /health?exclude=NOSPACE).
// The one log line that says what to do comes from the store (etcdstore/space.go).

// registerSpaceMetrics registers the gauges of etcd's space, read from space at each scrape:
//
//	zetcd_etcd_nospace_alarm          1 while etcd's NOSPACE alarm is raised
//	zetcd_etcd_db_size_bytes          etcd's database file (the largest member's)
//	zetcd_etcd_db_size_in_use_bytes   the part of it in use
//	zetcd_etcd_quota_bytes            etcd's space quota
//	zetcd_data_limit_bytes            zetcd's data limit (--data-limit-bytes)
func registerSpaceMetrics(reg prometheus.Registerer, space func() etcdstore.Space) error {
	gauge := func(name, help string, v func(etcdstore.Space) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zetcd_" + name, Help: help},
			func() float64 { return float64(v(space())) })
	}
	return errors.Join(
		reg.Register(gauge("etcd_nospace_alarm", "1 while etcd's NOSPACE alarm is raised: etcd refuses every write.",
			func(s etcdstore.Space) int64 {
				if s.NoSpace {
					return 1
				}
				return 0
			})),
		reg.Register(gauge("etcd_db_size_bytes", "etcd's database file size, what its quota counts (the largest member's).",
			func(s etcdstore.Space) int64 { return s.DBSize })),
		reg.Register(gauge("etcd_db_size_in_use_bytes", "The part of etcd's database file in use (the largest member's).",
			func(s etcdstore.Space) int64 { return s.DBSizeInUse })),
		reg.Register(gauge("etcd_quota_bytes", "etcd's space quota.",
			func(s etcdstore.Space) int64 { return s.Quota })),
		reg.Register(gauge("data_limit_bytes", "zetcd's data limit: writes growing etcd's database in use past it are refused with QuotaExceeded (0: none).",
			func(s etcdstore.Space) int64 { return s.Limit })),
	)
}

// noSpaceAlarm is /healthz's check of etcd's NOSPACE alarm.
func noSpaceAlarm(s etcdstore.Space) error {
	if !s.NoSpace {
		return nil
	}
	return fmt.Errorf("etcd NOSPACE alarm: etcd refuses writes (database %d bytes, quota %d); "+
		"free space, then etcdctl compact, etcdctl defrag, etcdctl alarm disarm (see the log)", s.DBSize, s.Quota)
}

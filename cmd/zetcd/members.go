package main

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zetcd/zetcd/internal/memberguard"
)

// registerGuardMetrics registers the member guard's gauges (with --endpoints naming several
// etcd members).
func registerGuardMetrics(reg prometheus.Registerer, g *memberguard.Guard) error {
	return errors.Join(
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zetcd_etcd_members_left_out",
			Help: "etcd members zetcd sends no request to now: they stopped answering while another answered (--etcd-member-silence)."},
			func() float64 { out, _ := g.LeftOut(); return float64(len(out)) })),
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zetcd_etcd_members_left_out_total",
			Help: "How many times an etcd member was left out for not answering."},
			func() float64 { _, n := g.LeftOut(); return float64(n) })),
	)
}

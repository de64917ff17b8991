package zetcd

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zetcd/zetcd/encoding"
)

// ZooKeeper's metric names. Beside its zetcd_* metrics, a Server with Config.Metrics exports the
// figures ZooKeeper 3.9's PrometheusMetricsProvider exports for a standalone server, under
// ZooKeeper's names, types and labels (no prefix), for every figure zetcd has a true value
// for, so that dashboards and alert rules written for ZooKeeper read zetcd. A figure zetcd
// cannot know is left out, not exported as zero (docs/operating.md "ZooKeeper's metric names").
//
// PrometheusMetricsProvider maps ZooKeeper's metric kinds onto Prometheus types: a gauge
// (registerGauge) is a gauge, a counter (getCounter) a counter, both named as registered; a
// summary (getSummary) is a summary in ZooKeeper's unit (milliseconds for times) with the
// quantile 0.5, and for DetailLevel.ADVANCED also 0.9 and 0.99. The gauges are those
// ZooKeeperServer registers, which mntr prints too: both read one monitorFigures.

// ZKMetric describes one of ZooKeeper's metrics that zetcd exports under ZooKeeper's name.
type ZKMetric struct {
	Name string
	// Type is the Prometheus type PrometheusMetricsProvider gives it: "gauge", "counter" or
	// "summary".
	Type string
	// Quantiles are a summary's quantile label values, as PrometheusMetricsProvider sets them.
	Quantiles []float64
	// Source is where zetcd's value comes from.
	Source string
}

// zkAdvancedObjectives are the quantiles of ZooKeeper's DetailLevel.ADVANCED summaries
// (PrometheusMetricsProvider's PrometheusSummary), with the errors it tolerates: the median, the
// 90th and the 99th percentiles. A DetailLevel.BASIC summary has the median alone.
var zkAdvancedObjectives = map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}

// zkGauge is one of ZooKeeperServer's gauges, read from the figures mntr prints; ok is false
// when zetcd has no value at this scrape (the file descriptors where the system tells none).
type zkGauge struct {
	name, source string
	value        func(f *monitorFigures) (v float64, ok bool)
}

func always(v int64) (float64, bool) { return float64(v), true }

// zkGauges are ZooKeeperServer's gauges that zetcd has a true value for, in mntr's order.
var zkGauges = []zkGauge{
	{"ephemerals_count", "ephemeral znodes in the tree", func(f *monitorFigures) (float64, bool) { return always(f.ephemerals) }},
	{"num_alive_connections", "open client connections of this process", func(f *monitorFigures) (float64, bool) { return always(f.connections) }},
	{"avg_latency", "mean request latency since srst, ms", func(f *monitorFigures) (float64, bool) { return round4(f.avgLatency), true }},
	{"outstanding_requests", "requests read and not yet answered", func(f *monitorFigures) (float64, bool) { return always(f.outstanding) }},
	{"znode_count", "znodes in the tree (the root twice, as ZooKeeper counts)", func(f *monitorFigures) (float64, bool) { return always(f.znodes) }},
	{"global_sessions", "sessions in etcd, whichever zetcd serves them", func(f *monitorFigures) (float64, bool) { return always(f.globalSessions) }},
	{"last_client_response_size", "bytes of the last reply frame", func(f *monitorFigures) (float64, bool) { return always(f.lastResp) }},
	{"packets_sent", "frames and four-letter answers written since srst", func(f *monitorFigures) (float64, bool) { return always(f.packetsSent) }},
	{"packets_received", "frames read since srst", func(f *monitorFigures) (float64, bool) { return always(f.packetsReceived) }},
	{"max_client_response_size", "bytes of the largest reply frame", func(f *monitorFigures) (float64, bool) { return always(f.maxResp) }},
	{"connection_drop_probability", "0: zetcd sheds no connections at random", func(f *monitorFigures) (float64, bool) { return f.dropProbability, true }},
	{"watch_count", "watches of this process, data and child tables", func(f *monitorFigures) (float64, bool) { return always(f.watches) }},
	{"auth_failed_count", "requests answered AuthFailed since srst", func(f *monitorFigures) (float64, bool) { return always(f.authFailed) }},
	{"min_latency", "smallest request latency since srst, ms", func(f *monitorFigures) (float64, bool) { return always(f.minLatency) }},
	{"max_file_descriptor_count", "the process's open file limit", func(f *monitorFigures) (float64, bool) { return float64(f.maxFDs), f.fdOK }},
	{"approximate_data_size", "length of every path plus its data", func(f *monitorFigures) (float64, bool) { return always(f.dataSize) }},
	{"open_file_descriptor_count", "the process's open files", func(f *monitorFigures) (float64, bool) { return float64(f.openFDs), f.fdOK }},
	{"local_sessions", "0: zetcd has no local sessions", func(f *monitorFigures) (float64, bool) { return always(f.localSessions) }},
	{"uptime", "ms since the server started", func(f *monitorFigures) (float64, bool) { return always(f.uptime) }},
	{"max_latency", "largest request latency since srst, ms", func(f *monitorFigures) (float64, bool) { return always(f.maxLatency) }},
	{"min_client_response_size", "bytes of the smallest reply frame", func(f *monitorFigures) (float64, bool) { return always(f.minResp) }},
}

// zkCounter is one of ServerMetrics' counters. PrometheusMetricsProvider does not reset its
// counters (resetAllValues is a no-op there), so /metrics shows the total where mntr shows
// the count since srst.
type zkCounter struct {
	name, source string
	counter      func(st *serverStats) *srstCounter
}

var zkCounters = []zkCounter{
	{"connection_rejected", "connections closed on accept past --max-client-cnxns", func(st *serverStats) *srstCounter { return &st.refusedConns }},
	{"bytes_received_count", "bytes of the frames read", func(st *serverStats) *srstCounter { return &st.bytesReceived }},
	{"response_bytes", "bytes of the reply frames written", func(st *serverStats) *srstCounter { return &st.bytesSent }},
	{"connection_request_count", "ConnectRequests read", func(st *serverStats) *srstCounter { return &st.handshakes }},
}

// ZooKeeper's request latency summaries (ServerMetrics READ_LATENCY and UPDATE_LATENCY,
// DetailLevel.ADVANCED): the latency of each request in whole milliseconds, as ServerStats
// measures it, under updatelatency for the requests ZooKeeper turns into a transaction
// (isUpdate) and readlatency for the others.
const (
	zkReadLatency   = "readlatency"
	zkUpdateLatency = "updatelatency"
)

// ZKMetrics lists ZooKeeper's metrics zetcd exports: the gauges, the counters, the latency
// summaries, and (FsyncTime) fsynctime where the embedded etcd has a write-ahead log.
func ZKMetrics() []ZKMetric {
	var out []ZKMetric
	for _, g := range zkGauges {
		out = append(out, ZKMetric{Name: g.name, Type: "gauge", Source: g.source})
	}
	for _, c := range zkCounters {
		out = append(out, ZKMetric{Name: c.name, Type: "counter", Source: c.source})
	}
	adv := []float64{0.5, 0.9, 0.99}
	out = append(out,
		ZKMetric{Name: zkReadLatency, Type: "summary", Quantiles: adv, Source: "latency of reads (requests that make no transaction), ms"},
		ZKMetric{Name: zkUpdateLatency, Type: "summary", Quantiles: adv, Source: "latency of writes, closeSession included, ms"},
		FsyncTime,
	)
	return out
}

// FsyncTime is ServerMetrics' FSYNC_TIME (DetailLevel.BASIC), which cmd/zetcd exports from the
// embedded etcd's write-ahead log fsyncs.
var FsyncTime = ZKMetric{Name: "fsynctime", Type: "summary", Quantiles: []float64{0.5},
	Source: "the embedded etcd's WAL fsyncs (etcd_disk_wal_fsync_duration_seconds), ms; the median estimated from its buckets"}

// isUpdate reports whether ZooKeeper's PrepRequestProcessor makes a transaction of a request
// of op (an error transaction when it fails): ServerStats counts its latency as an update.
func isUpdate(op encoding.Op) bool {
	switch op {
	case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL,
		encoding.OpDelete, encoding.OpDeleteContainer, encoding.OpSetData, encoding.OpSetACL,
		encoding.OpCheck, encoding.OpMulti, encoding.OpReconfig, encoding.OpCloseSession:
		return true
	}
	return false
}

// observeZKLatency records a request's latency in ZooKeeper's latency summaries. A nil Metrics
// records nothing.
func (m *Metrics) observeZKLatency(op encoding.Op, d time.Duration) {
	if m == nil {
		return
	}
	s := m.readLatency
	if isUpdate(op) {
		s = m.updateLatency
	}
	s.Observe(float64(d.Milliseconds()))
}

// newZKSummary returns one of ZooKeeper's summaries as PrometheusMetricsProvider builds it.
func newZKSummary(name, help string, objectives map[float64]float64) prometheus.Summary {
	return prometheus.NewSummary(prometheus.SummaryOpts{Name: name, Help: help, Objectives: objectives})
}

// monitorFigures are the figures of mntr (and ZooKeeperServer's gauges) that zetcd has, read
// once for a mntr answer or a scrape.
type monitorFigures struct {
	ephemerals, connections, outstanding, znodes, globalSessions int64
	avgLatency, dropProbability                                  float64
	minLatency, maxLatency                                       int64
	lastResp, minResp, maxResp                                   int64
	packetsSent, packetsReceived                                 int64
	watches, authFailed, dataSize, localSessions, uptime         int64
	openFDs, maxFDs                                              int64
	fdOK                                                         bool
}

// monitorFigures reads the figures from the server's counters and the backend's numbers.
func (s *Server) monitorFigures(st BackendStats, w watchSummary) monitorFigures {
	minMs, avgMs, maxMs := s.stats.latency()
	last, smallest, largest := s.stats.responseSizes()
	open, limit, fdOK := fileDescriptors()
	return monitorFigures{
		ephemerals:      st.EphemeralCount,
		connections:     int64(s.numConnections()),
		outstanding:     s.stats.outstanding.Load(),
		znodes:          st.NodeCount,
		globalSessions:  st.Sessions,
		avgLatency:      avgMs,
		minLatency:      minMs,
		maxLatency:      maxMs,
		lastResp:        last,
		minResp:         smallest,
		maxResp:         largest,
		packetsSent:     s.stats.sent.Load(),
		packetsReceived: s.stats.received.Load(),
		watches:         int64(w.total),
		authFailed:      s.stats.authFailed.Load(),
		dataSize:        st.ApproximateDataSize,
		localSessions:   0, // zetcd has no local sessions
		dropProbability: 0, // ZooKeeper's connection throttle drops at random; zetcd's backpressure does not
		uptime:          time.Since(s.started).Milliseconds(),
		openFDs:         open,
		maxFDs:          limit,
		fdOK:            fdOK,
	}
}

// zkCollector exports ZooKeeper's gauges and counters of a Server at scrape time; the latency
// summaries are Metrics' own. The gauges need the backend's cheap numbers (StatsSource.Stats):
// when it cannot give them (ErrNotServing), none is exported, as mntr then answers that the
// server is not serving.
type zkCollector struct {
	s        *Server
	gauges   []*prometheus.Desc // zkGauges'
	counters []*prometheus.Desc // zkCounters'
}

func newZKCollector(s *Server) *zkCollector {
	c := &zkCollector{s: s}
	for _, g := range zkGauges {
		c.gauges = append(c.gauges, prometheus.NewDesc(g.name, g.name+" (ZooKeeper's name): "+g.source+".", nil, nil))
	}
	for _, k := range zkCounters {
		c.counters = append(c.counters, prometheus.NewDesc(k.name, k.name+" (ZooKeeper's name): "+k.source+".", nil, nil))
	}
	return c
}

func (c *zkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.gauges {
		ch <- d
	}
	for _, d := range c.counters {
		ch <- d
	}
}

func (c *zkCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	for i, k := range zkCounters {
		ch <- prometheus.MustNewConstMetric(c.counters[i], prometheus.CounterValue, float64(k.counter(&s.stats).Total()))
	}
	f, ok := c.figures()
	if !ok {
		return
	}
	for i, g := range zkGauges {
		if v, ok := g.value(&f); ok {
			ch <- prometheus.MustNewConstMetric(c.gauges[i], prometheus.GaugeValue, v)
		}
	}
}

// figures reads the monitor figures for a scrape; ok is false if the backend cannot tell its
// numbers now.
func (c *zkCollector) figures() (monitorFigures, bool) {
	s := c.s
	var st BackendStats
	var w watchSummary
	if s.statsSrc != nil {
		ctx, cancel := context.WithTimeout(s.ctx, serverCollectTimeout)
		defer cancel()
		var err error
		if st, err = s.statsSrc.Stats(ctx); err != nil {
			return monitorFigures{}, false
		}
		w = summarizeWatches(s.statsSrc.Watches())
	}
	return s.monitorFigures(st, w), true
}

// ZKMetricsLeftOut are names of ZooKeeper's Prometheus metrics that ZooKeeper's example alert
// rules or Grafana's ZooKeeper mixin query and zetcd does not export, each with why: zetcd has no
// true value for them. The other names ZooKeeper registers and zetcd leaves out are in
// docs/operating.md.
var ZKMetricsLeftOut = map[string]string{
	"quorum_size":           "the size of a ZooKeeper ensemble's quorum, which a standalone ZooKeeper does not export either; zetcd's quorum is etcd's (etcd_server_has_leader, etcd's member list)",
	"election_time":         "ZooKeeper's leader election; zetcd's servers elect no leader among themselves (etcd's elections: etcd_server_leader_changes_seen_total)",
	"snapshottime":          "ZooKeeper's snapshots of its tree; zetcd takes none (etcd's are its own)",
	"jvm_memory_bytes_used": "the JVM's memory; zetcd is no JVM (go_memstats_* and process_resident_memory_bytes)",
	"jvm_memory_bytes_max":  "the JVM's memory; zetcd is no JVM (go_memstats_* and process_resident_memory_bytes)",
}

package zetcd

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zetcd/zetcd/encoding"
)

// Metrics are zetcd's Prometheus metrics. They are registered on the Registerer given to
// NewMetrics (never on the global default registry, so tests stay hermetic) and collected by
// decorators, never by code inside the etcd handler:
//
//   - WrapBackend decorates a Backend: requests by op and code, latency by op, sessions served.
//   - etcdstore.WrapKV decorates the etcd KV the store uses: etcd round trips and errors, each
//     attributed to the ZooKeeper operation that made it through the request context.
//   - Config.Metrics makes a Server export its connection, byte and packet counts, and the
//     watch registry of its backend (StatsSource) by kind.
//
// Names (all prefixed zetcd_):
//
//	requests_total{op,code}        counter   requests answered, by opcode and ZooKeeper error code
//	request_duration_seconds{op}   histogram time in the handler (etcd round trips, watch waits)
//	etcd_round_trips_total{op}     counter   etcd KV calls and committed Txns, by ZooKeeper op
//	                                         (plus connect, expire, stats, other)
//	                                         (a batch of several writes counts once, as op "batch")
//	etcd_errors_total{op}          counter   etcd KV calls and Txns that failed, by ZooKeeper op
//	write_batch_size               histogram writes (creates, deletes, setData, multis) committed
//	                                         in one etcd transaction: _count batches, _sum writes
//	write_batch_commit_seconds     histogram time etcd took to answer a batch's transaction
//	batched_writes_total           counter   writes committed in a batch with other writes
//	own_revisions_total            counter   revisions of this process's write batches that it
//	                                         applied to its replica ahead of etcd's watch
//	replica_divergences_total      counter   such revisions that etcd's watch then reported
//	                                         otherwise (a bug: each reloads the replica)
//	sessions                       gauge     sessions this process serves on a connection now
//	connections                    gauge     open client connections (including 4lw ones)
//	outstanding_requests           gauge     requests read and not yet answered
//	queued_bytes                   gauge     bytes held for clients: requests read, replies
//	                                         and events not yet written (backpressure.go)
//	backpressure_waits_total       counter   times a connection stopped for its client to read
//	watches{kind}                  gauge     watches registered in this process, by kind
//	received_bytes_total           counter   bytes of frames read from clients
//	sent_bytes_total               counter   bytes of frames written to clients
//	draining                       gauge     1 while Shutdown drains connections
//	znodes, global_sessions,       gauges    from the backend at scrape time (one count-only
//	last_zxid                                etcd request per scrape)
//
// Beside them, ZooKeeper's own names for the figures zetcd shares with ZooKeeper (zkmetrics.go).
//
// The cross-checker (xchk) registers its mismatch counter on the same Registerer.
type Metrics struct {
	reg prometheus.Registerer

	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	roundTrips *prometheus.CounterVec
	etcdErrors *prometheus.CounterVec
	sessions   prometheus.Gauge
	batchSize  prometheus.Histogram
	commitTime prometheus.Histogram
	batched    prometheus.Counter
	own        prometheus.Counter
	diverged   prometheus.Counter

	// ZooKeeper's request latency summaries, under its names (zkmetrics.go).
	readLatency, updateLatency prometheus.Summary
}

// NewMetrics creates the request, session and etcd metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "zetcd", Name: "requests_total",
			Help: "ZooKeeper requests answered, by opcode and ZooKeeper error code (OK on success; ConnectionLoss when the connection was closed instead of answering).",
		}, []string{"op", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "zetcd", Name: "request_duration_seconds",
			Help:    "Time a ZooKeeper request spent in the handler, by opcode.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. 6.5s
		}, []string{"op"}),
		roundTrips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "zetcd", Name: "etcd_round_trips_total",
			Help: "etcd KV calls (Get, Put, Delete, Do) and committed Txns, by the ZooKeeper operation that made them.",
		}, []string{"op"}),
		etcdErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "zetcd", Name: "etcd_errors_total",
			Help: "etcd KV calls and Txns that returned an error, by the ZooKeeper operation that made them.",
		}, []string{"op"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "zetcd", Name: "sessions",
			Help: "Sessions this process serves on a client connection now.",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "zetcd", Name: "write_batch_size",
			Help:    "Writes (creates, deletes, setData, multis) committed in one etcd transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
		}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "zetcd", Name: "write_batch_commit_seconds",
			Help:    "Time etcd took to answer a write batch's transaction, from sending it to the answer (a transaction whose guards failed included): the share of a write's latency that is etcd's raft, log sync and apply.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. 6.5s
		}),
		batched: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "zetcd", Name: "batched_writes_total",
			Help: "Writes committed in one etcd transaction with other writes.",
		}),
		own: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "zetcd", Name: "own_revisions_total",
			Help: "Revisions of this process's write batches that it applied to its replica of the tree as etcd committed them, ahead of etcd's watch.",
		}),
		diverged: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "zetcd", Name: "replica_divergences_total",
			Help: "Revisions this process applied to its replica ahead of etcd's watch whose events etcd's watch reported otherwise; each reloads the replica from etcd. Always 0 unless zetcd has a bug.",
		}),
		readLatency:   newZKSummary(zkReadLatency, "readlatency (ZooKeeper's name): latency of requests that make no transaction, in milliseconds.", zkAdvancedObjectives),
		updateLatency: newZKSummary(zkUpdateLatency, "updatelatency (ZooKeeper's name): latency of requests that make a transaction, in milliseconds.", zkAdvancedObjectives),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.roundTrips, m.etcdErrors, m.sessions, m.batchSize, m.commitTime, m.batched, m.own, m.diverged,
		m.readLatency, m.updateLatency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveWriteBatch records a batch of n writes committed in one etcd transaction. A nil
// Metrics records nothing.
func (m *Metrics) ObserveWriteBatch(n int) {
	if m == nil {
		return
	}
	m.batchSize.Observe(float64(n))
	if n > 1 {
		m.batched.Add(float64(n))
	}
}

// ObserveBatchCommit records the time etcd took to answer one write batch's transaction. A nil
// Metrics records nothing.
func (m *Metrics) ObserveBatchCommit(d time.Duration) {
	if m == nil {
		return
	}
	m.commitTime.Observe(d.Seconds())
}

// ObserveOwnRevision records a revision of a write batch applied to the replica ahead of etcd's
// watch; diverged, one whose events etcd's watch reported otherwise. A nil Metrics records
// nothing.
func (m *Metrics) ObserveOwnRevision(diverged bool) {
	if m == nil {
		return
	}
	if diverged {
		m.diverged.Inc()
		return
	}
	m.own.Inc()
}

// Registerer is the registerer the metrics were registered on; other components (the
// cross-checker, the Server) register theirs there too.
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// Operation labels for etcd round trips that serve no client request.
const (
	OpLabelOther   = "other"   // background work: watch feed resync, reaper, keepalive bookkeeping
	OpLabelConnect = "connect" // opening or resuming a session
	OpLabelExpire  = "expire"  // ending a session whose client went silent
)

type opLabelKey struct{}

// WithOpLabel labels ctx with the operation it serves; etcd round trips made with ctx (or a
// context derived from it) through a WrapKV decorator are counted under that label.
func WithOpLabel(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opLabelKey{}, op)
}

// OpLabel returns the label WithOpLabel, or a session's requestLabel, put on ctx, or "other".
func OpLabel(ctx context.Context) string {
	switch v := ctx.Value(opLabelKey{}).(type) {
	case string:
		return v
	case *requestLabel:
		return encoding.Op(v.op.Load()).String()
	}
	return OpLabelOther
}

// requestLabel labels the requests of one session with their ops, for the etcd round trips they
// make (OpLabel), through one context value that points at each request's op in turn
// (metricsSession.labeled), where WithOpLabel would make a context per request: two
// allocations, a sixth of the bytes a read served from memory allocated. Requests run one at a
// time (Handler), each with its op stored before it runs; a round trip made with a request's
// context after the request returned, if any, would be counted under a later request's op.
type requestLabel struct {
	op atomic.Int32 // an encoding.Op
}

// codeLabel is the code label of a request's outcome: "OK", the ZooKeeper error code's name,
// or ConnectionLoss when the request could not be served and the connection is closed.
func codeLabel(err error) string {
	if err == nil {
		return encoding.ErrOK.String()
	}
	if code, ok := errCode(err); ok {
		return code.String()
	}
	return encoding.ErrConnectionLoss.String()
}

// observe records one request of op that took since start and ended with err.
func (m *Metrics) observe(op string, start time.Time, err error) {
	m.requests.WithLabelValues(op, codeLabel(err)).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// CountEtcdCall counts one etcd round trip made for ctx's operation, and its error if any. A
// cancelled context is the caller giving up, not etcd failing.
func (m *Metrics) CountEtcdCall(ctx context.Context, err error) {
	op := OpLabel(ctx)
	m.roundTrips.WithLabelValues(op).Inc()
	if err != nil && !errors.Is(err, context.Canceled) {
		m.etcdErrors.WithLabelValues(op).Inc()
	}
}

// serverCollectTimeout bounds the backend request a scrape makes for the tree gauges.
const serverCollectTimeout = 2 * time.Second

// serverCollector exports a Server's own numbers at scrape time: connections, queued requests,
// bytes, the drain state, and from its StatsSource the watches by kind (memory) and the znode
// and global session counts (one count-only etcd request per scrape).
type serverCollector struct {
	s *Server

	connections, outstanding, draining    *prometheus.Desc
	queuedBytes, backpressured            *prometheus.Desc
	bytesIn, bytesOut, rejected           *prometheus.Desc
	watches, znodes, globalSessions, zxid *prometheus.Desc
}

// registerServer registers s's collector on the metrics' registerer.
func (m *Metrics) registerServer(s *Server) error {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("zetcd_"+name, help, labels, nil)
	}
	if err := m.reg.Register(newZKCollector(s)); err != nil {
		return err
	}
	return m.reg.Register(&serverCollector{
		s:              s,
		connections:    d("connections", "Open client connections, including four-letter-word ones."),
		outstanding:    d("outstanding_requests", "Requests read from clients and not yet answered."),
		draining:       d("draining", "1 while the server drains its connections (Shutdown), else 0."),
		queuedBytes:    d("queued_bytes", "Bytes held for clients: requests read and not executed, replies and watch events not yet written."),
		backpressured:  d("backpressure_waits_total", "Times a connection stopped executing or reading requests until its client read (or the server's queued bytes went down)."),
		bytesIn:        d("received_bytes_total", "Bytes of the frames read from clients."),
		bytesOut:       d("sent_bytes_total", "Bytes of the frames written to clients."),
		rejected:       d("connections_rejected_total", "Connections closed as soon as accepted: their client address held MaxClientCnxns already."),
		watches:        d("watches", "Watches registered in this process, by kind.", "kind"),
		znodes:         d("znodes", "znodes in the tree, counted as ZooKeeper counts them (root twice)."),
		globalSessions: d("global_sessions", "Sessions in etcd, whichever zetcd serves them."),
		zxid:           d("last_zxid", "Newest zxid (etcd revision) at the last scrape."),
	})
}

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connections, c.outstanding, c.draining, c.queuedBytes, c.backpressured, c.bytesIn, c.bytesOut,
		c.rejected, c.watches, c.znodes, c.globalSessions, c.zxid} {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ch <- prometheus.MustNewConstMetric(c.connections, prometheus.GaugeValue, float64(s.numConnections()))
	ch <- prometheus.MustNewConstMetric(c.outstanding, prometheus.GaugeValue, float64(s.stats.outstanding.Load()))
	ch <- prometheus.MustNewConstMetric(c.queuedBytes, prometheus.GaugeValue, float64(s.stats.queuedBytes.Load()))
	ch <- prometheus.MustNewConstMetric(c.backpressured, prometheus.CounterValue, float64(s.stats.backpressured.Load()))
	draining := 0.0
	if s.isDraining() {
		draining = 1
	}
	ch <- prometheus.MustNewConstMetric(c.draining, prometheus.GaugeValue, draining)
	ch <- prometheus.MustNewConstMetric(c.bytesIn, prometheus.CounterValue, float64(s.stats.bytesReceived.Total()))
	ch <- prometheus.MustNewConstMetric(c.bytesOut, prometheus.CounterValue, float64(s.stats.bytesSent.Total()))
	ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.stats.refusedConns.Total()))
	if s.statsSrc == nil {
		return
	}
	byKind := map[WatchKind]int{}
	for _, w := range s.statsSrc.Watches() {
		byKind[w.Kind]++
	}
	for _, k := range WatchKinds {
		ch <- prometheus.MustNewConstMetric(c.watches, prometheus.GaugeValue, float64(byKind[k]), string(k))
	}
	ctx, cancel := context.WithTimeout(s.ctx, serverCollectTimeout)
	defer cancel()
	if st, err := s.statsSrc.Stats(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(c.znodes, prometheus.GaugeValue, float64(st.NodeCount))
		ch <- prometheus.MustNewConstMetric(c.globalSessions, prometheus.GaugeValue, float64(st.Sessions))
		ch <- prometheus.MustNewConstMetric(c.zxid, prometheus.GaugeValue, float64(st.Zxid))
	}
}

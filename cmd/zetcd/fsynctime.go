package main

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/zetcd/zetcd/zetcd"
)

// walFsyncMetric is the embedded etcd's histogram of its write-ahead log's fsyncs, which etcd
// registers on Prometheus' default registry.
const walFsyncMetric = "etcd_disk_wal_fsync_duration_seconds"

// fsyncTimeCollector exports ZooKeeper's fsynctime summary (ServerMetrics FSYNC_TIME: the time
// of each fsync of ZooKeeper's transaction log, in milliseconds) from the embedded etcd's WAL
// fsync histogram: etcd's log is where zetcd's writes are made durable, as ZooKeeper's are in
// its transaction log. The count and the sum are etcd's; the median (ZooKeeper's one quantile
// for DetailLevel.BASIC) is estimated from the histogram's buckets by linear interpolation
// within the bucket that holds it, as Prometheus' histogram_quantile does. With an external
// etcd there is no log of zetcd's own to tell of, and the collector is not registered.
type fsyncTimeCollector struct {
	etcd prometheus.Gatherer // where etcd registered walFsyncMetric
	desc *prometheus.Desc
}

func newFsyncTimeCollector(etcd prometheus.Gatherer) *fsyncTimeCollector {
	return &fsyncTimeCollector{etcd: etcd, desc: prometheus.NewDesc(zetcd.FsyncTime.Name,
		"fsynctime (ZooKeeper's name): the embedded etcd's write-ahead log fsyncs, in milliseconds; the median is estimated from etcd's histogram buckets.", nil, nil)}
}

func (c *fsyncTimeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *fsyncTimeCollector) Collect(ch chan<- prometheus.Metric) {
	h, ok := c.histogram()
	if !ok {
		return
	}
	const ms = 1000
	quantiles := map[float64]float64{0.5: bucketQuantile(0.5, h) * ms}
	ch <- prometheus.MustNewConstSummary(c.desc, h.GetSampleCount(), h.GetSampleSum()*ms, quantiles)
}

// histogram returns etcd's WAL fsync histogram, if etcd registered it.
func (c *fsyncTimeCollector) histogram() (*dto.Histogram, bool) {
	families, err := c.etcd.Gather()
	if err != nil {
		return nil, false
	}
	for _, f := range families {
		if f.GetName() == walFsyncMetric && f.GetType() == dto.MetricType_HISTOGRAM && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram(), true
		}
	}
	return nil, false
}

// bucketQuantile estimates the q-quantile of the observations in h: NaN with none (as a
// Prometheus summary reports an empty window), else linear interpolation in the bucket holding
// it, from 0 for the first bucket; in the +Inf bucket, the largest finite upper bound.
func bucketQuantile(q float64, h *dto.Histogram) float64 {
	total := h.GetSampleCount()
	if total == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range h.GetBucket() {
		upper, cum := b.GetUpperBound(), b.GetCumulativeCount()
		if float64(cum) >= rank {
			if math.IsInf(upper, 1) {
				return lower
			}
			if cum == below {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(below))/float64(cum-below)
		}
		lower, below = upper, cum
	}
	return lower
}

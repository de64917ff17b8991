package main

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestFsyncTimeCollector: fsynctime is etcd's WAL fsync histogram as ZooKeeper's summary, in
// milliseconds: the same count, the sum scaled, and the median interpolated in its bucket; and
// nothing while etcd has registered no such histogram.
func TestFsyncTimeCollector(t *testing.T) {
	etcd := prometheus.NewRegistry()
	c := newFsyncTimeCollector(etcd)
	if got := collectSummaries(t, c); len(got) != 0 {
		t.Fatalf("without etcd's histogram: %d metrics, want none", len(got))
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "etcd", Subsystem: "disk", Name: "wal_fsync_duration_seconds",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 4), // 1, 2, 4, 8 ms
	})
	etcd.MustRegister(h)
	if s := collectSummaries(t, c)[0]; s.GetSampleCount() != 0 || !math.IsNaN(s.GetQuantile()[0].GetValue()) {
		t.Errorf("no fsync yet: count %d, median %v; want 0 and NaN", s.GetSampleCount(), s.GetQuantile()[0].GetValue())
	}
	// Two fsyncs in (1, 2] ms, two in (2, 4] ms: the median is the second's rank, 2 ms.
	for _, d := range []float64{0.0015, 0.0018, 0.003, 0.0035} {
		h.Observe(d)
	}
	s := collectSummaries(t, c)[0]
	if s.GetSampleCount() != 4 || math.Abs(s.GetSampleSum()-9.8) > 1e-9 {
		t.Errorf("count %d sum %v ms, want 4 and 9.8", s.GetSampleCount(), s.GetSampleSum())
	}
	if q := s.GetQuantile(); len(q) != 1 || q[0].GetQuantile() != 0.5 || math.Abs(q[0].GetValue()-2) > 1e-9 {
		t.Errorf("quantiles %v, want the median at 2 ms", q)
	}
	// One slow fsync past the last bucket: the median moves into (2, 4] ms.
	h.Observe(10)
	if q := collectSummaries(t, c)[0].GetQuantile()[0].GetValue(); !(q > 2 && q <= 4) {
		t.Errorf("median %v ms, want within (2, 4]", q)
	}
}

func collectSummaries(t *testing.T, c prometheus.Collector) []*dto.Summary {
	t.Helper()
	ch := make(chan prometheus.Metric, 4)
	c.Collect(ch)
	close(ch)
	var out []*dto.Summary
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		out = append(out, pb.GetSummary())
	}
	return out
}

func TestBucketQuantileInfBucket(t *testing.T) {
	inf, last := math.Inf(1), 0.004
	h := &dto.Histogram{SampleCount: ptr(uint64(2)), Bucket: []*dto.Bucket{
		{UpperBound: &last, CumulativeCount: ptr(uint64(0))},
		{UpperBound: &inf, CumulativeCount: ptr(uint64(2))},
	}}
	if q := bucketQuantile(0.5, h); q != last {
		t.Errorf("median of observations past every bound: %v, want the largest bound %v", q, last)
	}
}

func ptr[T any](v T) *T { return &v }

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// report is what a run measured; --json prints it as is.
type report struct {
	Op        string   `json:"op"`
	Target    string   `json:"target"`
	Endpoints []string `json:"endpoints"`
	// Root is the node (etcd: key prefix) everything the run created is under.
	Root    string `json:"root"`
	Conns   int    `json:"conns"`
	Clients int    `json:"clients"`
	// Requests counts every request made, answered with success or an error.
	Requests     int64            `json:"requests"`
	Errors       int64            `json:"errors"`
	ErrorsByCode map[string]int64 `json:"errorsByCode,omitempty"`
	Seconds      float64          `json:"seconds"`
	// OpsPerSec counts successful requests only.
	OpsPerSec float64 `json:"opsPerSec"`
	// Latencies of successful requests, in milliseconds.
	LatencyMs latencies `json:"latencyMs"`
	Histogram []bucket  `json:"histogram"`
}

type latencies struct {
	Min    float64 `json:"min"`
	Avg    float64 `json:"avg"`
	Stddev float64 `json:"stddev"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p99.9"`
	Max    float64 `json:"max"`
}

// bucket counts the latencies up to UpToMs (and above the previous bucket's bound).
type bucket struct {
	UpToMs float64 `json:"upToMs"`
	Count  int64   `json:"count"`
}

const histogramBuckets = 10

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func summarise(cfg *config, target string, results []clientResult, elapsed time.Duration) *report {
	r := &report{Op: cfg.op, Target: target, Endpoints: cfg.endpoints, Conns: cfg.conns, Clients: cfg.clients,
		Seconds: elapsed.Seconds(), ErrorsByCode: map[string]int64{}, Histogram: []bucket{}}
	var all []time.Duration
	for _, res := range results {
		all = append(all, res.latencies...)
		for code, n := range res.errors {
			r.ErrorsByCode[code] += n
			r.Errors += n
		}
	}
	r.Requests = int64(len(all)) + r.Errors
	if elapsed > 0 {
		r.OpsPerSec = float64(len(all)) / elapsed.Seconds()
	}
	if len(all) == 0 {
		return r
	}
	slices.Sort(all)
	var sum float64
	for _, l := range all {
		sum += ms(l)
	}
	avg := sum / float64(len(all))
	var sq float64
	for _, l := range all {
		sq += (ms(l) - avg) * (ms(l) - avg)
	}
	// Nearest-rank percentiles: the smallest latency with at least p of them at or below it.
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(all)))) - 1
		return ms(all[min(max(i, 0), len(all)-1)])
	}
	r.LatencyMs = latencies{Min: ms(all[0]), Avg: avg, Stddev: math.Sqrt(sq / float64(len(all))),
		P50: pct(0.5), P90: pct(0.9), P99: pct(0.99), P999: pct(0.999), Max: ms(all[len(all)-1])}

	// Ten equal-width buckets from the fastest to the slowest, as etcd's benchmark tool draws.
	lo, hi := all[0], all[len(all)-1]
	width := (hi - lo) / histogramBuckets
	i := 0
	for b := 1; b <= histogramBuckets; b++ {
		bound := lo + width*time.Duration(b)
		if b == histogramBuckets {
			bound = hi
		}
		var n int64
		for i < len(all) && all[i] <= bound {
			n++
			i++
		}
		r.Histogram = append(r.Histogram, bucket{UpToMs: ms(bound), Count: n})
	}
	return r
}

func (r *report) errorSummary() string {
	codes := make([]string, 0, len(r.ErrorsByCode))
	for c := range r.ErrorsByCode {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s: %d", c, r.ErrorsByCode[c])
	}
	return strings.Join(parts, ", ")
}

func (r *report) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func (r *report) writeText(w io.Writer) {
	fmt.Fprintf(w, "%s on %s (%s), %d conns x %d clients\n\n", r.Op, r.Target, strings.Join(r.Endpoints, ","), r.Conns, r.Clients)
	fmt.Fprintf(w, "Summary:\n")
	fmt.Fprintf(w, "  Requests:\t%d (%d succeeded, %d failed)\n", r.Requests, r.Requests-r.Errors, r.Errors)
	fmt.Fprintf(w, "  Total:\t%.4f secs.\n", r.Seconds)
	fmt.Fprintf(w, "  Requests/sec:\t%.1f\n", r.OpsPerSec)
	if r.Requests > r.Errors {
		l := r.LatencyMs
		fmt.Fprintf(w, "  Fastest:\t%.4f ms\n  Average:\t%.4f ms\n  Stddev:\t%.4f ms\n  Slowest:\t%.4f ms\n", l.Min, l.Avg, l.Stddev, l.Max)
		fmt.Fprintf(w, "\nResponse time histogram (ms):\n")
		var most int64
		for _, b := range r.Histogram {
			most = max(most, b.Count)
		}
		for _, b := range r.Histogram {
			bar := 0
			if most > 0 {
				bar = int(40 * b.Count / most)
			}
			fmt.Fprintf(w, "  %10.4f [%d]\t|%s\n", b.UpToMs, b.Count, strings.Repeat("∎", bar))
		}
		fmt.Fprintf(w, "\nLatency distribution:\n")
		for _, p := range []struct {
			name string
			v    float64
		}{{"50%", l.P50}, {"90%", l.P90}, {"99%", l.P99}, {"99.9%", l.P999}} {
			fmt.Fprintf(w, "  %s in %.4f ms\n", p.name, p.v)
		}
	}
	if r.Errors > 0 {
		fmt.Fprintf(w, "\nErrors:\n")
		for _, part := range strings.Split(r.errorSummary(), ", ") {
			fmt.Fprintf(w, "  %s\n", part)
		}
	}
}

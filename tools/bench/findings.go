package main

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/template"
)

// findingsText is the report's Findings section: what was learned of the code, as a template
// whose bold figures come from the run (findingsData).
//
//go:embed findings.md
var findingsText string

var findingsTemplate = template.Must(template.New("findings.md").Option("missingkey=error").Parse(findingsText))

// findingsData is the run's figures the Findings section quotes, formatted; "—" where the run
// lacks one.
type findingsData struct {
	ReadTrips, ReadsVsZK                      string
	TopConns                                  int
	BatchTop                                  string
	CommitMs                                  string
	WatchEtcdZK, WatchZetcdEtcd, WatchZetcdZK string
	OwnCoreOps, OwnCoreP99, EqualReadP99      string
	// The own-core writes step: zetcd's create and setData throughput over ZooKeeper's, and
	// each server's busy share, at the step's most connections.
	OwnWritesVsZK, OwnWritesBusy, OwnWritesBusyZK string
	ZnodeRSS, ZnodeRSSZK, ZnodeLive, ZnodeLiveZK  string
	ScaleSessions, ScaleWatches                   string
	SessionRSS, SessionRSSZK                      string
	WatchLive, WatchLiveZK                        string
	ScaleZnodes                                   string
	RestartZetcd, RestartZK                       string
	FourLetterZetcd, FourLetterZK                 string
	LoadVsZK                                      string
	ImportVsZK                                    string // zetcd import's time over ZooKeeper's restart
}

// findings renders the Findings section from d.
func findings(d *runData) string {
	var b strings.Builder
	if err := findingsTemplate.Execute(&b, newFindingsData(d)); err != nil {
		panic(err) // the template is fixed: its tests fail first
	}
	return b.String()
}

// readOp reports whether a matrix op only reads.
func readOp(op string) bool { return op == "get" || op == "exists" || op == "children" }

func newFindingsData(d *runData) findingsData {
	f := findingsData{}
	_, conns := matrixShape(d.Results)
	var trips, readsVsZK, batches []float64
	for _, r := range d.Results {
		if r.Target != "zetcd" {
			continue
		}
		if readOp(r.Op) {
			trips = append(trips, r.EtcdRoundTripsPerRequest)
			if k := findResult(d.Results, "zookeeper", r.Op, r.Conns); k != nil && k.Report.OpsPerSec > 0 {
				readsVsZK = append(readsVsZK, r.Report.OpsPerSec/k.Report.OpsPerSec)
			}
		}
		if len(conns) > 0 && r.Conns == conns[len(conns)-1] && (r.Op == "create" || r.Op == "set") && r.WritesPerBatch > 0 {
			batches = append(batches, r.WritesPerBatch)
		}
	}
	f.ReadTrips, f.ReadsVsZK = span(trips, "%.2f"), span(readsVsZK, "%.2f")
	if len(conns) > 0 {
		f.TopConns = conns[len(conns)-1]
	}
	f.BatchTop = span(batches, "%.0f")
	f.CommitMs, f.WatchEtcdZK, f.WatchZetcdEtcd, f.WatchZetcdZK = "—", "—", "—", "—"
	if d.Workloads != nil {
		watchFindings(&f, watchRounds(d.Workloads.Results))
	}
	f.OwnCoreOps, f.OwnCoreP99, f.EqualReadP99 = "—", "—", "—"
	if d.OwnCore != nil {
		f.OwnCoreOps, f.OwnCoreP99 = pairedSpans(d.OwnCore.Results)
	}
	if d.EqualLoad != nil {
		_, f.EqualReadP99 = pairedSpans(d.EqualLoad.Results)
	}
	ownWritesFindings(&f, d.OwnWrites)
	memoryFindings(&f, d.MemoryScaling)
	scaleFindings(&f, d.Scale)
	return f
}

// ownWritesFindings fills in the own-core writes step's figures of creates and setData at its
// most connections.
func ownWritesFindings(f *findingsData, ow *ownWritesRuns) {
	f.OwnWritesVsZK, f.OwnWritesBusy, f.OwnWritesBusyZK = "—", "—", "—"
	if ow == nil {
		return
	}
	conns := ownWritesConns[len(ownWritesConns)-1]
	var vs, busy, busyZK []float64
	for _, r := range ow.Results {
		if r.Conns != conns || r.Op != "create" && r.Op != "set" {
			continue
		}
		switch r.Target {
		case "zookeeper":
			busyZK = append(busyZK, 100*r.busy())
		case "zetcd":
			busy = append(busy, 100*r.busy())
			for _, k := range ow.Results {
				if k.Target == "zookeeper" && k.Op == r.Op && k.Conns == conns && k.Report.OpsPerSec > 0 {
					vs = append(vs, r.Report.OpsPerSec/k.Report.OpsPerSec)
				}
			}
		}
	}
	f.OwnWritesVsZK, f.OwnWritesBusy, f.OwnWritesBusyZK = span(vs, "%.2f"), span(busy, "%.0f%%"), span(busyZK, "%.0f%%")
}

// watchFindings fills in the medians over the watch rounds.
func watchFindings(f *findingsData, rounds []watchRound) {
	var commit, etcdZK, zetcdEtcd, zetcdZK []float64
	p50 := func(a, b *result, into *[]float64) {
		if a != nil && b != nil && b.Report.LatencyMs.P50 > 0 {
			*into = append(*into, a.Report.LatencyMs.P50/b.Report.LatencyMs.P50)
		}
	}
	for _, r := range rounds {
		if r.zetcd != nil && r.zetcd.EtcdCommitMs > 0 {
			commit = append(commit, r.zetcd.EtcdCommitMs)
		}
		p50(r.etcd, r.zk, &etcdZK)
		p50(r.zetcd, r.etcd, &zetcdEtcd)
		p50(r.zetcd, r.zk, &zetcdZK)
	}
	f.CommitMs, f.WatchEtcdZK = medianOr(commit), medianOr(etcdZK)
	f.WatchZetcdEtcd, f.WatchZetcdZK = medianOr(zetcdEtcd), medianOr(zetcdZK)
}

// pairedSpans returns the spans of zetcd's read throughput and read p99 over ZooKeeper's in rs.
func pairedSpans(rs []result) (ops, p99 string) {
	var o, p []float64
	for _, pr := range pairedRuns(rs) {
		if !readOp(pr.op) {
			continue
		}
		if pr.zk.OpsPerSec > 0 {
			o = append(o, pr.zetcd.OpsPerSec/pr.zk.OpsPerSec)
		}
		if pr.zk.LatencyMs.P99 > 0 {
			p = append(p, pr.zetcd.LatencyMs.P99/pr.zk.LatencyMs.P99)
		}
	}
	return span(o, "%.2f"), span(p, "%.2f")
}

// memoryFindings fills in the memory step's costs per znode, session and watch.
func memoryFindings(f *findingsData, ms *memScaling) {
	f.ZnodeRSS, f.ZnodeRSSZK, f.ZnodeLive, f.ZnodeLiveZK = "—", "—", "—", "—"
	f.ScaleSessions, f.ScaleWatches, f.SessionRSS, f.SessionRSSZK, f.WatchLive, f.WatchLiveZK = "—", "—", "—", "—", "—", "—"
	if ms == nil {
		return
	}
	z, k := ms.run("zetcd"), ms.run("zookeeper")
	per := func(r *memRun, from, to string, n int, heap bool) string { return bytesOr(r.per(from, to, n, heap)) }
	f.ZnodeRSS, f.ZnodeRSSZK = per(z, "started", "znodes", ms.Znodes, false), per(k, "started", "znodes", ms.Znodes, false)
	f.ZnodeLive, f.ZnodeLiveZK = per(z, "started", "znodes", ms.Znodes, true), per(k, "started", "znodes", ms.Znodes, true)
	s0, s1 := ms.Sessions[0], ms.Sessions[1]
	f.ScaleSessions, f.ScaleWatches = thousands(s1), fmt.Sprint(ms.Watches[1])
	f.SessionRSS, f.SessionRSSZK = per(z, "watches", "scale", s1-s0, false), per(k, "watches", "scale", s1-s0, false)
	n := s0 * ms.Watches[0]
	f.WatchLive, f.WatchLiveZK = per(z, "sessions", "watches", n, true), per(k, "sessions", "watches", n, true)
}

// scaleFindings fills in the scale step's restart, four-letter words and load.
func scaleFindings(f *findingsData, sr *scaleRuns) {
	f.ScaleZnodes, f.RestartZetcd, f.RestartZK, f.FourLetterZetcd, f.FourLetterZK, f.LoadVsZK = "—", "—", "—", "—", "—", "—"
	f.ImportVsZK = "—"
	if sr == nil {
		return
	}
	f.ScaleZnodes = thousands(sr.Znodes)
	z, k := sr.zetcdAndZooKeeper()
	restart := func(r *scaleRun) string {
		if !r.loadedWhole() || r.RestartError != "" || r.Failed != "" {
			return "—"
		}
		return fmt.Sprintf("%.1f", r.RestartSeconds)
	}
	words := func(r *scaleRun) string {
		if r == nil {
			return "—"
		}
		var ms []float64
		for _, w := range r.FourLetter {
			ms = append(ms, w.MedianMs)
		}
		return span(ms, "%.2f")
	}
	f.RestartZetcd, f.RestartZK = restart(z), restart(k)
	f.FourLetterZetcd, f.FourLetterZK = words(z), words(k)
	if z.loadedWhole() && k.loadedWhole() && z.LoadSeconds > 0 && k.LoadSeconds > 0 {
		f.LoadVsZK = fmt.Sprintf("%.2f", k.LoadSeconds/z.LoadSeconds)
	}
	if k != nil && k.Import != nil && k.Import.Error == "" && k.RestartError == "" && k.RestartSeconds > 0 {
		f.ImportVsZK = fmt.Sprintf("%.2f", k.Import.Seconds/k.RestartSeconds)
	}
}

// span formats the least and the greatest of xs as "a-b" (one figure when they print alike), or
// "—" for none.
func span(xs []float64, format string) string {
	if len(xs) == 0 {
		return "—"
	}
	lo, hi := fmt.Sprintf(format, slices.Min(xs)), fmt.Sprintf(format, slices.Max(xs))
	if lo == hi {
		return lo
	}
	return lo + "-" + hi
}

// medianOr formats the median of xs, or "—" for none.
func medianOr(xs []float64) string {
	if len(xs) == 0 || slices.ContainsFunc(xs, math.IsNaN) {
		return "—"
	}
	return fmt.Sprintf("%.2f", median(xs))
}

package main

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// targetTitle names the servers in the report.
var targetTitle = map[string]string{"etcd": "etcd", "zetcd": "zetcd", "zookeeper": "ZooKeeper"}

// markdown renders docs/benchmarks.md, all of it, from the figures in d: the settings, ops and
// connection counts the figures were measured with are taken from d, o's only where d lacks them.
func markdown(o *options, d *runData, plotted bool) string {
	o = reportOptions(o, d)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("A bare etcd, zetcd on its embedded etcd, and a real Apache ZooKeeper, measured on one machine by\n")
	w("`make bench` (tools/bench), which writes this report whole from the figures it saves in\n")
	w("[benchmarks.json](benchmarks.json); `go run ./tools/bench --report-only` writes it again from them\n")
	w("without running anything. Do not edit it by hand: its text is in tools/bench (report.go, findings.md).\n")
	w("The matrix ran on %s.\n", d.Started.Format("2006-01-02 15:04 MST"))
	machineMarkdown(&b, d)
	methodMarkdown(&b, o, d)
	matrixMarkdown(&b, o, d)
	if d.EqualLoad != nil {
		equalLoadMarkdown(&b, d.EqualLoad)
	}
	if d.OwnCore != nil {
		ownCoreMarkdown(&b, d.OwnCore)
	}
	if d.OwnWrites != nil {
		ownWritesMarkdown(&b, d.OwnWrites)
	}
	if d.Workloads != nil {
		workloadsMarkdown(&b, o, d.Workloads)
	}
	if d.Scale != nil {
		scaleMarkdown(&b, d.Scale, "the scale step")
	}
	if d.ScaleLarge != nil {
		scaleMarkdown(&b, d.ScaleLarge, "the large-scale step")
	}
	if d.MemoryScaling != nil {
		memoryMarkdown(&b, d.MemoryScaling)
	}
	if plotted {
		w("\n## Plot\n\nThe matrix: throughput and p99 latency against connections, one panel per op.\n\n")
		w("![throughput and p99 latency against connections](%s)\n", filepath.Base(o.png))
	}
	b.WriteString("\n")
	b.WriteString(findings(d))
	w("\n## Reproducing\n\n```\n")
	w("make bench          # every step, about %d minutes; needs java, `make zookeeper`, and python3 for the plot\n", int(math.Ceil(estimate(o).Minutes())))
	w("make bench-memory   # the memory step alone, about %d minutes\n", int(math.Ceil(memEstimate(o).Minutes())))
	w("make bench-scale    # the workloads, scale and large-scale steps alone, about %d minutes\n", int(math.Ceil((workloadsEstimate(o) + scaleEstimate(o.sc) + scaleEstimate(o.scLarge)).Minutes())))
	w("go run ./tools/bench --bin bin --only scale-large   # the large-scale step alone, about %d minutes\n", int(math.Ceil(scaleEstimate(o.scLarge).Minutes())))
	w("go run ./tools/bench --report-only   # this report again from benchmarks.json, running nothing\n```\n")
	w("\nA run that leaves steps out (`--matrix=false`, `--workloads=false`, ...) keeps their figures from\n")
	w("benchmarks.json and writes the report with all of them.\n")
	return b.String()
}

// reportOptions returns o with the matrix's ops and connection counts and the run's settings as d
// records them, so that a report of saved figures describes how they were measured.
func reportOptions(o *options, d *runData) *options {
	r := *o
	if ops, conns := matrixShape(d.Results); len(ops) > 0 {
		r.ops, r.conns = ops, conns
	}
	s := d.Settings
	if v, err := time.ParseDuration(s["duration per run"]); err == nil {
		r.duration = v
	}
	if v, err := time.ParseDuration(s["warm-up per server"]); err == nil {
		r.warmup = v
	}
	if v, err := strconv.Atoi(strings.TrimSuffix(s["value size"], " bytes")); err == nil {
		r.valSize = v
	}
	if v, err := strconv.Atoi(s["nodes get/set pick from"]); err == nil {
		r.keys = v
	}
	if v, err := strconv.Atoi(s["clients per connection"]); err == nil {
		r.clients = v
	}
	return &r
}

// matrixShape returns the ops of the matrix's runs rs in the order they ran, and their
// connection counts, ascending.
func matrixShape(rs []result) (ops []string, conns []int) {
	for _, r := range rs {
		if !slices.Contains(ops, r.Op) {
			ops = append(ops, r.Op)
		}
		if !slices.Contains(conns, r.Conns) {
			conns = append(conns, r.Conns)
		}
	}
	slices.Sort(conns)
	return ops, conns
}

// machineMarkdown renders the machine and toolchains the matrix ran on.
func machineMarkdown(b *strings.Builder, d *runData) {
	fmt.Fprint(b, "\n## Machine\n\n| | |\n| --- | --- |\n")
	keys := make([]string, 0, len(d.Machine))
	for k := range d.Machine {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "| %s | %s |\n", k, d.Machine[k])
	}
}

// methodMarkdown renders how every step measures: the servers, the load generator, where each
// runs, and what a figure is.
func methodMarkdown(b *strings.Builder, o *options, d *runData) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("\n## Method\n\n")
	w("**Servers.**\n")
	w("- **etcd**: a bare single-member etcd (`internal/embedetcd`, the code and settings zetcd embeds, run alone by\n")
	w("  `tools/bench/benchetcd`), driven by `zkboom --etcd` with the raw etcd request closest to each ZooKeeper one:\n")
	w("  create = a txn \"if the key is absent, put\" (ZooKeeper refuses an existing node); get = a linearizable get;\n")
	w("  exists = a linearizable get with `WithCountOnly` (the answer is whether the key is there, not its value);\n")
	w("  children = a linearizable range over the parent's prefix with `WithKeysOnly` (the names, not the data);\n")
	w("  set = a put; delete = a delete of one key (its reply says whether the key was there, all ZooKeeper's NoNode\n")
	w("  needs). What etcd costs alone: zetcd's writes can only add to it.\n")
	w("- **zetcd**: the `zetcd` binary with its embedded etcd (data on the same disk), over the ZooKeeper protocol.\n")
	w("- **ZooKeeper**: %s standalone, `-Xmx1g` (the scale step: more), its transaction log fsynced like etcd's WAL.\n\n", orDash(d.Machine["zookeeper"]))
	w("**Load.** `zkboom` (cmd/zkboom) runs a closed loop: `--conns N` sessions (etcd: N clients), each with %d\n", o.clients)
	w("request in flight, so concurrency = N; a latency is from just before a request is sent to its reply, and\n")
	w("throughput counts the successful requests a second. Each matrix cell is `zkboom --conns N --duration %s OP`.\n", o.duration)
	w("get, exists and set pick among %d existing nodes; children is getChildren2 of a node with 10 children (etcd: a\n", o.keys)
	w("prefix holding 10 keys); create makes new nodes under one parent; delete deletes nodes zkboom created\n")
	w("beforehand (not measured), as many as that server's create at the same N made in %s (`--total`), so it lasts\n", o.duration)
	w("about as long; mixed is 80%% get, 10%% set, 10%% create; values are %d bytes. The equal-load step runs open-loop\n", o.valSize)
	w("instead (`--rate R`: requests sent at a fixed rate whatever the replies).\n\n")
	w("**Fresh servers, one at a time.** Each step starts each server fresh on an empty data directory of its own;\n")
	w("the servers run one after another, never together. Before the matrix, the equal-load, own-core and watch\n")
	w("runs, a server gets %s of unmeasured mixed load (the JVM's JIT, etcd's and zetcd's caches). In the matrix\n", o.warmup)
	w("a server runs all its cells in turn, so its later cells run on the tree its earlier ones grew, and bare\n")
	w("etcd's cells run minutes before zetcd's.\n\n")
	w("**Shared cores, or a core of its own.** In every step but the own-core step, zkboom runs on the same cores as\n")
	w("the server (Go's default GOMAXPROCS, every core). On a small machine the load generator takes a real share of\n")
	w("the CPU, more so at 64 connections, and a request's latency includes its wait for a core zkboom holds: the\n")
	w("ratios compare servers under the same handicap. The own-core step runs the reads again with the server on\n")
	w("one core and zkboom on another (`taskset -c`), zetcd and ZooKeeper alike.\n")
	if procs := d.Settings[zkboomProcsSetting]; procs != "" && procs != "every core" {
		w("In this run zkboom ran with `GOMAXPROCS=%s` (`--zkboom-procs`), leaving the other cores to the server.\n", procs)
	}
	w("\n**Rounds.** The watch workload runs in rounds: in each, every server is started fresh, warmed up and\n")
	w("measured in turn. A run's latency follows the machine's state from minute to minute (all servers together),\n")
	w("so the report gives each round's ratios and their median.\n\n")
	w("**zetcd's own figures.** Before and after each zetcd run its `/metrics` are scraped: etcd round trips per\n")
	w("ZooKeeper request, writes per etcd transaction (group commit), and the mean time etcd took to answer a\n")
	w("write batch's transaction (`zetcd_write_batch_commit_seconds`).\n\n")
	w("**Busy share and CPU per request.** The CPU figures in the findings are measured by hand this way, not by\n")
	w("`make bench`: a process's CPU per request is its user and system time (`/proc/PID/stat`) over a few seconds\n")
	w("in the middle of a run, divided by the requests it answered meanwhile; the machine's busy share is one minus\n")
	w("its idle share (`/proc/stat`) over the same seconds. With the server and zkboom on the same cores, the two\n")
	w("processes' CPU says how the cores were shared.\n\n")
	w("**Noise.** Every figure is one run of a few seconds on a machine that may be shared (each step gives the\n")
	w("load average at its start): a cell moves by 10-25%% between runs. Steer by the ratios, which compare servers\n")
	w("measured minutes apart in the same run.\n")
}

// matrixMarkdown renders the matrix: throughput and p99 of each server, zetcd's round trips and
// batch sizes, the ratios' geometric means, any errors, and each server's RSS.
func matrixMarkdown(b *strings.Builder, o *options, d *runData) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	find := func(target, op string, conns int) *zkboomReport {
		if r := findResult(d.Results, target, op, conns); r != nil {
			return &r.Report
		}
		return nil
	}
	w("\n## Results\n\nThe matrix. Throughput in successful requests per second; p99 latency in milliseconds.\n\n")
	w("| op | conns | etcd ops/s | zetcd ops/s | ZooKeeper ops/s | zetcd/etcd | zetcd/ZooKeeper | etcd p99 | zetcd p99 | ZooKeeper p99 |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var vsEtcd, vsZK []float64
	var errorsSeen []string
	for _, op := range o.ops {
		for _, c := range o.conns {
			e, z, k := find("etcd", op, c), find("zetcd", op, c), find("zookeeper", op, c)
			w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", op, c, ops(e), ops(z), ops(k),
				ratio(z, e, &vsEtcd), ratio(z, k, &vsZK), p99(e), p99(z), p99(k))
			for _, t := range []string{"etcd", "zetcd", "zookeeper"} {
				if r := find(t, op, c); r != nil && r.Errors > 0 {
					errorsSeen = append(errorsSeen, fmt.Sprintf("%s %s %d conns: %d of %d requests failed (%v)", targetTitle[t], op, c, r.Errors, r.Requests, r.ErrorsByCode))
				}
			}
		}
	}
	w("\nAcross the matrix (geometric mean of the throughput ratios): **zetcd/etcd %s**, **zetcd/ZooKeeper %s**.\n",
		geomean(vsEtcd), geomean(vsZK))
	if len(errorsSeen) > 0 {
		w("\nErrors (counted, not in the throughput):\n\n")
		for _, e := range errorsSeen {
			w("- %s\n", e)
		}
	} else {
		w("No request failed.\n")
	}
	w("\nzetcd's etcd round trips per ZooKeeper request (`zetcd_etcd_round_trips_total` over `zetcd_requests_total`,\n")
	w("pings left out, zkboom's own setup included) during each run:\n\n")
	zetcdTable(b, o, d, "%.2f", false, func(r result) float64 { return r.EtcdRoundTripsPerRequest })
	w("\nzetcd's writes per etcd transaction (`zetcd_write_batch_size`, its sum over its count) during each run of a\n")
	w("writing op (for delete, zkboom's creates of the nodes it deletes, one at a time, are counted too):\n\n")
	zetcdTable(b, o, d, "%.1f", true, func(r result) float64 {
		if !writingOp(r.Op) {
			return 0 // a reading op's run writes only zkboom's setup
		}
		return r.WritesPerBatch
	})
	w("\nResident memory of each server process at the end of its matrix runs (from /proc): zetcd's includes its\n")
	w("embedded etcd, which the bare etcd is alone; ZooKeeper's is a JVM with `-Xmx1g`.\n\n")
	w("| server | peak RSS | RSS at the end |\n| --- | ---: | ---: |\n")
	for _, m := range d.Memory {
		w("| %s | %s | %s |\n", targetTitle[m.Target], mib(m.PeakRSSKB), mib(m.EndRSSKB))
	}
}

// writingOp reports whether the matrix's op writes (its runs have write batches of their own).
func writingOp(op string) bool {
	return slices.Contains([]string{"create", "set", "delete", "mixed", "multi"}, op)
}

// zetcdTable writes a table of one figure of zetcd's runs (value; 0 when a run has none), one
// row per op and one column per connection count; sparse leaves out the rows with none.
func zetcdTable(b *strings.Builder, o *options, d *runData, format string, sparse bool, value func(result) float64) {
	fmt.Fprint(b, "| op |")
	for _, c := range o.conns {
		fmt.Fprintf(b, " %d conns |", c)
	}
	fmt.Fprintf(b, "\n| --- |%s\n", strings.Repeat(" ---: |", len(o.conns)))
	for _, op := range o.ops {
		var row strings.Builder
		seen := false
		for _, c := range o.conns {
			v := "—"
			for _, r := range d.Results {
				if r.Target == "zetcd" && r.Op == op && r.Conns == c && value(r) > 0 {
					v, seen = fmt.Sprintf(format, value(r)), true
				}
			}
			fmt.Fprintf(&row, " %s |", v)
		}
		if seen || !sparse {
			fmt.Fprintf(b, "| %s |%s\n", op, row.String())
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func ops(r *zkboomReport) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f", r.OpsPerSec)
}

func p99(r *zkboomReport) string {
	if r == nil || r.Requests == r.Errors {
		return "—"
	}
	return fmt.Sprintf("%.2f", r.LatencyMs.P99)
}

// ratio formats a/b and records it for the geometric mean.
func ratio(a, b *zkboomReport, all *[]float64) string {
	if a == nil || b == nil || b.OpsPerSec == 0 || a.OpsPerSec == 0 {
		return "—"
	}
	r := a.OpsPerSec / b.OpsPerSec
	*all = append(*all, r)
	return fmt.Sprintf("%.2f", r)
}

func geomean(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	var s float64
	for _, x := range xs {
		s += math.Log(x)
	}
	return fmt.Sprintf("%.2f", math.Exp(s/float64(len(xs))))
}

func mib(kb int64) string {
	if kb == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
}

// estimate is how long a run of every step takes, roughly.
func estimate(o *options) time.Duration {
	per := o.duration + 1500*time.Millisecond
	cells := len(o.ops) * len(o.conns)
	if slices.Contains(o.ops, "delete") {
		cells += len(o.conns) // creating the nodes to delete takes about as long as deleting them
	}
	return time.Duration(len(o.targetsOn))*(time.Duration(cells)*per+o.warmup+10*time.Second) + equalLoadEstimate(o) + ownCoreEstimate(o) + ownWritesEstimate(o) + workloadsEstimate(o) + scaleEstimate(o.sc) + scaleEstimate(o.scLarge) + memEstimate(o)
}

// memEstimate is how long the memory step takes on a 2-core machine, roughly: zetcd loads about
// 3,000 znodes and answers about 5,000 watch-setting reads a second, ZooKeeper several times that.
func memEstimate(o *options) time.Duration {
	m := o.mem
	watches := m.sessions[0]*m.watches[0] + max(0, m.sessions[1]-m.sessions[0])*m.watches[1]
	perServer := time.Duration(m.znodes)*time.Second/3000 + time.Duration(watches)*time.Second/5000 +
		time.Duration(max(m.sessions[0], m.sessions[1]))*time.Second/1000 + 30*time.Second
	return perServer * 5 / 4 // ZooKeeper's share
}

// memoryMarkdown renders the memory step: each step's readings, then the cost per znode, per
// session and per watch derived from them.
func memoryMarkdown(b *strings.Builder, ms *memScaling) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	z, k := ms.run("zetcd"), ms.run("zookeeper")
	step := (*memRun).step
	s0, s1 := ms.Sessions[0], ms.Sessions[1]
	w0, w1 := ms.Watches[0], ms.Watches[1]

	w("\n## Memory per znode, session and watch\n\n")
	w("Measured %s. Each server (zetcd with its embedded etcd: one process; ZooKeeper: one JVM, `-Xmx1g`)\n", ms.Started.Format("2006-01-02 15:04 MST"))
	w("is filled in steps; after each, a garbage collection is forced (zetcd: `runtime.GC` through\n")
	w("`/debug/pprof/heap?gc=1`; ZooKeeper: `jcmd PID GC.run`) and, %s later, the process's resident memory read\n", memSettle)
	w("from /proc. The sessions are raw sockets of the bench process (a separate process), pinging every %s.\n\n", memPingEvery)
	w("1. **znodes**: %s persistent znodes of %d bytes (%d per parent).\n", thousands(ms.Znodes), ms.DataSize, memFanout)
	w("2. **sessions**: %s sessions, each creating one ephemeral znode of %d bytes.\n", thousands(s0), ms.DataSize)
	w("3. **watches**: each of those sessions sets %d data watches (getData with watch), on distinct znodes.\n", w0)
	if s1 > s0 {
		w("4. **scale**: %s more sessions (%s in all), each with one ephemeral and %d data watches (fewer than in\n", thousands(s1-s0), thousands(s1), w1)
		w("   step 3 to keep the step short; the per-watch cost of step 3 accounts for them).\n")
	}
	w("\n| after | znodes | sessions | watches | zetcd RSS | zetcd Go heap | zetcd stacks (goroutines) | ZooKeeper RSS | ZooKeeper heap used |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	names := []string{"started", "znodes", "sessions", "watches", "scale"}
	for _, n := range names {
		zs, ks := step(z, n), step(k, n)
		ref := zs
		if ref == nil {
			ref = ks
		}
		if ref == nil {
			continue
		}
		stacks := "—"
		if zs != nil && zs.Goroutines > 0 {
			stacks = fmt.Sprintf("%s (%s)", mib(zs.StackKB), thousands(int(zs.Goroutines)))
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, thousands(ref.Znodes), thousands(ref.Sessions), thousands(ref.Watches),
			stepKB(zs, false), stepKB(zs, true), stacks, stepKB(ks, false), stepKB(ks, true))
	}

	per := (*memRun).per
	type row struct {
		what, from, to string
		n              int
	}
	rows := []row{
		{"per znode", "started", "znodes", ms.Znodes},
		{"per session (its ephemeral, no watch)", "znodes", "sessions", s0},
		{"per data watch", "sessions", "watches", s0 * w0},
		{fmt.Sprintf("per session with its ephemeral and %d watches", w0), "znodes", "watches", s0},
	}
	if s1 > s0 {
		rows = append(rows, row{fmt.Sprintf("per session at %s sessions, with its ephemeral and %d watches", thousands(s1), w1), "watches", "scale", s1 - s0})
	}
	w("\nDerived: the growth between two steps divided by what the later one added. RSS is what the machine pays,\n")
	w("but it also holds memory a collector has freed and not yet returned, so it moves with how much garbage the\n")
	w("step made; the live columns are what the data itself takes (zetcd: Go's heap in use plus goroutine stacks;\n")
	w("ZooKeeper: the JVM's used heap).\n\n")
	w("| | zetcd RSS | ZooKeeper RSS | zetcd/ZooKeeper | zetcd live | ZooKeeper live |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		zr, zok := per(z, r.from, r.to, r.n, false)
		kr, kok := per(k, r.from, r.to, r.n, false)
		zh, zhok := per(z, r.from, r.to, r.n, true)
		kh, khok := per(k, r.from, r.to, r.n, true)
		ratio := "—"
		if zok && kok && kr > 0 {
			ratio = fmt.Sprintf("%.2f", zr/kr)
		}
		w("| %s | %s | %s | %s | %s | %s |\n", r.what, bytesOr(zr, zok), bytesOr(kr, kok), ratio, bytesOr(zh, zhok), bytesOr(kh, khok))
	}
	w("\nOne run: a few KiB per session or tens of bytes per watch between runs are noise (the garbage collectors\n")
	w("decide how much of the freed memory goes back to the system).\n")
}

// run returns the memory step of target, or nil.
func (ms *memScaling) run(target string) *memRun {
	for i := range ms.Runs {
		if ms.Runs[i].Target == target {
			return &ms.Runs[i]
		}
	}
	return nil
}

// step returns r's step named name, or nil (also when r is nil).
func (r *memRun) step(name string) *memStep {
	if r == nil {
		return nil
	}
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// per is r's growth between steps from and to divided by n, in bytes: of RSS (heap false) or
// of live memory (heap true: the heap, and a Go process's goroutine stacks). ok is false when
// r lacks either step.
func (r *memRun) per(from, to string, n int, heap bool) (v float64, ok bool) {
	a, c := r.step(from), r.step(to)
	if a == nil || c == nil || n <= 0 {
		return 0, false
	}
	if heap {
		return float64(c.HeapKB+c.StackKB-a.HeapKB-a.StackKB) * 1024 / float64(n), true
	}
	return float64(c.RSSKB-a.RSSKB) * 1024 / float64(n), true
}

func stepKB(s *memStep, heap bool) string {
	if s == nil {
		return "—"
	}
	if heap {
		return mib(s.HeapKB)
	}
	return mib(s.RSSKB)
}

// bytesOr formats a size in bytes (KiB from 10 KiB on), or a dash.
func bytesOr(v float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case v >= 10*1024 || v <= -10*1024:
		return fmt.Sprintf("%.0f KiB", v/1024)
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// equalLoadMarkdown renders the equal-load step: per op, both servers' latencies at one offered
// rate.
func equalLoadMarkdown(b *strings.Builder, er *equalLoadRuns) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("\n## Latency at equal load\n\n")
	w("%s). In the closed loop a server that answers more requests also\n", er.measured())
	w("queues more, and leaves zkboom on its cores more to do: here zetcd and ZooKeeper are offered the same rate\n")
	w("(`zkboom --conns %d --rate R`), %.0f%% of the lower of their matrix throughputs at %d connections. Milliseconds.\n\n", er.Conns, 100*er.Share, er.Conns)
	w("| op | offered ops/s | zetcd ops/s | ZooKeeper ops/s | zetcd p50 | ZooKeeper p50 | zetcd p99 | ZooKeeper p99 | zetcd/ZooKeeper p99 |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range pairedRuns(er.Results) {
		z, zk := p.zetcd, p.zk
		w("| %s | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %s |\n", p.op, er.Rates[p.op], z.OpsPerSec, zk.OpsPerSec,
			z.LatencyMs.P50, zk.LatencyMs.P50, z.LatencyMs.P99, zk.LatencyMs.P99, p.p99Ratio())
	}
}

// pairedRun is an op that zetcd and ZooKeeper both ran in a step, with their reports.
type pairedRun struct {
	op        string
	zetcd, zk *zkboomReport
}

// pairedRuns returns the ops of rs that both zetcd and ZooKeeper ran, in zetcd's order.
func pairedRuns(rs []result) []pairedRun {
	var ps []pairedRun
	for i := range rs {
		if r := &rs[i]; r.Target == "zetcd" {
			if k := findResult(rs, "zookeeper", r.Op, 0); k != nil {
				ps = append(ps, pairedRun{op: r.Op, zetcd: &r.Report, zk: &k.Report})
			}
		}
	}
	return ps
}

// p99Ratio formats zetcd's p99 over ZooKeeper's.
func (p pairedRun) p99Ratio() string {
	if p.zk.LatencyMs.P99 == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", p.zetcd.LatencyMs.P99/p.zk.LatencyMs.P99)
}

// ownCoreMarkdown renders the own-core step: per read op, both servers' throughput and latency
// with zkboom on a core of its own.
func ownCoreMarkdown(b *strings.Builder, oc *ownCoreRuns) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("\n## Reads with the load generator on a core of its own\n\n")
	w("%s). The matrix's reads at %d connections, the server on CPUs %s\n", oc.measured(), oc.Conns, oc.ServerCPUs)
	w("(`taskset -c %s`) and zkboom on CPUs %s. Milliseconds.\n\n", oc.ServerCPUs, oc.ZkboomCPUs)
	w("| op | zetcd ops/s | ZooKeeper ops/s | zetcd/ZooKeeper | zetcd p50 | ZooKeeper p50 | zetcd p99 | ZooKeeper p99 | zetcd/ZooKeeper p99 |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range pairedRuns(oc.Results) {
		var unused []float64 // the matrix's geometric mean is not this step's
		z, zk := p.zetcd, p.zk
		w("| %s | %.0f | %.0f | %s | %.2f | %.2f | %.2f | %.2f | %s |\n", p.op, z.OpsPerSec, zk.OpsPerSec, ratio(z, zk, &unused),
			z.LatencyMs.P50, zk.LatencyMs.P50, z.LatencyMs.P99, zk.LatencyMs.P99, p.p99Ratio())
	}
}

// workloadsMarkdown renders the workloads step: sequential creates in one parent, then watch
// event latency.
func workloadsMarkdown(b *strings.Builder, o *options, wr *workloadRuns) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	find := func(target, name string) *result { return findResult(wr.Results, target, name, 0) }
	report := func(r *result) *zkboomReport {
		if r == nil {
			return nil
		}
		return &r.Report
	}
	var errorsSeen []string
	for _, r := range wr.Results {
		if r.Report.Errors > 0 {
			errorsSeen = append(errorsSeen, fmt.Sprintf("%s %s: %d of %d requests failed (%v)", targetTitle[r.Target], r.Op,
				r.Report.Errors, r.Report.Requests, r.Report.ErrorsByCode))
		}
	}
	conns := 0
	for _, r := range wr.Results {
		if r.Op != "watch" {
			conns = r.Conns
		}
	}

	w("\n## Sequential creates in one parent\n\n")
	w("%s; the workloads step). `zkboom --conns %d --duration %s\n", wr.measured(), conns, wr.Duration)
	w("--sequential [--ephemeral] create`: %d sessions creating sequential nodes of %d bytes under one parent, as the\n", conns, o.valSize)
	w("clients of a lock (EPHEMERAL_SEQUENTIAL) or queue (PERSISTENT_SEQUENTIAL) directory do. zetcd names the creates\n")
	w("of a batch after the parent's counter as the batch's earlier ones left it and commits them in one etcd\n")
	w("transaction that guards the counter (etcdstore/commit.go); the round trips count those transactions and the\n")
	w("retries of a batch that finds the counter moved (a create through another zetcd).\n\n")
	w("| mode | zetcd ops/s | ZooKeeper ops/s | zetcd/ZooKeeper | zetcd p50 | ZooKeeper p50 | zetcd p99 | ZooKeeper p99 | zetcd etcd round trips per create |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, m := range []struct{ name, title string }{
		{"seq-create-persistent", "PERSISTENT_SEQUENTIAL"}, {"seq-create-ephemeral", "EPHEMERAL_SEQUENTIAL"},
	} {
		z, k := find("zetcd", m.name), find("zookeeper", m.name)
		trips := "—"
		if z != nil && z.EtcdRoundTripsPerRequest > 0 {
			trips = fmt.Sprintf("%.2f", z.EtcdRoundTripsPerRequest)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.title, ops(report(z)), ops(report(k)), ratio(report(z), report(k), new([]float64)),
			p50(report(z)), p50(report(k)), p99(report(z)), p99(report(k)), trips)
	}

	watchMarkdown(b, wr)
	if len(errorsSeen) > 0 {
		w("\nErrors (counted, not in the throughput or latencies):\n\n")
		for _, e := range errorsSeen {
			w("- %s\n", e)
		}
	}
}

// watchRound is one round of the watch workload: each server's run, nil where it has none.
type watchRound struct{ zetcd, zk, etcd *result }

// watchRounds groups the watch runs of rs by round, in round order (runs without a round
// number, Round 0, make a round of their own).
func watchRounds(rs []result) []watchRound {
	byRound := map[int]*watchRound{}
	var order []int
	for i := range rs {
		r := &rs[i]
		if r.Op != "watch" {
			continue
		}
		wr := byRound[r.Round]
		if wr == nil {
			wr = &watchRound{}
			byRound[r.Round] = wr
			order = append(order, r.Round)
		}
		switch r.Target {
		case "zetcd":
			wr.zetcd = r
		case "zookeeper":
			wr.zk = r
		case "etcd":
			wr.etcd = r
		}
	}
	slices.Sort(order)
	out := make([]watchRound, len(order))
	for i, n := range order {
		out[i] = *byRound[n]
	}
	return out
}

// watchMarkdown renders the watch workload's rounds: every run, then the ratios of each round
// and their medians.
func watchMarkdown(b *strings.Builder, wr *workloadRuns) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	rounds := watchRounds(wr.Results)
	var first *result
	for _, r := range rounds {
		first = cmp.Or(first, r.zetcd, r.zk, r.etcd)
	}
	watchers, duration := 0, "—"
	if first != nil {
		watchers = first.Conns
		duration = (time.Duration(math.Round(first.Report.Seconds)) * time.Second).String()
	}
	w("\n## Watch event latency\n\n")
	w("`zkboom --conns %d --rate %g --duration %s watch`: %d sessions each watch a node of their own (a getData watch,\n", watchers, wr.WatchRate, duration, watchers)
	w("re-armed before each write and not measured) while the next session sets it, %g setData a second in all;\n", wr.WatchRate)
	w("each sample is the time from just before the setData is sent to the NodeDataChanged event's arrival at the\n")
	w("watcher (stamped on arrival, whether it comes before or after the setData's reply). Milliseconds. Bare etcd\n")
	w("(`zkboom --etcd`): %d clients each watch a key of their own while another client puts it, from just before\n", watchers)
	w("the put to the event's arrival: what a write and its event cost on etcd alone. zetcd fires the event when the\n")
	w("setData's etcd transaction answers. %d rounds (Method): steer by the ratios within a round and their median.\n\n", len(rounds))
	w("| round | server | events | events/s | p50 | p90 | p99 | p99.9 | max |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for i, r := range rounds {
		for _, res := range []*result{r.zetcd, r.zk, r.etcd} {
			if res == nil {
				continue
			}
			l := res.Report.LatencyMs
			w("| %d | %s | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", i+1, targetTitle[res.Target], res.Report.Requests-res.Report.Errors,
				res.Report.OpsPerSec, l.P50, l.P90, l.P99, l.P999, l.Max)
		}
	}
	w("\n| round | zetcd/ZooKeeper p50 | zetcd/ZooKeeper p99 | zetcd/etcd p50 | etcd/ZooKeeper p50 |\n| --- | ---: | ---: | ---: | ---: |\n")
	var cols [4][]float64
	cell := func(col int, a, b *result, p99 bool) string {
		if a == nil || b == nil {
			return "—"
		}
		x, y := a.Report.LatencyMs.P50, b.Report.LatencyMs.P50
		if p99 {
			x, y = a.Report.LatencyMs.P99, b.Report.LatencyMs.P99
		}
		if y <= 0 {
			return "—"
		}
		cols[col] = append(cols[col], x/y)
		return fmt.Sprintf("%.2f", x/y)
	}
	for i, r := range rounds {
		w("| %d | %s | %s | %s | %s |\n", i+1, cell(0, r.zetcd, r.zk, false), cell(1, r.zetcd, r.zk, true),
			cell(2, r.zetcd, r.etcd, false), cell(3, r.etcd, r.zk, false))
	}
	med := func(col int) string {
		if len(cols[col]) == 0 {
			return "—"
		}
		return fmt.Sprintf("**%.2f**", median(cols[col]))
	}
	w("| median | %s | %s | %s | %s |\n", med(0), med(1), med(2), med(3))
	var commit []float64
	for _, r := range rounds {
		if r.zetcd != nil && r.zetcd.EtcdCommitMs > 0 {
			commit = append(commit, r.zetcd.EtcdCommitMs)
		}
	}
	if len(commit) > 0 {
		w("\nzetcd's etcd transactions (one per setData here) took %.2f ms on average during its runs (median of the\n", median(commit))
		w("rounds' means, `zetcd_write_batch_commit_seconds`): etcd's raft step, log sync and apply, within every event's latency.\n")
	}
}

// median returns the median of xs (not empty), leaving xs as it is.
func median(xs []float64) float64 {
	sorted := slices.Sorted(slices.Values(xs))
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func p50(r *zkboomReport) string {
	if r == nil || r.Requests == r.Errors {
		return "—"
	}
	return fmt.Sprintf("%.2f", r.LatencyMs.P50)
}

// scaleMarkdown renders a scale step, which step names ("the scale step"): the load, the
// four-letter words and the gets on a large tree, then the restart on it. A server that was not
// started, could not hold the tree or did not restart on it is said so, with how far it got.
func scaleMarkdown(b *strings.Builder, sr *scaleRuns, step string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	z, k := sr.zetcdAndZooKeeper()
	quota := sr.QuotaBytes
	if quota == 0 {
		quota = scaleQuota
	}
	w("\n## A tree of %s znodes: load, gets, four-letter words and restart\n\n", thousands(sr.Znodes))
	w("%s; %s). zetcd (`--quota-backend-bytes %s\n", sr.measured(), step, quotaSize(quota))
	w("--4lw-whitelist '*'`) and ZooKeeper (`-Xmx%s`) are each loaded with %s znodes of %d bytes, %d children per\n", sr.Heap, thousands(sr.Znodes), sr.DataSize, memFanout)
	w("parent, by %d sessions at once, each sending multis of %d creates one at a time. Then\n", sr.Loaders, sr.Batch)
	w("a new session reads the last znode, and each four-letter word is asked %d times, each over a new connection\n", sr.Reps)
	w("to the client port: the time from connecting to the end of the answer (the server closes the connection).\n")
	if sr.GetSessions > 0 {
		w("Then %d sessions read random znodes of the tree for %s, each one getData at a time (the bench's own\n", sr.GetSessions, time.Duration(sr.GetSeconds*float64(time.Second)))
		w("client; a latency is from writing the request to reading its reply).\n")
	}
	w("Then the server is stopped (SIGTERM) and started again on the same data directory: the time from starting\n")
	w("the process until a new session's getData of a znode succeeds (zetcd reopens its embedded etcd and loads\n")
	w("its in-memory replica of the tree from it; ZooKeeper reads its snapshot and replays its transaction log),\n")
	w("and its RSS then and %s later. A server is started only if the machine has the memory it needs\n", scaleSettle)
	w("available (ZooKeeper its heap and %s more, zetcd about %d bytes a znode; each %s to spare), and\n", byteSize(scaleJVMOverhead), scaleZetcdBytesPerZnode, byteSize(float64(scaleMemFloor)))
	w("stopped if the machine's available memory falls below %s: a load that stops short is a result.\n\n", byteSize(float64(scaleMemFloor)))
	w("| | zetcd | ZooKeeper | zetcd/ZooKeeper |\n| --- | ---: | ---: | ---: |\n")
	// row writes f of each server; f returns NaN for a figure the run lacks.
	row := func(what string, f func(r *scaleRun) float64, format string) {
		cell := func(r *scaleRun) string {
			if r == nil || math.IsNaN(f(r)) {
				return "—"
			}
			return fmt.Sprintf(format, f(r))
		}
		ratio := "—"
		if z != nil && k != nil && f(k) > 0 && !math.IsNaN(f(z)) {
			ratio = fmt.Sprintf("%.2f", f(z)/f(k))
		}
		w("| %s | %s | %s | %s |\n", what, cell(z), cell(k), ratio)
	}
	if (z != nil && !z.loadedWhole()) || (k != nil && !k.loadedWhole()) {
		w("| znodes held | %s | %s | — |\n", scaleHeld(z, sr.Znodes), scaleHeld(k, sr.Znodes))
	}
	// loaded gives f for a server that loaded the whole tree, NaN for one that did not.
	loaded := func(f func(r *scaleRun) float64) func(r *scaleRun) float64 {
		return func(r *scaleRun) float64 {
			if !r.loadedWhole() {
				return math.NaN()
			}
			return f(r)
		}
	}
	row("load (znodes/s)", func(r *scaleRun) float64 {
		if r.Skipped != "" || r.LoadSeconds == 0 {
			return math.NaN()
		}
		return float64(scaleLoaded(r, sr.Znodes)) / r.LoadSeconds
	}, "%.0f")
	row("RSS after the load (MiB)", func(r *scaleRun) float64 {
		if r.LoadedRSSKB == 0 {
			return math.NaN()
		}
		return float64(r.LoadedRSSKB) / 1024
	}, "%.0f")
	gets := func(f func(g *getRun) float64) func(r *scaleRun) float64 {
		return func(r *scaleRun) float64 {
			if r.Gets == nil {
				return math.NaN()
			}
			return f(r.Gets)
		}
	}
	row("gets (ops/s)", gets(func(g *getRun) float64 { return g.OpsPerSec }), "%.0f")
	row("gets: p99 (ms)", gets(func(g *getRun) float64 { return g.P99Ms }), "%.2f")
	for _, word := range fourLetterWords {
		row(fmt.Sprintf("`%s`, median of %d (ms)", word, sr.Reps), func(r *scaleRun) float64 {
			for _, f := range r.FourLetter {
				if f.Word == word {
					return f.MedianMs
				}
			}
			return math.NaN()
		}, "%.2f")
	}
	// restarted gives f for a server that served after its restart, NaN for one that did not.
	restarted := func(f func(r *scaleRun) float64) func(r *scaleRun) float64 {
		return loaded(func(r *scaleRun) float64 {
			if r.RestartError != "" || r.Failed != "" {
				return math.NaN()
			}
			return f(r)
		})
	}
	row("restart: until a session reads a znode (s)", restarted(func(r *scaleRun) float64 { return r.RestartSeconds }), "%.1f")
	row("restart: RSS then (MiB)", restarted(func(r *scaleRun) float64 { return float64(r.RestartRSSKB) / 1024 }), "%.0f")
	row(fmt.Sprintf("restart: RSS %s later (MiB)", scaleSettle), restarted(func(r *scaleRun) float64 { return float64(r.SettledRSSKB) / 1024 }), "%.0f")
	row("restart: peak RSS (MiB)", restarted(func(r *scaleRun) float64 { return float64(r.RestartPeakRSSKB) / 1024 }), "%.0f")
	for _, r := range []*scaleRun{z, k} {
		switch {
		case r == nil:
		case r.Skipped != "":
			w("\n**%s was not started**: %s.\n", targetTitle[r.Target], r.Skipped)
		case r.LoadError != "":
			w("\n**%s holds at most %s znodes here**: its load stopped after %.1f s, %s.\n", targetTitle[r.Target],
				thousands(r.HeldZnodes), r.LoadSeconds, r.LoadError)
		case r.Failed != "":
			w("\n**%s stopped serving on the tree**: %s.\n", targetTitle[r.Target], r.Failed)
		case r.RestartError != "":
			w("\n**%s did not restart on the tree**: after %.1f s, %s\n", targetTitle[r.Target], r.RestartSeconds, r.RestartError)
		}
	}
	w("\nNo session and no watch is open while the words are asked (the loaders' sessions are closed): `dump` and\n")
	w("`wchs` list sessions, ephemerals and watches, so these times are what the tree's size alone costs them.\n")
	if k != nil && k.Import != nil {
		importMarkdown(b, k, sr.Znodes)
	}
}

// quotaSize formats a quota in bytes: in GiB if whole ones, else in MiB.
func quotaSize(bytes int64) string {
	if bytes%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", bytes>>30)
	}
	return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20))
}

// scaleLoaded is how many znodes r's load created: all of them unless it stopped short.
func scaleLoaded(r *scaleRun, znodes int) int {
	if r.LoadError != "" {
		return r.HeldZnodes
	}
	return znodes
}

// scaleHeld is the "znodes held" cell of r: the count, with what stopped a load short; "—"
// for a server not run.
func scaleHeld(r *scaleRun, znodes int) string {
	switch {
	case r == nil:
		return "—"
	case r.Skipped != "":
		return "— (not started: memory)"
	case r.LoadError != "":
		return thousands(r.HeldZnodes) + " (load stopped)"
	}
	return thousands(znodes)
}

// importMarkdown renders the import of the scale step's ZooKeeper data directory beside
// ZooKeeper's own restart on it.
func importMarkdown(b *strings.Builder, k *scaleRun, znodes int) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	im := k.Import
	w("\n### Importing ZooKeeper's data directory\n\n")
	w("ZooKeeper, stopped after its restart above, has its data directory (its snapshots and transaction logs\n")
	w("of the %s znodes) imported by `zetcd import --zk-data-dir` into a new embedded etcd (docs/migration.md),\n", thousands(znodes))
	w("from starting the command until it exits; then zetcd is started on the import, until a new session's\n")
	w("getData of the last znode succeeds. ZooKeeper's restart reads the same snapshot and logs, JVM start included.\n\n")
	if im.Error != "" {
		w("**The import did not complete**: after %.1f s, %s\n", im.Seconds, im.Error)
		return
	}
	w("| | seconds | against ZooKeeper's restart |\n| --- | ---: | ---: |\n")
	w("| ZooKeeper's restart on its directory | %.1f | 1.00 |\n", k.RestartSeconds)
	w("| `zetcd import` of that directory (zxids %s, peak RSS %s) | %.1f | %.2f |\n", orDash(im.Zxids), mib(im.PeakRSSKB), im.Seconds, im.Seconds/k.RestartSeconds)
	w("| zetcd's start on the import | %.1f | %.2f |\n", im.StartSeconds, im.StartSeconds/k.RestartSeconds)
}

// ownWritesMarkdown renders the own-core writes step: per op and connection count, each server's
// throughput, its ratio to ZooKeeper's, the server's busy share of its core and its CPU per
// request.
func ownWritesMarkdown(b *strings.Builder, ow *ownWritesRuns) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("\n## Writes with each server on a core of its own\n\n")
	w("%s). The server on CPUs %s (`taskset -c %s`, all its threads), zkboom on CPUs %s; each\n", ow.measured(), ow.ServerCPUs, ow.ServerCPUs, ow.ZkboomCPUs)
	w("server started fresh for each connection count and warmed up; 128-byte values unless Method says\n")
	w("otherwise. Busy is the server's utime+stime (/proc/PID/stat) over the run's wall time: below\n")
	w("100%% the server's core idles while clients wait. CPU per request is that time over the\n")
	w("requests answered. etcd's ops are zkboom's closest etcd requests (Method).\n\n")
	w("| op | conns | server | ops/s | /ZooKeeper | p99 ms | busy | CPU µs/request |\n")
	w("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
	find := func(target, op string, conns int) *ownWritesRun {
		for i := range ow.Results {
			if r := &ow.Results[i]; r.Target == target && r.Op == op && r.Conns == conns {
				return r
			}
		}
		return nil
	}
	for _, op := range ownWritesOps {
		for _, c := range ownWritesConns {
			zk := find("zookeeper", op, c)
			for _, target := range []string{"zookeeper", "zetcd", "etcd"} {
				r := find(target, op, c)
				if r == nil {
					continue
				}
				rel := "—"
				if zk != nil && zk.Report.OpsPerSec > 0 {
					rel = fmt.Sprintf("%.2f", r.Report.OpsPerSec/zk.Report.OpsPerSec)
				}
				w("| %s | %d | %s | %.0f | %s | %.2f | %.0f%% | %.0f |\n", op, c, targetTitle[target], r.Report.OpsPerSec, rel,
					r.Report.LatencyMs.P99, 100*r.busy(), r.cpuPerRequestUs())
			}
		}
	}
}

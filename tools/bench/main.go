// Command bench is the driver behind `make bench`: it starts a bare etcd, zetcd (the real
// binary, on its embedded etcd) and a real Apache ZooKeeper on this machine, one at a time, runs
// the same zkboom matrix against each (zkboom --etcd for etcd), then against zetcd and ZooKeeper
// the equal-load step (equal.go: the same request rate offered to both), the own-core step
// (owncore.go: the reads with the server on one core and zkboom on another), the own-core writes
// step (ownwrites.go: the writes so, bare etcd too, with each server's CPU), the workloads step
// (workloads.go: sequential creates in one parent, watch event latency), the scale step
// (scale.go: load, four-letter words, gets and a restart on a tree of a million znodes), the
// large-scale step (the same on ten million) and the memory step (memory.go: RSS per znode, per
// session and per watch). It saves the figures as JSON
// (docs/benchmarks.json), draws a plot of throughput and p99 latency against concurrency, and
// writes docs/benchmarks.md whole from the figures (report.go; its Findings from findings.md).
//
//	go run ./tools/bench --bin bin [--duration 6s] [--ops create,get,exists,children,set,delete,mixed] [--conns 1,16,64]
//	go run ./tools/bench --bin bin --only memory            # one step alone, the others' figures kept (make bench-memory)
//	go run ./tools/bench --bin bin --only own-core-writes   # the writes with the server on a core of its own
//	go run ./tools/bench --bin bin --matrix=false --equal-load=false --own-core=false --own-core-writes=false --memory=false   # workloads, scale and scale-large (make bench-scale)
//	go run ./tools/bench --bin bin --only scale-large --scale-large-znodes 200000   # the large-scale step alone, small
//	go run ./tools/bench --report-only                      # the report again from docs/benchmarks.json, running nothing
//
// Each step can be left out (--matrix, --equal-load, --own-core, --own-core-writes, --workloads, --scale, --scale-large, --memory =false): a run
// keeps the figures of the steps it leaves out from the existing JSON and rewrites the report with
// all. The equal-load step takes its rates from the matrix's figures, kept or new.
//
// --bin must hold zetcd, zkboom and benchetcd (`make build` and `go build ./tools/bench/benchetcd`).
// The plot is drawn by tools/bench/plot.py with matplotlib (--python); without it the report is
// written without the plot.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/zksession"
)

type options struct {
	bin      string
	zkLib    string
	out      string
	png      string
	data     string
	python   string
	duration time.Duration
	warmup   time.Duration
	ops      []string
	conns    []int
	clients  int
	valSize  int
	keySize  int
	keys     int
	// zkboomProcs is zkboom's GOMAXPROCS; 0 leaves Go's default (every core).
	zkboomProcs int
	workDir     string
	targetsOn   []string
	matrix      bool
	memory      bool
	mem         memOptions
	workloads   bool
	work        workloadOptions
	equalLoad   bool
	equal       equalOptions
	ownCore     bool
	own         ownCoreOptions
	ownWrites   bool
	scale       bool
	sc          scaleOptions
	scaleLarge  bool
	scLarge     scaleOptions // the large-scale step: sc's settings but its znodes and heap

	// serverCPUs and zkboomCPUs, when set, are taskset's lists of the cores the servers started
	// and zkboom run on (the own-core step); empty: every core.
	serverCPUs, zkboomCPUs string
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	var o options
	var ops, conns, targets, memSessions, memWatches string
	flag.StringVar(&o.bin, "bin", "bin", "directory with the zetcd, zkboom and benchetcd binaries")
	flag.StringVar(&o.zkLib, "zookeeper-lib", ".cache/zookeeper/lib", "ZooKeeper's jars (`make zookeeper`)")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "the report")
	flag.StringVar(&o.png, "png", "docs/benchmarks.png", "the plot")
	flag.StringVar(&o.data, "data", "docs/benchmarks.json", "the raw figures")
	flag.StringVar(&o.python, "python", ".cache/benchvenv/bin/python", "a python with matplotlib, for the plot")
	flag.DurationVar(&o.duration, "duration", 6*time.Second, "length of each measured run")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured mixed load before each server's runs")
	flag.StringVar(&ops, "ops", "create,get,exists,children,set,delete,mixed", "zkboom operations (delete after create: it deletes about as many nodes as create made in --duration)")
	flag.StringVar(&conns, "conns", "1,16,64", "connection counts")
	flag.IntVar(&o.clients, "clients", 1, "requests in flight per connection")
	flag.IntVar(&o.valSize, "val-size", 128, "bytes of data per create/set")
	flag.IntVar(&o.keySize, "key-size", 8, "bytes per node name")
	flag.IntVar(&o.keys, "keys", 1000, "nodes that get and set pick from")
	flag.IntVar(&o.zkboomProcs, "zkboom-procs", 0, "GOMAXPROCS of the load generator (0: Go's default, every core); the servers share the machine's cores with it")
	flag.StringVar(&targets, "targets", "etcd,zetcd,zookeeper", "servers to measure")
	flag.BoolVar(&o.matrix, "matrix", true, "run the zkboom matrix (false: keep its figures from --data)")
	flag.BoolVar(&o.memory, "memory", true, "run the memory step (false: keep its figures from --data)")
	flag.IntVar(&o.mem.znodes, "mem-znodes", 100000, "memory step: znodes to load")
	flag.IntVar(&o.mem.dataSize, "mem-data", 128, "memory step: bytes of data per znode")
	flag.StringVar(&memSessions, "mem-sessions", "1000,10000", "memory step: sessions open after the sessions step and after the scale step")
	flag.StringVar(&memWatches, "mem-watches", "100,10", "memory step: getData watches per session opened in the sessions step and in the scale step")
	flag.StringVar(&o.mem.profiles, "mem-profiles", "", "memory step: a directory for zetcd's heap profile after each step")
	flag.BoolVar(&o.workloads, "workloads", true, "run the workloads step: sequential creates in one parent, watch event latency (false: keep its figures from --data)")
	flag.BoolVar(&o.equalLoad, "equal-load", true, "run the equal-load step: zetcd and ZooKeeper offered the same request rate (false: keep its figures from --data)")
	flag.IntVar(&o.equal.conns, "equal-conns", 64, "equal-load step: connections of each run")
	flag.Float64Var(&o.equal.share, "equal-share", 0.8, "equal-load step: the rate offered, as a share of the lower of zetcd's and ZooKeeper's matrix throughputs")
	flag.BoolVar(&o.ownCore, "own-core", true, "run the own-core step: zetcd's and ZooKeeper's reads with the server on one core and zkboom on another (false: keep its figures from --data)")
	flag.BoolVar(&o.ownWrites, "own-core-writes", true, "run the own-core writes step: the writes of bare etcd, zetcd and ZooKeeper with the server on one core and zkboom on another, with the server's busy share and CPU per request (false: keep its figures from --data)")
	flag.IntVar(&o.own.conns, "own-core-conns", 64, "own-core step: connections of each run")
	flag.StringVar(&o.own.serverCPUs, "own-core-server-cpus", "0", "own-core step: the server's cores (taskset -c)")
	flag.StringVar(&o.own.zkboomCPUs, "own-core-zkboom-cpus", "1", "own-core step: zkboom's cores (taskset -c)")
	flag.IntVar(&o.work.seqConns, "seq-conns", 64, "workloads step: sessions creating sequential nodes in one parent (for --duration)")
	flag.IntVar(&o.work.watchers, "watchers", 16, "workloads step: watching sessions")
	flag.Float64Var(&o.work.watchRate, "watch-rate", 500, "workloads step: setData per second on the watched nodes")
	flag.BoolVar(&o.scale, "scale", true, "run the scale step: mntr, dump and wchs on a large tree, restart on it (false: keep its figures from --data)")
	flag.IntVar(&o.sc.znodes, "scale-znodes", 1000000, "scale step: znodes in the tree")
	flag.IntVar(&o.sc.dataSize, "scale-data", 128, "scale step: bytes of data per znode")
	flag.IntVar(&o.sc.batch, "scale-batch", 250, "scale step: creates per multi while loading")
	flag.IntVar(&o.sc.loaders, "scale-loaders", 8, "scale step: sessions loading at once")
	flag.IntVar(&o.sc.reps, "scale-reps", 5, "scale step: times each four-letter word is asked")
	flag.IntVar(&o.sc.getSessions, "scale-get-sessions", 16, "scale steps: sessions reading random znodes at once in the get run")
	flag.DurationVar(&o.sc.getDuration, "scale-get-duration", 10*time.Second, "scale steps: length of the get run")
	flag.BoolVar(&o.scaleLarge, "scale-large", true, "run the large-scale step: the scale step's measurements on a tree of --scale-large-znodes (false: keep its figures from --data)")
	flag.IntVar(&o.scLarge.znodes, "scale-large-znodes", 10000000, "large-scale step: znodes in the tree (its other settings are the scale step's)")
	flag.StringVar(&o.scLarge.heap, "scale-large-heap", "14g", "large-scale step: ZooKeeper's heap (-Xmx)")
	flag.Int64Var(&o.scLarge.quota, "scale-large-quota-bytes", scaleQuota, "large-scale step: zetcd's --quota-backend-bytes (etcd's largest by default; less finds where a smaller quota stops the load)")
	flag.DurationVar(&o.work.watchDuration, "watch-duration", 10*time.Second, "workloads step: length of the watch run")
	flag.IntVar(&o.work.watchRounds, "watch-rounds", 3, "workloads step: rounds of the watch run, each server started fresh in each")
	only := flag.String("only", "", "run this step alone and keep the others' figures from --data: matrix, equal-load, own-core, own-core-writes, workloads, scale, scale-large or memory")
	reportOnly := flag.Bool("report-only", false, "run nothing: write --out from the figures in --data (the plot at --png as it is)")
	flag.Parse()
	pair := func(flagName, v string) [2]int {
		f := strings.Split(v, ",")
		var p [2]int
		for i := range p {
			if len(f) != 2 {
				log.Fatalf("--%s %q: want two numbers", flagName, v)
			}
			n, err := strconv.Atoi(f[i])
			if err != nil || n < 0 {
				log.Fatalf("--%s %q: want two non-negative numbers", flagName, v)
			}
			p[i] = n
		}
		return p
	}
	if *only != "" {
		steps := map[string]*bool{"matrix": &o.matrix, "equal-load": &o.equalLoad, "own-core": &o.ownCore,
			"own-core-writes": &o.ownWrites, "workloads": &o.workloads, "scale": &o.scale, "scale-large": &o.scaleLarge,
			"memory": &o.memory}
		if steps[*only] == nil {
			log.Fatalf("--only %q: not a step", *only)
		}
		for name, on := range steps {
			*on = name == *only
		}
	}
	o.mem.sessions, o.mem.watches = pair("mem-sessions", memSessions), pair("mem-watches", memWatches)
	o.sc.step, o.sc.heap, o.sc.quota = "scale", scaleHeap, scaleQuota
	o.scLarge = largeScaleOptions(o.sc, o.scLarge.znodes, o.scLarge.heap, o.scLarge.quota)
	if _, err := heapBytes(o.scLarge.heap); err != nil {
		log.Fatalf("--scale-large-heap: %v", err)
	}
	o.ops = strings.Split(ops, ",")
	o.targetsOn = strings.Split(targets, ",")
	for _, c := range strings.Split(conns, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			log.Fatalf("--conns %q: want positive numbers", conns)
		}
		o.conns = append(o.conns, n)
	}
	if *reportOnly {
		if err := writeReportOnly(&o); err != nil {
			log.Fatal(err)
		}
		return
	}
	dir, err := os.MkdirTemp("", "zetcd-bench-")
	if err != nil {
		log.Fatal(err)
	}
	o.workDir = dir
	err = runBench(&o)
	// Removed before log.Fatal, which skips deferred calls: a failed run leaves no data
	// directories (gigabytes after the scale step) behind.
	os.RemoveAll(dir)
	if err != nil {
		log.Fatal(err)
	}
}

// zkboomReport is the part of `zkboom --json` the report uses.
type zkboomReport struct {
	Op           string           `json:"op"`
	Conns        int              `json:"conns"`
	Clients      int              `json:"clients"`
	Requests     int64            `json:"requests"`
	Errors       int64            `json:"errors"`
	ErrorsByCode map[string]int64 `json:"errorsByCode"`
	Seconds      float64          `json:"seconds"`
	OpsPerSec    float64          `json:"opsPerSec"`
	LatencyMs    struct {
		Min  float64 `json:"min"`
		Avg  float64 `json:"avg"`
		P50  float64 `json:"p50"`
		P90  float64 `json:"p90"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p99.9"`
		Max  float64 `json:"max"`
	} `json:"latencyMs"`
}

// result is one run of the matrix.
type result struct {
	Target string       `json:"target"`
	Op     string       `json:"op"`
	Conns  int          `json:"conns"`
	Report zkboomReport `json:"report"`
	// Round numbers the runs of a workload repeated in rounds (the watch workload), from 1.
	Round int `json:"round,omitempty"`
	// EtcdRoundTripsPerRequest is, for zetcd, the etcd calls it made per ZooKeeper request
	// during the run (pings left out), from its /metrics.
	EtcdRoundTripsPerRequest float64 `json:"etcdRoundTripsPerRequest,omitempty"`
	// WritesPerBatch is, for zetcd, the mean number of writes it committed per etcd
	// transaction during the run (group commit), from its /metrics; 0 when it wrote nothing.
	WritesPerBatch float64 `json:"writesPerBatch,omitempty"`
	// EtcdCommitMs is, for zetcd, the mean time etcd took to answer a write batch's
	// transaction during the run (zetcd_write_batch_commit_seconds); 0 when it wrote nothing.
	EtcdCommitMs float64 `json:"etcdCommitMs,omitempty"`
}

// addMetrics adds what zetcd's metrics say of the run, from scrapes before and after it.
func (r *result) addMetrics(before, after map[string]float64) {
	r.EtcdRoundTripsPerRequest = roundTrips(before, after)
	r.WritesPerBatch = writesPerBatch(before, after)
	r.EtcdCommitMs = 1000 * histogramMean(before, after, "zetcd_write_batch_commit_seconds")
}

// metricsLine is addMetrics' figures for the progress log.
func (r *result) metricsLine() string {
	return fmt.Sprintf("  etcd calls/request %.2f  writes/batch %.1f  etcd commit %.3f ms", r.EtcdRoundTripsPerRequest, r.WritesPerBatch, r.EtcdCommitMs)
}

// memory is a server process's resident memory over its runs.
type memory struct {
	Target    string `json:"target"`
	PeakRSSKB int64  `json:"peakRssKB"` // VmHWM at the end
	EndRSSKB  int64  `json:"endRssKB"`  // VmRSS at the end
}

// runData is everything one run of the driver measured: docs/benchmarks.json.
type runData struct {
	Started  time.Time         `json:"started"`
	Machine  map[string]string `json:"machine"`
	Settings map[string]string `json:"settings"`
	Results  []result          `json:"results"`
	Memory   []memory          `json:"memory"`
	// MemoryScaling is the memory step (memory.go).
	MemoryScaling *memScaling `json:"memoryScaling,omitempty"`
	// EqualLoad is the equal-load step (equal.go).
	EqualLoad *equalLoadRuns `json:"equalLoad,omitempty"`
	// OwnCore is the own-core step (owncore.go).
	OwnCore *ownCoreRuns `json:"ownCore,omitempty"`
	// OwnWrites is the own-core writes step (ownwrites.go).
	OwnWrites *ownWritesRuns `json:"ownWrites,omitempty"`
	// Workloads is the workloads step (workloads.go).
	Workloads *workloadRuns `json:"workloads,omitempty"`
	// Scale is the scale step (scale.go).
	Scale *scaleRuns `json:"scale,omitempty"`
	// ScaleLarge is the large-scale step: the scale step on a larger tree.
	ScaleLarge *scaleRuns `json:"scaleLarge,omitempty"`
}

// server is a started server process.
type server struct {
	name     string
	cmd      *exec.Cmd
	endpoint string // what zkboom's --endpoints gets
	metrics  string // zetcd: the /metrics URL
	etcd     bool   // zkboom --etcd
	log      *bytes.Buffer
	exited   chan struct{}
	// lowMemory, once set, is why the scale steps' memory guard killed the server
	// (scaleguard.go).
	lowMemory atomic.Pointer[string]
}

func runBench(o *options) error {
	bins := []string{"zetcd"}
	if o.matrix || o.workloads || o.equalLoad || o.ownCore || o.ownWrites {
		bins = append(bins, "zkboom", "benchetcd")
	}
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("%s: %v (build it first: make bench does)", b, err)
		}
	}
	data := &runData{Started: time.Now().UTC(), Machine: machine(), Settings: map[string]string{
		"duration per run": o.duration.String(), "warm-up per server": o.warmup.String(),
		"clients per connection": strconv.Itoa(o.clients), "value size": fmt.Sprintf("%d bytes", o.valSize),
		"node name size": fmt.Sprintf("%d bytes", o.keySize), "nodes get/set pick from": strconv.Itoa(o.keys),
		zkboomProcsSetting: zkboomProcs(o),
	}}
	if !o.matrix || !o.memory || !o.workloads || !o.scale || !o.scaleLarge || !o.equalLoad || !o.ownCore || !o.ownWrites {
		// Keep the figures of the part not run from the last report's data.
		old := &runData{}
		if raw, err := os.ReadFile(o.data); err == nil {
			if err := json.Unmarshal(raw, old); err != nil {
				return fmt.Errorf("%s: %w", o.data, err)
			}
		}
		if !o.matrix {
			data.Started, data.Machine, data.Settings = old.Started, old.Machine, old.Settings
			data.Results, data.Memory = old.Results, old.Memory
		}
		if !o.memory {
			data.MemoryScaling = old.MemoryScaling
		}
		if !o.workloads {
			data.Workloads = old.Workloads
		}
		if !o.equalLoad {
			data.EqualLoad = old.EqualLoad
		}
		if !o.ownCore {
			data.OwnCore = old.OwnCore
		}
		if !o.ownWrites {
			data.OwnWrites = old.OwnWrites
		}
		if !o.scale {
			data.Scale = old.Scale
		}
		if !o.scaleLarge {
			data.ScaleLarge = old.ScaleLarge
		}
	}
	// Each step's figures are saved as soon as it ends: a later step that fails leaves them in
	// --data, and a run that leaves the finished steps out (--matrix=false ...) keeps them.
	save := func() error {
		raw, err := json.MarshalIndent(data, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.data, append(raw, '\n'), 0o644)
	}
	steps := []struct {
		on  bool
		run func() error
	}{
		{o.matrix, func() error { return runMatrix(o, data) }},
		{o.equalLoad, func() (err error) { data.EqualLoad, err = runEqualLoad(o, data.Results); return err }},
		{o.ownCore, func() (err error) { data.OwnCore, err = runOwnCore(o); return err }},
		{o.ownWrites, func() (err error) { data.OwnWrites, err = runOwnWrites(o); return err }},
		{o.workloads, func() (err error) { data.Workloads, err = runWorkloads(o); return err }},
		{o.scale, func() (err error) { data.Scale, err = runScale(o, o.sc); return err }},
		{o.scaleLarge, func() (err error) { data.ScaleLarge, err = runScale(o, o.scLarge); return err }},
		{o.memory, func() (err error) { data.MemoryScaling, err = runMemory(o); return err }},
	}
	for _, st := range steps {
		if !st.on {
			continue
		}
		if err := st.run(); err != nil {
			return err
		}
		if err := save(); err != nil {
			return err
		}
	}
	if err := save(); err != nil {
		return err
	}
	// The plot is drawn again from the matrix's figures, kept or new, so it always shows them.
	plotted := len(data.Results) > 0 && plot(o)
	if _, err := os.Stat(o.png); err == nil && !plotted && !o.matrix {
		plotted = true // no python here: the last plot is of the kept figures
	}
	report := markdown(o, data, plotted)
	if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s, %s%s", o.out, o.data, map[bool]string{true: ", " + o.png, false: ""}[plotted])
	return nil
}

// writeReportOnly writes the report from the figures saved in o.data, running nothing; the
// plot is referenced if o.png exists.
func writeReportOnly(o *options) error {
	raw, err := os.ReadFile(o.data)
	if err != nil {
		return err
	}
	data := &runData{}
	if err := json.Unmarshal(raw, data); err != nil {
		return fmt.Errorf("%s: %w", o.data, err)
	}
	_, err = os.Stat(o.png)
	if err := os.WriteFile(o.out, []byte(markdown(o, data, err == nil)), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s from %s", o.out, o.data)
	return nil
}

// runMatrix runs the zkboom matrix against each target, into data.
func runMatrix(o *options, data *runData) error {
	for _, name := range o.targetsOn {
		s, err := startTarget(o, name)
		if err != nil {
			return err
		}
		log.Printf("%s started (pid %d, %s)", name, s.cmd.Process.Pid, s.endpoint)
		results, err := measure(o, s)
		mem := readMemory(s.cmd.Process.Pid)
		mem.Target = name
		s.stop()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, s.log.String())
		}
		data.Results = append(data.Results, results...)
		data.Memory = append(data.Memory, mem)
	}
	return nil
}

// startTarget starts target name (etcd, zetcd or zookeeper) on o.workDir and waits until it
// serves.
func startTarget(o *options, name string) (*server, error) {
	if name == "etcd" {
		return startEtcd(o)
	}
	s, ok, err := startZKServer(o, name)
	if !ok {
		return nil, fmt.Errorf("unknown target %q", name)
	}
	return s, err
}

// measure runs the warm-up and then the matrix against s.
func measure(o *options, s *server) ([]result, error) {
	if err := warmUp(o, s); err != nil {
		return nil, err
	}
	var results []result
	for _, op := range o.ops {
		for _, c := range o.conns {
			d, extra := o.duration, []string(nil)
			if op == "delete" {
				d, extra = 0, []string{"--total", strconv.Itoa(deleteTotal(results, c, o.duration))}
			}
			res, err := measureRun(o, s, "", op, op, c, d, extra...)
			if err != nil {
				return nil, err
			}
			results = append(results, *res)
		}
	}
	return results, nil
}

// warmUp gives s the matrix's unmeasured mixed load (the JVM's JIT, etcd's and zetcd's caches).
func warmUp(o *options, s *server) error {
	if o.warmup <= 0 {
		return nil
	}
	if _, err := zkboom(o, s, "mixed", 16, o.warmup); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// measureRun runs zkboom's op against s at conns connections for d (extra: more zkboom flags),
// with what zetcd's metrics say of the run, logs it after step, and returns it named name.
func measureRun(o *options, s *server, step, name, op string, conns int, d time.Duration, extra ...string) (*result, error) {
	before, err := scrape(s.metrics)
	if err != nil {
		return nil, err
	}
	r, err := zkboom(o, s, op, conns, d, extra...)
	if err != nil {
		return nil, err
	}
	after, err := scrape(s.metrics)
	if err != nil {
		return nil, err
	}
	res := &result{Target: s.name, Op: name, Conns: conns, Report: *r}
	res.addMetrics(before, after)
	line := fmt.Sprintf("%s%-9s %-8s %3d conns: %8.0f ops/s  p50 %6.2f ms  p99 %6.2f ms  errors %d",
		step, s.name, name, conns, r.OpsPerSec, r.LatencyMs.P50, r.LatencyMs.P99, r.Errors)
	if s.metrics != "" {
		line += res.metricsLine()
	}
	log.Print(line)
	return res, nil
}

// findResult returns the run of rs of target and op at conns (at any connections if conns is
// 0), or nil.
func findResult(rs []result, target, op string, conns int) *result {
	for i := range rs {
		if r := &rs[i]; r.Target == target && r.Op == op && (conns == 0 || r.Conns == conns) {
			return r
		}
	}
	return nil
}

// deleteTotal is how many nodes the delete run at conns connections deletes (zkboom delete
// creates them first, unmeasured): as many as the same server's create run at conns created in
// d, so that the run lasts about d, or 500 per connection without a create run.
func deleteTotal(results []result, conns int, d time.Duration) int {
	for _, r := range results {
		if r.Op == "create" && r.Conns == conns && r.Report.OpsPerSec > 0 {
			return max(int(r.Report.OpsPerSec*d.Seconds()), 100*conns)
		}
	}
	return 500 * conns
}

// zkboom runs one zkboom against s for d (0: no --duration; extra gives --total) and returns
// its report.
func zkboom(o *options, s *server, op string, conns int, d time.Duration, extra ...string) (*zkboomReport, error) {
	args := []string{"--json", "--endpoints", s.endpoint, "--conns", strconv.Itoa(conns), "--clients", strconv.Itoa(o.clients),
		"--val-size", strconv.Itoa(o.valSize), "--key-size", strconv.Itoa(o.keySize), "--keys", strconv.Itoa(o.keys)}
	if d > 0 {
		args = append(args, "--duration", d.String())
	}
	if s.etcd {
		args = append(args, "--etcd")
	}
	args = append(args, extra...)
	args = append(args, op)
	cmd := exec.Command(filepath.Join(o.bin, "zkboom"), args...)
	if o.zkboomProcs > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(o.zkboomProcs))
	}
	cmd = onCPUs(cmd, o.zkboomCPUs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("zkboom %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var r zkboomReport
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("zkboom %s: %v in %q", strings.Join(args, " "), err, out)
	}
	return &r, nil
}

// zkboomProcsSetting names zkboom's processors among the run's settings.
const zkboomProcsSetting = "zkboom processors (GOMAXPROCS)"

// zkboomProcs is the processors zkboom may use, as the settings show it.
func zkboomProcs(o *options) string {
	if o.zkboomProcs > 0 {
		return strconv.Itoa(o.zkboomProcs)
	}
	return "every core"
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts a server process in its own process group, with its output kept for errors.
func start(name string, cmd *exec.Cmd) (*server, error) {
	s := &server{name: name, cmd: cmd, log: &bytes.Buffer{}, exited: make(chan struct{})}
	w := &lockedWriter{w: s.log}
	if cmd.Stderr == nil {
		cmd.Stderr = w
	}
	if cmd.Stdout == nil {
		cmd.Stdout = w
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// stop ends the server with SIGTERM (SIGKILL after 20s) and waits for it.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func startEtcd(o *options) (*server, error) {
	cmd := onCPUs(exec.Command(filepath.Join(o.bin, "benchetcd"), "--data-dir", filepath.Join(o.workDir, "etcd")), o.serverCPUs)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s, err := start("etcd", cmd)
	if err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if ep, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- ep
			}
		}
	}()
	select {
	case s.endpoint = <-ready:
		s.etcd = true
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("benchetcd exited: %s", s.log.String())
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, errors.New("benchetcd not ready after 60s")
	}
}

func startZetcd(o *options) (*server, error) {
	s, err := launchZetcd(o)
	if err != nil {
		return nil, err
	}
	return s, waitSession(s)
}

// launchZetcd starts zetcd on o.workDir/zetcd (an existing embedded etcd there is reopened),
// with extra flags, and returns without waiting for it to serve.
func launchZetcd(o *options, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	addr, maddr := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", mport)
	args := append([]string{"--zkaddr", addr, "--data-dir", filepath.Join(o.workDir, "zetcd"),
		"--metrics-addr", maddr, "--pprof", "--log-level", "warn"}, extra...)
	s, err := start("zetcd", onCPUs(exec.Command(filepath.Join(o.bin, "zetcd"), args...), o.serverCPUs))
	if err != nil {
		return nil, err
	}
	s.endpoint, s.metrics = addr, "http://"+maddr+"/metrics"
	return s, nil
}

// zooCfg is the benchmark ZooKeeper's configuration: standalone, its transaction log fsynced
// like etcd's WAL, no connection limit.
const zooCfg = `tickTime=2000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
`

// startZKServer starts the target named name if it speaks the ZooKeeper protocol (zetcd or
// zookeeper); ok is false for any other (etcd).
func startZKServer(o *options, name string) (s *server, ok bool, err error) {
	switch name {
	case "zetcd":
		s, err = startZetcd(o)
	case "zookeeper":
		s, err = startZooKeeper(o)
	default:
		return nil, false, nil
	}
	return s, true, err
}

// onEachZKServer starts each target of o.targetsOn that speaks the ZooKeeper protocol, fresh
// and in turn (bare etcd is left out: the matrix has its closest requests), runs run against
// it, stops it, and returns the runs of all. step names the step in logs and errors.
func onEachZKServer(o *options, step string, run func(s *server) ([]result, error)) ([]result, error) {
	var all []result
	for _, name := range o.targetsOn {
		if name == "etcd" {
			continue
		}
		runs, err := onServer(o, step, name, run)
		if err != nil {
			return nil, err
		}
		all = append(all, runs...)
	}
	return all, nil
}

// onServer starts target name fresh, runs run against it, stops it, and returns the runs; an
// error of run comes with the server's output. step names the step in logs and errors.
func onServer(o *options, step, name string, run func(s *server) ([]result, error)) ([]result, error) {
	s, err := startTarget(o, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", step, name, err)
	}
	log.Printf("%s: %s started (pid %d, %s)", step, name, s.cmd.Process.Pid, s.endpoint)
	runs, err := run(s)
	s.stop()
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w\n%s", step, name, err, s.log.String())
	}
	return runs, nil
}

func startZooKeeper(o *options) (*server, error) {
	s, err := launchZooKeeper(o, "1g")
	if err != nil {
		return nil, err
	}
	return s, waitSession(s)
}

// launchZooKeeper starts ZooKeeper with a heap of at most heap (-Xmx) on o.workDir/zookeeper
// (an existing data directory there is reopened), and returns without waiting for it to serve.
func launchZooKeeper(o *options, heap string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	dir := filepath.Join(o.workDir, "zookeeper")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(zooCfg, filepath.Join(dir, "data"), port)), 0o644); err != nil {
		return nil, err
	}
	lib, err := filepath.Abs(o.zkLib)
	if err != nil {
		return nil, err
	}
	if jars, _ := filepath.Glob(filepath.Join(lib, "zookeeper-*.jar")); len(jars) == 0 {
		return nil, fmt.Errorf("no ZooKeeper jars in %s: run `make zookeeper`", lib)
	}
	// The conf directory beside lib holds logback.xml (warnings only), written by fetch.sh.
	classpath := filepath.Join(lib, "*") + ":" + filepath.Join(filepath.Dir(lib), "conf")
	cmd := exec.Command(java, "-Xmx"+heap, "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.Dir = dir
	s, err := start("zookeeper", onCPUs(cmd, o.serverCPUs))
	if err != nil {
		return nil, err
	}
	s.endpoint = fmt.Sprintf("127.0.0.1:%d", port)
	return s, nil
}

// waitSession waits until the server at s.endpoint grants a ZooKeeper session.
func waitSession(s *server) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited: %s", s.name, s.log.String())
		default:
		}
		c, events, err := zk.Connect([]string{s.endpoint}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
		if err == nil {
			err = zksession.Await(context.Background(), events, 2*time.Second)
			c.Close()
			if err == nil {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.stop()
	return fmt.Errorf("%s: no session at %s after 60s: %s", s.name, s.endpoint, s.log.String())
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// scrape reads the counters of a Prometheus text exposition, keyed by name and labels as written
// ("zetcd_requests_total{op=\"create\",code=\"OK\"}"). An empty url scrapes nothing.
func scrape(url string) (map[string]float64, error) {
	if url == "" {
		return nil, nil
	}
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// roundTrips is the etcd calls per ZooKeeper request between two scrapes of zetcd's metrics,
// pings left out (they never reach etcd). 0 when there is nothing to divide.
func roundTrips(before, after map[string]float64) float64 {
	var trips, requests float64
	for k, v := range after {
		d := v - before[k]
		switch {
		case strings.HasPrefix(k, "zetcd_etcd_round_trips_total{"):
			trips += d
		case strings.HasPrefix(k, "zetcd_requests_total{") && !strings.Contains(k, `op="ping"`):
			requests += d
		}
	}
	if requests == 0 {
		return 0
	}
	return trips / requests
}

// writesPerBatch is the mean size of zetcd's write batches (zetcd_write_batch_size) between two
// scrapes of its metrics; 0 when it committed none.
func writesPerBatch(before, after map[string]float64) float64 {
	return histogramMean(before, after, "zetcd_write_batch_size")
}

// histogramMean is the mean of the samples a histogram took between two scrapes; 0 if none.
func histogramMean(before, after map[string]float64, name string) float64 {
	n := after[name+"_count"] - before[name+"_count"]
	if n == 0 {
		return 0
	}
	return (after[name+"_sum"] - before[name+"_sum"]) / n
}

// readMemory reads a process's peak and current resident set from /proc.
func readMemory(pid int) memory {
	var m memory
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			m.PeakRSSKB = v
		case "VmRSS:":
			m.EndRSSKB = v
		}
	}
	return m
}

// machine describes this machine and the toolchains.
func machine() map[string]string {
	m := map[string]string{"cpus (nproc)": strconv.Itoa(runtime.NumCPU()), "os/arch": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m["memory"] = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	m["load average at the start (1, 5, 15 min)"] = loadAverage()
	m["go"] = runtime.Version()
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m["java"] = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	if jars, _ := filepath.Glob(".cache/zookeeper/lib/zookeeper-[0-9]*.jar"); len(jars) > 0 {
		m["zookeeper"] = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "zookeeper-"), ".jar")
	}
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3").Output(); err == nil {
		m["etcd"] = strings.TrimSpace(string(out))
	}
	return m
}

// plot runs plot.py; it reports whether the PNG was written.
func plot(o *options) bool {
	if _, err := os.Stat(o.python); err != nil {
		log.Printf("no %s (python with matplotlib): the report goes without the plot", o.python)
		return false
	}
	script := filepath.Join(filepath.Dir(os.Args[0]), "plot.py")
	if _, err := os.Stat(script); err != nil {
		script = "tools/bench/plot.py"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, o.python, script, o.data, o.png).CombinedOutput()
	if err != nil {
		log.Printf("plot: %v: %s", err, out)
		return false
	}
	return true
}

// stepStart is when a step began and the machine's load then; every step after the matrix
// records it and its section of the report opens with it (measured).
type stepStart struct {
	Started time.Time `json:"started"`
	LoadAvg string    `json:"loadAverage"` // the machine's, at the start
}

func newStepStart() stepStart { return stepStart{Started: time.Now().UTC(), LoadAvg: loadAverage()} }

// measured opens a step's section: "Measured <time> (load average <l> at the start", for the
// caller to go on inside the parenthesis or close it.
func (s stepStart) measured() string {
	return fmt.Sprintf("Measured %s (load average %s at the start", s.Started.Format("2006-01-02 15:04 MST"), orDash(s.LoadAvg))
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes, from /proc/loadavg: the
// machine may be shared, and the other load is part of what a run measured.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "—"
}

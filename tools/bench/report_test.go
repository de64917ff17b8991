package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDeleteTotal(t *testing.T) {
	results := []result{
		{Op: "create", Conns: 16, Report: zkboomReport{OpsPerSec: 3000}},
		{Op: "get", Conns: 64, Report: zkboomReport{OpsPerSec: 40000}},
		{Op: "create", Conns: 64, Report: zkboomReport{OpsPerSec: 10}},
	}
	for _, c := range []struct{ conns, want int }{
		{16, 18000}, // create's rate for the duration
		{64, 6400},  // at least 100 per connection
		{1, 500},    // no create run: 500 per connection
	} {
		if got := deleteTotal(results, c.conns, 6*time.Second); got != c.want {
			t.Errorf("deleteTotal(%d conns) = %d, want %d", c.conns, got, c.want)
		}
	}
}

// TestMarkdown renders a report from figures of every step and checks each step's section and
// the new rows are there.
func TestMarkdown(t *testing.T) {
	o := &options{ops: []string{"exists", "children", "delete"}, conns: []int{1, 64}, duration: 6 * time.Second,
		warmup: 3 * time.Second, valSize: 128, keys: 1000, targetsOn: []string{"etcd", "zetcd", "zookeeper"},
		mem:  memOptions{znodes: 100000, sessions: [2]int{1000, 10000}, watches: [2]int{100, 10}},
		work: workloadOptions{seqConns: 64, watchers: 16, watchRate: 500, watchDuration: 10 * time.Second, watchRounds: 2},
		sc:   scaleOptions{znodes: 1000000, dataSize: 128, batch: 250, loaders: 8, reps: 5}}
	rep := func(ops, p50, p99 float64) zkboomReport {
		r := zkboomReport{Requests: 100, OpsPerSec: ops}
		r.LatencyMs.P50, r.LatencyMs.P99 = p50, p99
		return r
	}
	d := &runData{Machine: map[string]string{"cpus (nproc)": "2"}}
	for _, target := range o.targetsOn {
		for _, op := range o.ops {
			for _, c := range o.conns {
				d.Results = append(d.Results, result{Target: target, Op: op, Conns: c, Report: rep(1000, 1, 2), EtcdRoundTripsPerRequest: 1})
			}
		}
	}
	d.EqualLoad = &equalLoadRuns{Conns: 64, Share: 0.8, Rates: map[string]float64{"get": 800, "set": 800}, Results: []result{
		{Target: "zetcd", Op: "get", Conns: 64, Report: rep(800, 0.1, 1.5)},
		{Target: "zookeeper", Op: "get", Conns: 64, Report: rep(800, 0.3, 3)},
		{Target: "zetcd", Op: "set", Conns: 64, Report: rep(790, 0.5, 6)},
	}}
	d.OwnCore = &ownCoreRuns{Conns: 64, ServerCPUs: "0", ZkboomCPUs: "1", Results: []result{
		{Target: "zetcd", Op: "get", Conns: 64, Report: rep(2000, 0.5, 1.5)},
		{Target: "zookeeper", Op: "get", Conns: 64, Report: rep(1000, 1, 6)},
		{Target: "zetcd", Op: "exists", Conns: 64, Report: rep(2000, 0.5, 1.5)},
	}}
	d.Workloads = &workloadRuns{Duration: "6s", WatchRate: 500, Results: []result{
		{Target: "zetcd", Op: "seq-create-persistent", Conns: 64, Report: rep(1000, 50, 90), EtcdRoundTripsPerRequest: 1.25},
		{Target: "zookeeper", Op: "seq-create-persistent", Conns: 64, Report: rep(9000, 5, 20)},
		{Target: "etcd", Op: "watch", Conns: 16, Report: rep(500, 0.8, 7), Round: 1},
		{Target: "zetcd", Op: "watch", Conns: 16, Report: rep(500, 1.2, 3.5), EtcdCommitMs: 0.9, Round: 1},
		{Target: "zookeeper", Op: "watch", Conns: 16, Report: rep(500, 0.6, 3.5), Round: 1},
		{Target: "etcd", Op: "watch", Conns: 16, Report: rep(500, 1.0, 5), Round: 2},
		{Target: "zetcd", Op: "watch", Conns: 16, Report: rep(500, 0.9, 7), EtcdCommitMs: 0.7, Round: 2},
		{Target: "zookeeper", Op: "watch", Conns: 16, Report: rep(500, 1.0, 7), Round: 2},
	}}
	d.Scale = &scaleRuns{Znodes: 1000000, DataSize: 128, Batch: 250, Loaders: 8, Reps: 3, Heap: scaleHeap, Runs: []scaleRun{
		{Target: "zetcd", LoadSeconds: 100, FourLetter: []fourLetterTiming{{Word: "mntr", MedianMs: 200, Ms: []float64{210, 200, 190}, Bytes: 800}},
			RestartSeconds: 30, RestartRSSKB: 2 << 20},
		{Target: "zookeeper", LoadSeconds: 20, RestartError: "zookeeper exited: OutOfMemoryError", FourLetter: []fourLetterTiming{{Word: "mntr", MedianMs: 20, Ms: []float64{21, 20, 19}, Bytes: 17000}},
			RestartSeconds: 10, RestartRSSKB: 1 << 20},
	}}
	md := markdown(o, d, true)
	for _, want := range []string{
		"| exists | 64 | 1000 | 1000 | 1000 | 1.00 | 1.00 |",
		"| children | 1 |",
		"| delete | 1.00 | 1.00 |", // round trips
		"exists = a linearizable get with `WithCountOnly`",
		"## Sequential creates in one parent",
		"| PERSISTENT_SEQUENTIAL | 1000 | 9000 | 0.11 | 50.00 | 5.00 | 90.00 | 20.00 | 1.25 |",
		"| EPHEMERAL_SEQUENTIAL | — | — | — |",
		"## Latency at equal load",
		"| get | 800 | 800 | 800 | 0.10 | 0.30 | 1.50 | 3.00 | 0.50 |",
		"## Reads with the load generator on a core of its own",
		"(`taskset -c 0`) and warmed up as in the matrix, zkboom on CPUs 1",
		"| get | 2000 | 1000 | 2.00 | 0.50 | 1.00 | 1.50 | 6.00 | 0.25 |",
		"## Watch event latency",
		"2 rounds; in each, every server is started fresh",
		"| 1 | etcd | 100 | 500 | 0.80 | 0.00 | 7.00 | 0.00 | 0.00 |",
		"| 2 | zetcd | 100 | 500 | 0.90 | 0.00 | 7.00 | 0.00 | 0.00 |",
		"| 1 | 2.00 | 1.00 | 1.50 | 1.33 |",
		"| 2 | 0.90 | 1.00 | 0.90 | 1.00 |",
		"| median | **1.45** | **1.00** | **1.20** | **1.17** |",
		"zetcd's etcd transactions (one per setData here) took 0.80 ms on average during its runs",
		"## A tree of 1,000,000 znodes",
		"| load (znodes/s) | 10000 | 50000 | 0.20 |",
		"| `mntr`, median of 3 (ms) | 200.00 | 20.00 | 10.00 |",
		"| `dump`, median of 3 (ms) | — | — | — |",
		"| restart: until a session reads a znode (s) | 30.0 | — | — |",
		"**ZooKeeper did not restart on the tree**: after 10.0 s, zookeeper exited: OutOfMemoryError",
		"| zetcd | mntr | 210.00, 200.00, 190.00 | 800 |",
		"make bench-scale",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "| exists | 2000 |") {
		t.Error("the own-core table has a row for exists, which ZooKeeper did not run")
	}
	if t.Failed() {
		t.Log(md)
	}
}

// TestOnCPUs: a command pinned by taskset keeps its program, arguments, directory and
// environment; no CPUs leaves it as it is.
func TestOnCPUs(t *testing.T) {
	cmd := exec.Command("/bin/zetcd", "--zkaddr", "127.0.0.1:2181")
	cmd.Dir, cmd.Env = "/tmp", []string{"GOMAXPROCS=1"}
	if got := onCPUs(cmd, ""); got != cmd {
		t.Errorf("onCPUs(cmd, \"\") = %v, want cmd itself", got.Args)
	}
	got := onCPUs(cmd, "0")
	if want := []string{"taskset", "-c", "0", "/bin/zetcd", "--zkaddr", "127.0.0.1:2181"}; !slices.Equal(got.Args, want) {
		t.Errorf("args %q, want %q", got.Args, want)
	}
	if got.Dir != "/tmp" || !slices.Equal(got.Env, cmd.Env) {
		t.Errorf("dir %q env %q, want /tmp and %q", got.Dir, got.Env, cmd.Env)
	}
}

func TestLastError(t *testing.T) {
	zetcdLog := `{"level":"warn","msg":"apply request took too long"}
{"level":"error","ts":1,"caller":"zetcd/main.go:174","msg":"zetcd stopped","error":"load the tree at revision 5022: context deadline exceeded"}
`
	if got, want := lastError(zetcdLog), "zetcd stopped: load the tree at revision 5022: context deadline exceeded"; got != want {
		t.Errorf("lastError(zetcd's log) = %q, want %q", got, want)
	}
	if got, want := lastError("starting\njava.lang.OutOfMemoryError: Java heap space\n"), "java.lang.OutOfMemoryError: Java heap space"; got != want {
		t.Errorf("lastError(ZooKeeper's log) = %q, want %q", got, want)
	}
}

// TestEqualRate: the equal-load step offers a share of the lower of zetcd's and ZooKeeper's
// matrix throughputs at its connections, and nothing for an op the matrix lacks for either.
func TestEqualRate(t *testing.T) {
	matrix := []result{
		{Target: "etcd", Op: "get", Conns: 64, Report: zkboomReport{OpsPerSec: 100}},
		{Target: "zetcd", Op: "get", Conns: 64, Report: zkboomReport{OpsPerSec: 80000}},
		{Target: "zookeeper", Op: "get", Conns: 64, Report: zkboomReport{OpsPerSec: 50000}},
		{Target: "zookeeper", Op: "get", Conns: 16, Report: zkboomReport{OpsPerSec: 10}},
		{Target: "zetcd", Op: "set", Conns: 64, Report: zkboomReport{OpsPerSec: 20000}},
	}
	if got := equalRate(matrix, "get", 64, 0.8); got != 40000 {
		t.Errorf("get: %v, want 40000", got)
	}
	if got := equalRate(matrix, "set", 64, 0.8); got != 0 {
		t.Errorf("set, which ZooKeeper did not run: %v, want 0", got)
	}
}

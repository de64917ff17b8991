package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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

// testRunData is figures of every step, as a run saves them.
func testRunData(o *options) *runData {
	rep := func(ops, p50, p99 float64) zkboomReport {
		r := zkboomReport{Requests: 100, OpsPerSec: ops}
		r.LatencyMs.P50, r.LatencyMs.P99 = p50, p99
		return r
	}
	d := &runData{Machine: map[string]string{"cpus (nproc)": "2", "zookeeper": "3.9.6"},
		Settings: map[string]string{"duration per run": "6s", "warm-up per server": "3s", "value size": "128 bytes",
			"nodes get/set pick from": "1000", "clients per connection": "1"}}
	for _, target := range o.targetsOn {
		for _, op := range o.ops {
			for _, c := range o.conns {
				r := result{Target: target, Op: op, Conns: c, Report: rep(1000, 1, 2), EtcdRoundTripsPerRequest: 1}
				if target == "zetcd" && op == "exists" {
					r.Report.OpsPerSec, r.EtcdRoundTripsPerRequest = 2000+float64(c), 0.01*float64(c)
				}
				if target == "zetcd" && op == "delete" {
					r.WritesPerBatch = float64(c) / 4
				}
				d.Results = append(d.Results, r)
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
	step := func(name string, znodes, sessions, watches int, rssKB, heapKB int64) memStep {
		return memStep{Name: name, Znodes: znodes, Sessions: sessions, Watches: watches, RSSKB: rssKB, HeapKB: heapKB}
	}
	d.MemoryScaling = &memScaling{Znodes: 1000, DataSize: 128, Sessions: [2]int{10, 100}, Watches: [2]int{10, 2}, Runs: []memRun{
		{Target: "zetcd", Steps: []memStep{step("started", 0, 0, 0, 1000, 100), step("znodes", 1000, 0, 0, 3000, 1100),
			step("sessions", 1000, 10, 0, 3100, 1150), step("watches", 1000, 10, 100, 3110, 1160), step("scale", 1000, 100, 280, 3200, 1200)}},
		{Target: "zookeeper", Steps: []memStep{step("started", 0, 0, 0, 2000, 50), step("znodes", 1000, 0, 0, 3000, 550),
			step("sessions", 1000, 10, 0, 3050, 600), step("watches", 1000, 10, 100, 3080, 620), step("scale", 1000, 100, 280, 3170, 700)}},
	}}
	return d
}

// testOptions are the options a report of testRunData is written with; the figures' settings
// differ from them where the report must take the figures' own.
func testOptions() *options {
	return &options{ops: []string{"get"}, conns: []int{16}, duration: time.Minute, warmup: time.Minute, valSize: 9, keys: 9,
		targetsOn: []string{"etcd", "zetcd", "zookeeper"}, png: "docs/benchmarks.png",
		mem:  memOptions{znodes: 100000, sessions: [2]int{1000, 10000}, watches: [2]int{100, 10}},
		work: workloadOptions{seqConns: 64, watchers: 16, watchRate: 500, watchDuration: 10 * time.Second, watchRounds: 2},
		sc:   scaleOptions{znodes: 1000000, dataSize: 128, batch: 250, loaders: 8, reps: 5}}
}

// TestMarkdown renders a report from figures of every step and checks each section: the
// matrix's shape and settings come from the figures, every step's table is there, and the
// findings quote the run's figures.
func TestMarkdown(t *testing.T) {
	o := &options{ops: []string{"exists", "children", "delete"}, conns: []int{1, 64}, targetsOn: []string{"etcd", "zetcd", "zookeeper"}}
	d := testRunData(o)
	md := markdown(testOptions(), d, true)
	for _, want := range []string{
		"## Machine", "| zookeeper | 3.9.6 |",
		"## Method",
		"**ZooKeeper**: 3.9.6 standalone",
		"Each matrix cell is `zkboom --conns N --duration 6s OP`", // the figures' setting, not the options'
		"get, exists and set pick among 1000 existing nodes",
		"values are 128 bytes",
		"a server gets 3s of unmeasured mixed load",
		"(`taskset -c`)",
		"**Rounds.**",
		"**Busy share and CPU per request.**",
		"## Results",
		"| exists | 64 | 1000 | 2064 | 1000 | 2.06 | 2.06 |",
		"| children | 1 |",
		"| op | 1 conns | 64 conns |",
		"| delete | 1.00 | 1.00 |", // round trips
		"| delete | 0.2 | 16.0 |",  // writes per batch
		"exists = a linearizable get with `WithCountOnly`",
		"## Sequential creates in one parent",
		"| PERSISTENT_SEQUENTIAL | 1000 | 9000 | 0.11 | 50.00 | 5.00 | 90.00 | 20.00 | 1.25 |",
		"| EPHEMERAL_SEQUENTIAL | — | — | — |",
		"## Latency at equal load",
		"| get | 800 | 800 | 800 | 0.10 | 0.30 | 1.50 | 3.00 | 0.50 |",
		"## Reads with the load generator on a core of its own",
		"(`taskset -c 0`) and zkboom on CPUs 1",
		"| get | 2000 | 1000 | 2.00 | 0.50 | 1.00 | 1.50 | 6.00 | 0.25 |",
		"## Watch event latency",
		"2 rounds (Method)",
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
		"## Memory per znode, session and watch",
		"| per znode | 2048 B | 1024 B | 2.00 | 1024 B | 512 B |",
		"## Plot", "![throughput and p99 latency against connections](benchmarks.png)",
		"## Findings",
		"(**0.01-1.00** per read in the", // exists' and children's round trips
		"reads at **1.00-2.06×** ZooKeeper's throughput",
		"(**—** writes per\ntransaction at 64 connections", // delete's batches hold zkboom's creates: not quoted
		"(**0.80 ms** on average",
		"etcd/ZooKeeper p50 **1.17**", "comes at **1.20** of bare etcd's", "(zetcd/ZooKeeper **1.45**)",
		"zetcd then serves **2.00×** ZooKeeper's reads at **0.25×** its p99",
		"its read p99 is **0.50×** ZooKeeper's",
		"**2048 B** of RSS per znode against ZooKeeper's\n**1024 B** (**1024 B** live against **512 B**)",
		"a session takes **1024 B** of RSS (ZooKeeper **1024 B**)",
		"**102 B** live (ZooKeeper **205 B**)",
		"**30.0 s** on 1,000,000 znodes", "ZooKeeper's **— s**", // ZooKeeper did not restart
		"**200.00 ms** on that tree (ZooKeeper **20.00 ms**)",
		"**0.20×** ZooKeeper's rate",
		"## Reproducing", "make bench-scale", "go run ./tools/bench --report-only",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "| exists | 2000 |") {
		t.Error("the own-core table has a row for exists, which ZooKeeper did not run")
	}
	for _, unwanted := range []string{"| get | 16 |", "{{", "<!--", "kept by make bench"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("report has %q", unwanted)
		}
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

// TestWriteReportOnly: --report-only writes the report of the saved figures, whole, with the
// plot only if its file is there.
func TestWriteReportOnly(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.data, o.out, o.png = filepath.Join(dir, "b.json"), filepath.Join(dir, "b.md"), filepath.Join(dir, "b.png")
	d := testRunData(&options{ops: []string{"get", "set"}, conns: []int{1, 16}, targetsOn: o.targetsOn})
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.data, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.out, []byte("# an old report\n\nhand-written text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, plotted := range []bool{false, true} {
		if plotted {
			if err := os.WriteFile(o.png, []byte("png"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := writeReportOnly(o); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(o.out)
		if err != nil {
			t.Fatal(err)
		}
		if want := markdown(o, d, plotted); string(got) != want {
			t.Errorf("plot %v: the report differs from markdown's", plotted)
		}
		if strings.Contains(string(got), "hand-written") {
			t.Errorf("plot %v: the old report's text was kept", plotted)
		}
		if strings.Contains(string(got), "![") != plotted {
			t.Errorf("plot %v: the plot referenced: %v", plotted, !plotted)
		}
		if !strings.Contains(string(got), "| set | 16 | 1000 | 1000 | 1000 |") {
			t.Errorf("plot %v: no set row at 16 connections, from the figures", plotted)
		}
	}
	o.data = filepath.Join(dir, "missing.json")
	if err := writeReportOnly(o); err == nil {
		t.Error("no error without the figures")
	}
}

// TestFindingsWithoutSteps: figures of the matrix alone give the findings with a dash for every
// figure of the steps left out.
func TestFindingsWithoutSteps(t *testing.T) {
	d := testRunData(&options{ops: []string{"get", "create"}, conns: []int{1, 64}, targetsOn: []string{"zetcd", "zookeeper"}})
	d.EqualLoad, d.OwnCore, d.Workloads, d.Scale, d.MemoryScaling = nil, nil, nil, nil, nil
	d.Results[2].WritesPerBatch, d.Results[3].WritesPerBatch = 1, 21.4 // zetcd's create at 1 and 64 connections
	f := findings(d)
	for _, want := range []string{
		"(**1.00** per read in the\nmatrix", "(**21** writes per\ntransaction at 64 connections",
		"(**— ms** on average", "zetcd then serves **—×**", "**—** of RSS per znode" /* no memory step */, "**— s** on — znodes",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("findings lack %q", want)
		}
	}
	if strings.Contains(f, "<no value>") {
		t.Error("findings have a figure left out")
	}
	if t.Failed() {
		t.Log(f)
	}
}

func TestSpan(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want string
	}{{nil, "—"}, {[]float64{2}, "2.00"}, {[]float64{1.004, 0.996}, "1.00"}, {[]float64{3, 1.5, 2}, "1.50-3.00"}} {
		if got := span(c.xs, "%.2f"); got != c.want {
			t.Errorf("span(%v) = %q, want %q", c.xs, got, c.want)
		}
	}
}

// TestImportMarkdown: the import's figures beside ZooKeeper's restart, and a failed import said.
func TestImportMarkdown(t *testing.T) {
	k := &scaleRun{Target: "zookeeper", RestartSeconds: 10,
		Import: &importRun{Seconds: 5, PeakRSSKB: 1 << 20, Zxids: "renumber", StartSeconds: 4}}
	var b strings.Builder
	importMarkdown(&b, k, 1000000)
	for _, want := range []string{
		"### Importing ZooKeeper's data directory",
		"| ZooKeeper's restart on its directory | 10.0 | 1.00 |",
		"| `zetcd import` of that directory (zxids renumber, peak RSS 1024 MiB) | 5.0 | 0.50 |",
		"| zetcd's start on the import | 4.0 | 0.40 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	k.Import = &importRun{Seconds: 3, Error: "zetcd import: exit status 1: import failed"}
	b.Reset()
	importMarkdown(&b, k, 1000000)
	if want := "**The import did not complete**: after 3.0 s, zetcd import: exit status 1: import failed"; !strings.Contains(b.String(), want) {
		t.Errorf("no %q in\n%s", want, b.String())
	}
}

// testScaleLarge is a large-scale step's figures: both servers held the tree.
func testScaleLarge() *scaleRuns {
	return &scaleRuns{Znodes: 10000000, DataSize: 128, Batch: 250, Loaders: 8, Reps: 3, Heap: "14g", QuotaBytes: scaleQuota,
		GetSessions: 16, GetSeconds: 10, Runs: []scaleRun{
			{Target: "zetcd", LoadSeconds: 200, LoadedRSSKB: 12 << 20, Gets: &getRun{OpsPerSec: 30000, P99Ms: 3},
				FourLetter:     []fourLetterTiming{{Word: "dump", MedianMs: 1, Ms: []float64{1, 1, 1}}},
				RestartSeconds: 60, RestartRSSKB: 11 << 20, SettledRSSKB: 11 << 20, RestartPeakRSSKB: 12 << 20},
			{Target: "zookeeper", LoadSeconds: 100, LoadedRSSKB: 8 << 20, Gets: &getRun{OpsPerSec: 20000, P99Ms: 6},
				FourLetter:     []fourLetterTiming{{Word: "dump", MedianMs: 4, Ms: []float64{4, 4, 4}}},
				RestartSeconds: 40, RestartRSSKB: 6 << 20, SettledRSSKB: 6 << 20, RestartPeakRSSKB: 7 << 20,
				Import: &importRun{Seconds: 50, PeakRSSKB: 9 << 20, Zxids: "renumber", StartSeconds: 70}},
		}}
}

// TestScaleLargeMarkdown: the large-scale step's table beside the scale step's, rendered by the
// same code from its own figures, and absent without them.
func TestScaleLargeMarkdown(t *testing.T) {
	o := testOptions()
	d := testRunData(&options{ops: []string{"get"}, conns: []int{16}, targetsOn: o.targetsOn})
	if md := markdown(o, d, false); strings.Contains(md, "10,000,000") || strings.Contains(md, "the large-scale step)") {
		t.Errorf("a report without the large-scale step has its section:\n%s", md)
	}
	d.ScaleLarge = testScaleLarge()
	md := markdown(o, d, false)
	million := strings.Index(md, "## A tree of 1,000,000 znodes")
	large := strings.Index(md, "## A tree of 10,000,000 znodes: load, gets, four-letter words and restart")
	if million < 0 || large < million {
		t.Fatalf("the sections of a million (at %d) and ten million znodes (at %d) are not in that order:\n%s", million, large, md)
	}
	section := md[large:]
	section = section[:strings.Index(section, "## Memory per znode")]
	for _, want := range []string{
		"the large-scale step). zetcd (`--quota-backend-bytes 8 GiB", "(`-Xmx14g`)",
		"Then 16 sessions read random znodes of the tree for 10s",
		"| load (znodes/s) | 50000 | 100000 | 0.50 |",
		"| RSS after the load (MiB) | 12288 | 8192 | 1.50 |",
		"| gets (ops/s) | 30000 | 20000 | 1.50 |",
		"| gets: p99 (ms) | 3.00 | 6.00 | 0.50 |",
		"| `dump`, median of 3 (ms) | 1.00 | 4.00 | 0.25 |",
		"| restart: until a session reads a znode (s) | 60.0 | 40.0 | 1.50 |",
		"| restart: RSS then (MiB) | 11264 | 6144 | 1.83 |",
		"of the 10,000,000 znodes) imported by `zetcd import",
		"| zetcd's start on the import | 70.0 | 1.75 |",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the large-scale section lacks %q", want)
		}
	}
	if strings.Contains(section, "znodes held") {
		t.Error("a znodes held row though both servers held the tree")
	}
	if !strings.Contains(md, "go run ./tools/bench --bin bin --only scale-large") {
		t.Error("Reproducing does not say how to run the large-scale step alone")
	}
	if t.Failed() {
		t.Log(section)
	}
}

// TestScaleMarkdownShort: a server that could not hold the tree, one not started for lack of
// memory, and one that died after its load are each said, with how far they got, and none of
// their missing figures is rendered as a zero.
func TestScaleMarkdownShort(t *testing.T) {
	sr := testScaleLarge()
	z, k := &sr.Runs[0], &sr.Runs[1]
	*z = scaleRun{Target: "zetcd", LoadSeconds: 160, LoadedRSSKB: 10 << 20, HeldZnodes: 8000000,
		LoadError: "zetcd's data limit (--data-limit-bytes, 6.0 GiB of etcd's 8 GiB quota): 6.0 GiB of etcd's database in use, file 6.2 GiB"}
	*k = scaleRun{Target: "zookeeper", Skipped: "the machine has 9.0 GiB of memory available, and needs 16.0 GiB"}
	var b strings.Builder
	scaleMarkdown(&b, sr, "the large-scale step")
	md := b.String()
	for _, want := range []string{
		"| znodes held | 8,000,000 (load stopped) | — (not started: memory) | — |",
		"| load (znodes/s) | 50000 | — | — |",
		"| RSS after the load (MiB) | 10240 | — | — |",
		"| gets (ops/s) | — | — | — |",
		"| restart: until a session reads a znode (s) | — | — | — |",
		"| restart: RSS then (MiB) | — | — | — |",
		"**zetcd holds at most 8,000,000 znodes here**: its load stopped after 160.0 s, zetcd's data limit (--data-limit-bytes, 6.0 GiB",
		"**ZooKeeper was not started**: the machine has 9.0 GiB of memory available, and needs 16.0 GiB.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
	if strings.Contains(md, "Importing") {
		t.Error("an import section for a ZooKeeper not run")
	}

	sr = testScaleLarge()
	k = &sr.Runs[1]
	k.Gets, k.FourLetter, k.RestartSeconds, k.RestartRSSKB, k.Import = nil, nil, 0, 0, nil
	k.Failed = "zookeeper exited: java.lang.OutOfMemoryError: Java heap space"
	b.Reset()
	scaleMarkdown(&b, sr, "the large-scale step")
	md = b.String()
	for _, want := range []string{
		"| RSS after the load (MiB) | 12288 | 8192 | 1.50 |",
		"| gets (ops/s) | 30000 | — | — |",
		"| restart: until a session reads a znode (s) | 60.0 | — | — |",
		"**ZooKeeper stopped serving on the tree**: zookeeper exited: java.lang.OutOfMemoryError: Java heap space.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
	if strings.Contains(md, "znodes held") {
		t.Error("a znodes held row though both servers loaded the tree")
	}

	// The findings quote no restart or load ratio of a server that did not hold the tree.
	f := findingsData{}
	sr = testScaleLarge()
	sr.Runs[0] = scaleRun{Target: "zetcd", LoadSeconds: 160, HeldZnodes: 8000000, LoadError: "etcd's quota"}
	scaleFindings(&f, sr)
	if f.RestartZetcd != "—" || f.LoadVsZK != "—" || f.RestartZK != "40.0" {
		t.Errorf("findings of a zetcd that held part of the tree: restart %q (ZooKeeper %q), load %q; want —, 40.0, —",
			f.RestartZetcd, f.RestartZK, f.LoadVsZK)
	}
}

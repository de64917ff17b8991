package main

// The scale steps: a tree of a million znodes (the scale step) or ten million (the large-scale
// step), in zetcd and in ZooKeeper, each started fresh once the machine has the memory it needs
// (scaleguard.go).
//
//	load      scaleOptions.znodes znodes of dataSize bytes under /scale/n/<parent>/<child>
//	          (memFanout children per parent), by loaders sessions in parallel, each sending
//	          multis of batch creates (one parent's children), one at a time; a load that stops
//	          short (etcd's quota, the server's death, the machine's memory) is the result
//	4lw       mntr, dump and wchs, each reps times over a new connection to the client port:
//	          from connecting to the end of the answer; the median is reported
//	gets      getSessions sessions each reading random znodes of the tree, one getData at a
//	          time, for getDuration: throughput and latency (scalegets.go)
//	restart   the server is stopped (SIGTERM) and started again on the same data directory:
//	          the time from starting the process until a new session reads a znode (zetcd
//	          first loads its in-memory replica of the tree from etcd; ZooKeeper its snapshot
//	          and transaction log), the RSS then and a few seconds later, and the peak
//	import    ZooKeeper only: once it is stopped again, `zetcd import` of its data directory into
//	          a new embedded etcd (its time and peak RSS), then zetcd started on the import until
//	          a new session reads the last znode
//
// zetcd runs with --quota-backend-bytes scaleOptions.quota (scaleQuota unless asked: a million
// znodes and their history need more than etcd's default 2 GiB quota) and every four-letter word
// allowed; ZooKeeper with a heap of scaleOptions.heap.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// scaleOptions configure a scale step.
type scaleOptions struct {
	step        string // "scale" or "scale-large", in logs
	znodes      int
	dataSize    int
	batch       int    // creates per multi
	loaders     int    // sessions loading at once
	reps        int    // times each four-letter word is asked
	heap        string // ZooKeeper's -Xmx
	quota       int64  // zetcd's --quota-backend-bytes
	getSessions int
	getDuration time.Duration
}

// largeScaleOptions are the large-scale step's: the scale step's sc with znodes, ZooKeeper's
// heap and zetcd's quota of their own.
func largeScaleOptions(sc scaleOptions, znodes int, heap string, quota int64) scaleOptions {
	sc.step, sc.znodes, sc.heap, sc.quota = "scale-large", znodes, heap, quota
	return sc
}

const (
	scaleQuota = 8 << 30 // etcd's largest
	scaleHeap  = "2g"    // the scale step's ZooKeeper heap
	// scaleSettle is how long after the restarted server first serves its RSS is read again.
	scaleSettle = 5 * time.Second
)

// fourLetterWords are the words the scale step times.
var fourLetterWords = []string{"mntr", "dump", "wchs"}

// fourLetterTiming is one word's answers on the loaded tree.
type fourLetterTiming struct {
	Word     string    `json:"word"`
	MedianMs float64   `json:"medianMs"`
	Ms       []float64 `json:"ms"`    // every repetition, in order
	Bytes    int       `json:"bytes"` // of the last answer
}

// scaleRun is a scale step of one server.
type scaleRun struct {
	Target string `json:"target"`
	// Skipped, if set, is why the server was not started: the machine lacked the memory it
	// needs (scaleguard.go). Nothing else is then set.
	Skipped     string  `json:"skipped,omitempty"`
	LoadSeconds float64 `json:"loadSeconds"`
	LoadedRSSKB int64   `json:"loadedRssKB"` // RSS after the load, before the restart
	// LoadError, if set, is why the load stopped short, HeldZnodes the znodes created by then
	// (the tree's, its parents left out): the server holds at most that many here. Nothing
	// after the load is then measured.
	LoadError  string `json:"loadError,omitempty"`
	HeldZnodes int    `json:"heldZnodes,omitempty"`
	// Failed, if set, is why the server stopped serving after the load (it died, or the
	// memory guard killed it); the figures measured until then stand, nothing after.
	Failed     string             `json:"failed,omitempty"`
	FourLetter []fourLetterTiming `json:"fourLetter"`
	// Gets is the get run on the loaded tree.
	Gets *getRun `json:"gets,omitempty"`
	// RestartSeconds is from starting the process until a new session's getData of a znode
	// succeeded.
	RestartSeconds float64 `json:"restartSeconds"`
	// RestartError, if set, is why the restarted server never served the read (RestartSeconds
	// is then how long it took to fail).
	RestartError string `json:"restartError,omitempty"`
	// RestartRSSKB is the RSS when it first served, SettledRSSKB scaleSettle later, and
	// RestartPeakRSSKB the peak (VmHWM) by then.
	RestartRSSKB     int64 `json:"restartRssKB"`
	SettledRSSKB     int64 `json:"settledRssKB"`
	RestartPeakRSSKB int64 `json:"restartPeakRssKB"`
	// Import is the import of ZooKeeper's data directory (ZooKeeper's run only).
	Import *importRun `json:"import,omitempty"`
}

// loadedWhole reports whether r is a run that loaded the whole tree.
func (r *scaleRun) loadedWhole() bool { return r != nil && r.Skipped == "" && r.LoadError == "" }

// importRun is `zetcd import` of the loaded ZooKeeper's data directory.
type importRun struct {
	Seconds   float64 `json:"seconds"`   // from starting `zetcd import` until it exited
	PeakRSSKB int64   `json:"peakRssKB"` // the import process's peak RSS
	Zxids     string  `json:"zxids"`     // "exact" or "renumber", as the import reports
	// StartSeconds is from starting zetcd on the import until a new session's getData of the
	// last znode succeeded.
	StartSeconds float64 `json:"startSeconds"`
	Error        string  `json:"error,omitempty"` // why the import or the start failed
}

// scaleRuns is the scale step of both servers.
// zetcdAndZooKeeper returns the runs of zetcd and of ZooKeeper; nil for one not run.
func (sr *scaleRuns) zetcdAndZooKeeper() (z, k *scaleRun) {
	for i := range sr.Runs {
		switch sr.Runs[i].Target {
		case "zetcd":
			z = &sr.Runs[i]
		case "zookeeper":
			k = &sr.Runs[i]
		}
	}
	return z, k
}

type scaleRuns struct {
	stepStart
	Znodes   int    `json:"znodes"`
	DataSize int    `json:"dataSize"`
	Batch    int    `json:"batch"`
	Loaders  int    `json:"loaders"`
	Reps     int    `json:"reps"`
	Heap     string `json:"zookeeperHeap"`
	// QuotaBytes is zetcd's --quota-backend-bytes.
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
	// GetSessions and GetSeconds are the get run's sessions and length.
	GetSessions int        `json:"getSessions,omitempty"`
	GetSeconds  float64    `json:"getSeconds,omitempty"`
	Runs        []scaleRun `json:"runs"`
}

// runScale runs a scale step of sc against zetcd and ZooKeeper (of --targets), each on data
// directories of its own, removed afterwards (a million znodes take gigabytes).
func runScale(shared *options, sc scaleOptions) (*scaleRuns, error) {
	o := *shared
	sr := &scaleRuns{stepStart: newStepStart(), Znodes: sc.znodes, DataSize: sc.dataSize, Batch: sc.batch,
		Loaders: sc.loaders, Reps: sc.reps, Heap: sc.heap, QuotaBytes: sc.quota,
		GetSessions: sc.getSessions, GetSeconds: sc.getDuration.Seconds()}
	for _, name := range o.targetsOn {
		if name != "zetcd" && name != "zookeeper" {
			continue // a bare etcd has no tree
		}
		o.workDir = filepath.Join(shared.workDir, sc.step+"-"+name)
		if err := os.MkdirAll(o.workDir, 0o755); err != nil {
			return nil, err
		}
		run, err := measureScale(&o, sc, name)
		os.RemoveAll(o.workDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", sc.step, name, err)
		}
		sr.Runs = append(sr.Runs, *run)
	}
	return sr, nil
}

// launchScale starts name for a scale step of sc, under the memory guard (scaleguard.go),
// without waiting for it to serve.
func launchScale(o *options, sc scaleOptions, name string) (*server, error) {
	var s *server
	var err error
	if name == "zetcd" {
		s, err = launchZetcd(o, "--quota-backend-bytes", strconv.FormatInt(sc.quota, 10), "--4lw-whitelist", "*")
	} else {
		s, err = launchZooKeeper(o, sc.heap)
	}
	if err != nil {
		return nil, err
	}
	go guardMemory(s, scaleMemFloor)
	return s, nil
}

func measureScale(o *options, sc scaleOptions, name string) (*scaleRun, error) {
	run := &scaleRun{Target: name}
	if why := lackOfMemory(sc, name); why != "" {
		run.Skipped = why
		log.Printf("%s: %s not started: %s", sc.step, name, why)
		return run, nil
	}
	s, err := launchScale(o, sc, name)
	if err == nil {
		err = waitSession(s)
	}
	if err != nil {
		return nil, err
	}
	defer func() { s.stop() }()
	// fail ends the step on err, unless the server has died: that is a result, with the
	// figures measured until then.
	fail := func(err error) (*scaleRun, error) {
		select {
		case <-s.exited:
			run.Failed = exitReason(s)
			log.Printf("%s: %-9s stopped serving on the tree: %s", sc.step, name, run.Failed)
			return run, nil
		case <-time.After(2 * time.Second):
		}
		return nil, fmt.Errorf("%w\n%s", err, s.log.String())
	}
	log.Printf("%s: %s started (pid %d, %s)", sc.step, name, s.cmd.Process.Pid, s.endpoint)

	loadScale(s, sc, run)
	if run.LoadError != "" {
		return run, nil
	}

	// The last znode created is read by a session first: after that the tree is complete
	// wherever the four-letter words read it.
	c, err := dialSession(s.endpoint)
	if err != nil {
		return fail(err)
	}
	err = c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: scaleNode(sc.znodes - 1)})
	c.close()
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", scaleNode(sc.znodes-1), err))
	}
	for _, word := range fourLetterWords {
		ft := fourLetterTiming{Word: word}
		for range sc.reps {
			d, n, err := fourLetter(s.endpoint, word)
			if err != nil {
				return fail(fmt.Errorf("%s: %w", word, err))
			}
			ft.Ms = append(ft.Ms, float64(d)/float64(time.Millisecond))
			ft.Bytes = n
		}
		ft.MedianMs = median(ft.Ms)
		run.FourLetter = append(run.FourLetter, ft)
		log.Printf("%s: %-9s %s: median %.2f ms of %d (%d bytes)", sc.step, name, word, ft.MedianMs, sc.reps, ft.Bytes)
	}
	if run.Gets, err = measureGets(s.endpoint, sc); err != nil {
		return fail(fmt.Errorf("gets: %w", err))
	}
	log.Printf("%s: %-9s gets: %.0f ops/s, p50 %.2f ms, p99 %.2f ms (%d sessions, %s)", sc.step, name,
		run.Gets.OpsPerSec, run.Gets.P50Ms, run.Gets.P99Ms, sc.getSessions, sc.getDuration)

	s.stop()
	t0 := time.Now()
	if s, err = launchScale(o, sc, name); err != nil {
		return nil, err
	}
	if err := waitRead(s, scaleNode(sc.znodes-1)); err != nil {
		// A server that cannot restart on the tree is a result, not the end of the step.
		run.RestartSeconds = time.Since(t0).Seconds()
		run.RestartError = err.Error()
		log.Printf("%s: %-9s restart failed after %.1fs: %s", sc.step, name, run.RestartSeconds, run.RestartError)
		return run, nil
	}
	run.RestartSeconds = time.Since(t0).Seconds()
	run.RestartRSSKB = readMemory(s.cmd.Process.Pid).EndRSSKB
	time.Sleep(scaleSettle)
	m := readMemory(s.cmd.Process.Pid)
	run.SettledRSSKB, run.RestartPeakRSSKB = m.EndRSSKB, m.PeakRSSKB
	log.Printf("%s: %-9s restarted: serving after %.1fs, RSS %s (%s %s later, peak %s)", sc.step, name, run.RestartSeconds,
		mib(run.RestartRSSKB), mib(run.SettledRSSKB), scaleSettle, mib(run.RestartPeakRSSKB))
	if name == "zookeeper" {
		s.stop()
		run.Import = measureImport(o, sc, filepath.Join(o.workDir, "zookeeper", "data"))
	}
	return run, nil
}

// loadScale loads sc's tree into s, logging its progress, and records in run how long it took
// and s's RSS then. A load that stops short is a result: run.LoadError says why and
// run.HeldZnodes how far it got.
func loadScale(s *server, sc scaleOptions, run *scaleRun) {
	var created atomic.Int64
	done := make(chan struct{})
	go logProgress(s, sc, &created, done)
	t0 := time.Now()
	err := loadTree(s.endpoint, sc, &created)
	close(done)
	run.LoadSeconds = time.Since(t0).Seconds()
	run.LoadedRSSKB = readMemory(s.cmd.Process.Pid).EndRSSKB
	if err != nil {
		run.HeldZnodes, run.LoadError = int(created.Load()), loadStopped(s, err)
		log.Printf("%s: %-9s holds at most %s znodes here: the load stopped after %.0fs: %s", sc.step, s.name,
			thousands(run.HeldZnodes), run.LoadSeconds, run.LoadError)
		return
	}
	log.Printf("%s: %-9s loaded %d znodes in %.0fs (%.0f/s), RSS %s", sc.step, s.name, sc.znodes, run.LoadSeconds,
		float64(sc.znodes)/run.LoadSeconds, mib(run.LoadedRSSKB))
}

// loadStopped says why the load of s stopped on err: the space zetcd and its etcd have
// (QuotaExceeded), the server's exit (the memory guard's or its own), or err itself.
func loadStopped(s *server, err error) string {
	if errors.Is(err, encoding.ErrQuotaExceeded) && s.metrics != "" {
		return spaceLimit(s.metrics)
	}
	// A server that dies closes the loaders' connections a moment before its exit is seen.
	select {
	case <-s.exited:
		return exitReason(s)
	case <-time.After(2 * time.Second):
	}
	return err.Error()
}

// exitReason is why s exited: the memory guard's reason if it killed s, else the last error s
// logged.
func exitReason(s *server) string {
	if why := s.lowMemory.Load(); why != nil {
		return *why
	}
	return fmt.Sprintf("%s exited: %s", s.name, lastError(s.log.String()))
}

// spaceLimit says which bound on etcd's space zetcd refused a write at (etcdstore/space.go): etcd's
// NOSPACE alarm, its database file near the quota, or zetcd's data limit, from zetcd's metrics
// at metricsURL.
func spaceLimit(metricsURL string) string {
	m, err := scrape(metricsURL)
	if err != nil {
		return fmt.Sprintf("QuotaExceeded (%v)", err)
	}
	size, inUse := m["zetcd_etcd_db_size_bytes"], m["zetcd_etcd_db_size_in_use_bytes"]
	quota, limit := m["zetcd_etcd_quota_bytes"], m["zetcd_data_limit_bytes"]
	switch {
	case m["zetcd_etcd_nospace_alarm"] == 1:
		return fmt.Sprintf("etcd's quota: its NOSPACE alarm is raised (database file %s, quota %s)", byteSize(size), byteSize(quota))
	case quota > 0 && size >= quota*7/8:
		return fmt.Sprintf("etcd's quota: its database file (%s) is within an eighth of the quota (%s)", byteSize(size), byteSize(quota))
	default:
		return fmt.Sprintf("zetcd's data limit (--data-limit-bytes, %s of etcd's %s quota): %s of etcd's database in use, file %s",
			byteSize(limit), byteSize(quota), byteSize(inUse), byteSize(size))
	}
}

// byteSize formats a size in bytes: in GiB from one GiB, else in MiB.
func byteSize(bytes float64) string {
	if bytes >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", bytes/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", bytes/(1<<20))
}

// measureImport imports the stopped ZooKeeper's data directory zkDir into a new embedded etcd
// in o.workDir/zetcd, under the memory guard, then starts zetcd on it. A failure is a result,
// not the end of the step.
func measureImport(o *options, sc scaleOptions, zkDir string) *importRun {
	r := &importRun{}
	log.Printf("%s: importing ZooKeeper's data directory into zetcd", sc.step)
	t0 := time.Now()
	imp, err := start("zetcd import", exec.Command(filepath.Join(o.bin, "zetcd"), "import", "--zk-data-dir", zkDir,
		"--data-dir", filepath.Join(o.workDir, "zetcd"), "--log-level", "info"))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	go guardMemory(imp, scaleMemFloor)
	<-imp.exited
	r.Seconds = time.Since(t0).Seconds()
	state := imp.cmd.ProcessState
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok {
		r.PeakRSSKB = ru.Maxrss
	}
	if !state.Success() {
		r.Error = fmt.Sprintf("%s (%s)", exitReason(imp), state)
		log.Printf("%s: import failed after %.1fs: %s", sc.step, r.Seconds, r.Error)
		return r
	}
	r.Zxids = importedZxids(imp.log.String())
	log.Printf("%s: imported in %.1fs (zxids %s, peak RSS %s)", sc.step, r.Seconds, r.Zxids, mib(r.PeakRSSKB))
	t0 = time.Now()
	s, err := launchScale(o, sc, "zetcd")
	if err == nil {
		err = waitRead(s, scaleNode(sc.znodes-1))
		s.stop()
	}
	r.StartSeconds = time.Since(t0).Seconds()
	if err != nil {
		r.Error = fmt.Sprintf("zetcd on the import: %v", err)
		log.Printf("%s: %s", sc.step, r.Error)
		return r
	}
	log.Printf("%s: zetcd on the import served after %.1fs", sc.step, r.StartSeconds)
	return r
}

// importedZxids is the zxids field of the "import finished" line of `zetcd import`'s log.
func importedZxids(logText string) string {
	for _, line := range strings.Split(logText, "\n") {
		var entry struct{ Msg, Zxids string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "import finished" {
			return entry.Zxids
		}
	}
	return ""
}

// scaleNode names the i-th znode of the tree: memFanout children per parent.
func scaleNode(i int) string {
	return fmt.Sprintf("%s/%04d", scaleParent(i/memFanout), i%memFanout)
}

func scaleParent(p int) string { return fmt.Sprintf("/scale/n/%04d", p) }

// loadTree creates the scale step's tree: the parents from one session, then the znodes from
// sc.loaders sessions, each creating whole parents' children in multis of sc.batch creates. It
// adds the znodes of each multi that succeeded to created; a loader stops at its first error.
func loadTree(addr string, sc scaleOptions, created *atomic.Int64) error {
	parents := (sc.znodes + memFanout - 1) / memFanout
	c, err := dialSession(addr)
	if err != nil {
		return err
	}
	for _, p := range []string{"/scale", "/scale/n"} {
		if err := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			c.close()
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	err = c.pipeline(0, parents, memPipeline, func(p int) (encoding.Op, encoding.Record) {
		return encoding.OpCreate, &encoding.CreateRequest{Path: scaleParent(p), ACL: openACL}
	})
	c.close()
	if err != nil {
		return err
	}
	data := make([]byte, sc.dataSize)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	// The loaders wait for replies longer than a session timeout: they ping too.
	loaders := &sessionPool{}
	defer loaders.closeAll()
	go loaders.pingLoop()
	return parallel(sc.loaders, parents, func(_ int, from, to int) error {
		c, err := dialSession(addr)
		if err != nil {
			return err
		}
		loaders.add(c)
		for p := from; p < to; p++ {
			end := min((p+1)*memFanout, sc.znodes)
			for i := p * memFanout; i < end; i += sc.batch {
				req := &encoding.MultiRequest{}
				for j := i; j < min(i+sc.batch, end); j++ {
					req.Ops = append(req.Ops, encoding.MultiOp{Op: encoding.OpCreate,
						Record: &encoding.CreateRequest{Path: scaleNode(j), Data: data, ACL: openACL}})
				}
				var resp encoding.MultiResponse
				if err := c.callInto(encoding.OpMulti, req, &resp); err != nil {
					return fmt.Errorf("multi of %s...: %w", scaleNode(i), err)
				}
				if err := multiError(&resp); err != nil {
					return fmt.Errorf("multi of %s...: %w", scaleNode(i), err)
				}
				created.Add(int64(len(req.Ops)))
			}
		}
		return nil
	})
}

// multiError is the error of a failed multi: the code of the op that failed, not the
// RuntimeInconsistency of the ops rolled back with it (`MultiOperationRecord` results); nil if
// every op succeeded.
func multiError(resp *encoding.MultiResponse) error {
	var first error
	for _, r := range resp.Results {
		if r.Op != encoding.OpError || r.Err == encoding.ErrOK {
			continue
		}
		if r.Err != encoding.ErrRuntimeInconsistency {
			return r.Err
		}
		if first == nil {
			first = r.Err
		}
	}
	return first
}

// fourLetter asks addr one four-letter word and reads the answer to its end (the server closes
// the connection): how long that took, and the answer's size.
func fourLetter(addr, word string) (time.Duration, int, error) {
	t0 := time.Now()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := io.WriteString(nc, word); err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, bufio.NewReader(nc))
	d := time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("empty answer (not allowed?)")
	}
	return d, int(n), nil
}

// waitRead waits until a new session on s reads path, or s exits, or 10 minutes pass.
func waitRead(s *server, path string) error {
	deadline := time.Now().Add(10 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return errors.New(exitReason(s))
		default:
		}
		c, err := dialSession(s.endpoint)
		if err == nil {
			err = c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: path})
			c.close()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no read of %s after 10 minutes: %v", path, last)
}

// lastError is the last error a server logged: the error field of zetcd's last JSON line at
// level error, or else the last line.
func lastError(logText string) string {
	lines := strings.Split(strings.TrimSpace(logText), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var entry struct{ Level, Msg, Error string }
		if json.Unmarshal([]byte(lines[i]), &entry) == nil && entry.Level == "error" {
			if entry.Error != "" {
				return entry.Msg + ": " + entry.Error
			}
			return entry.Msg
		}
	}
	return lines[len(lines)-1]
}

// scaleEstimate is how long a scale step of sc takes on a 2-core machine, roughly: zetcd loads
// about scaleZetcdRate znodes a second and ZooKeeper several times that; each restarts in about
// a tenth of its load.
func scaleEstimate(sc scaleOptions) time.Duration {
	load := time.Duration(sc.znodes) * time.Second / scaleZetcdRate
	imp := time.Duration(sc.znodes) * time.Second / scaleImportRate
	return load*3/2*11/10 + 2*(30*time.Second+time.Duration(3*sc.reps)*time.Second+sc.getDuration) + imp
}

const scaleZetcdRate = 10000

// scaleImportRate is about how many znodes a second `zetcd import` and zetcd's start on it take
// together on a 2-core machine.
const scaleImportRate = 40000

package main

// The scale step: a tree of a million znodes, in zetcd and in ZooKeeper, each started fresh.
//
//	load      scaleOptions.znodes znodes of dataSize bytes under /scale/n/<parent>/<child>
//	          (memFanout children per parent), by loaders sessions in parallel, each sending
//	          multis of batch creates (one parent's children), one at a time
//	4lw       mntr, dump and wchs, each reps times over a new connection to the client port:
//	          from connecting to the end of the answer; the median is reported
//	restart   the server is stopped (SIGTERM) and started again on the same data directory:
//	          the time from starting the process until a new session reads a znode (zetcd
//	          first loads its in-memory replica of the tree from etcd; ZooKeeper its snapshot
//	          and transaction log), the RSS then and a few seconds later, and the peak
//	import    ZooKeeper only: once it is stopped again, `zetcd import` of its data directory into
//	          a new embedded etcd (its time and peak RSS), then zetcd started on the import until
//	          a new session reads the last znode
//
// zetcd runs with --quota-backend-bytes scaleQuota (a million znodes and their history need more
// than etcd's default 2 GiB quota) and every four-letter word allowed; ZooKeeper with a heap of
// scaleHeap.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// scaleOptions configure the scale step.
type scaleOptions struct {
	znodes   int
	dataSize int
	batch    int // creates per multi
	loaders  int // sessions loading at once
	reps     int // times each four-letter word is asked
}

const (
	scaleQuota = 8 << 30 // etcd's largest
	scaleHeap  = "2g"
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

// scaleRun is the scale step of one server.
type scaleRun struct {
	Target      string             `json:"target"`
	LoadSeconds float64            `json:"loadSeconds"`
	LoadedRSSKB int64              `json:"loadedRssKB"` // RSS after the load, before the restart
	FourLetter  []fourLetterTiming `json:"fourLetter"`
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
	Znodes   int        `json:"znodes"`
	DataSize int        `json:"dataSize"`
	Batch    int        `json:"batch"`
	Loaders  int        `json:"loaders"`
	Reps     int        `json:"reps"`
	Heap     string     `json:"zookeeperHeap"`
	Runs     []scaleRun `json:"runs"`
}

// runScale runs the scale step against zetcd and ZooKeeper (of --targets), each on data
// directories of its own, removed afterwards (a million znodes take gigabytes).
func runScale(shared *options) (*scaleRuns, error) {
	o := *shared
	sc := o.sc
	sr := &scaleRuns{stepStart: newStepStart(), Znodes: sc.znodes, DataSize: sc.dataSize, Batch: sc.batch,
		Loaders: sc.loaders, Reps: sc.reps, Heap: scaleHeap}
	for _, name := range o.targetsOn {
		if name != "zetcd" && name != "zookeeper" {
			continue // a bare etcd has no tree
		}
		o.workDir = filepath.Join(shared.workDir, "scale-"+name)
		if err := os.MkdirAll(o.workDir, 0o755); err != nil {
			return nil, err
		}
		run, err := measureScale(&o, name)
		os.RemoveAll(o.workDir)
		if err != nil {
			return nil, fmt.Errorf("scale: %s: %w", name, err)
		}
		sr.Runs = append(sr.Runs, *run)
	}
	return sr, nil
}

// launchScale starts name for the scale step, without waiting for it to serve.
func launchScale(o *options, name string) (*server, error) {
	if name == "zetcd" {
		return launchZetcd(o, "--quota-backend-bytes", strconv.Itoa(scaleQuota), "--4lw-whitelist", "*")
	}
	return launchZooKeeper(o, scaleHeap)
}

func measureScale(o *options, name string) (*scaleRun, error) {
	sc := o.sc
	run := &scaleRun{Target: name}
	s, err := launchScale(o, name)
	if err == nil {
		err = waitSession(s)
	}
	if err != nil {
		return nil, err
	}
	defer func() { s.stop() }()
	fail := func(err error) (*scaleRun, error) { return nil, fmt.Errorf("%w\n%s", err, s.log.String()) }
	log.Printf("scale: %s started (pid %d, %s)", name, s.cmd.Process.Pid, s.endpoint)

	t0 := time.Now()
	if err := loadTree(s.endpoint, sc); err != nil {
		return fail(fmt.Errorf("load: %w", err))
	}
	run.LoadSeconds = time.Since(t0).Seconds()
	run.LoadedRSSKB = readMemory(s.cmd.Process.Pid).EndRSSKB
	log.Printf("scale: %-9s loaded %d znodes in %.0fs (%.0f/s), RSS %s", name, sc.znodes, run.LoadSeconds,
		float64(sc.znodes)/run.LoadSeconds, mib(run.LoadedRSSKB))

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
		log.Printf("scale: %-9s %s: median %.2f ms of %d (%d bytes)", name, word, ft.MedianMs, sc.reps, ft.Bytes)
	}

	s.stop()
	t0 = time.Now()
	if s, err = launchScale(o, name); err != nil {
		return nil, err
	}
	if err := waitRead(s, scaleNode(sc.znodes-1)); err != nil {
		// A server that cannot restart on the tree is a result, not the end of the step.
		run.RestartSeconds = time.Since(t0).Seconds()
		run.RestartError = err.Error()
		log.Printf("scale: %-9s restart failed after %.1fs: %s", name, run.RestartSeconds, run.RestartError)
		return run, nil
	}
	run.RestartSeconds = time.Since(t0).Seconds()
	run.RestartRSSKB = readMemory(s.cmd.Process.Pid).EndRSSKB
	time.Sleep(scaleSettle)
	m := readMemory(s.cmd.Process.Pid)
	run.SettledRSSKB, run.RestartPeakRSSKB = m.EndRSSKB, m.PeakRSSKB
	log.Printf("scale: %-9s restarted: serving after %.1fs, RSS %s (%s %s later, peak %s)", name, run.RestartSeconds,
		mib(run.RestartRSSKB), mib(run.SettledRSSKB), scaleSettle, mib(run.RestartPeakRSSKB))
	if name == "zookeeper" {
		s.stop()
		run.Import = measureImport(o, filepath.Join(o.workDir, "zookeeper", "data"))
	}
	return run, nil
}

// measureImport imports the stopped ZooKeeper's data directory zkDir into a new embedded etcd
// in o.workDir/zetcd, then starts zetcd on it. A failure is a result, not the end of the step.
func measureImport(o *options, zkDir string) *importRun {
	r := &importRun{}
	log.Printf("scale: importing ZooKeeper's data directory into zetcd")
	t0 := time.Now()
	cmd := exec.Command(filepath.Join(o.bin, "zetcd"), "import", "--zk-data-dir", zkDir,
		"--data-dir", filepath.Join(o.workDir, "zetcd"), "--log-level", "info")
	out, err := cmd.CombinedOutput()
	r.Seconds = time.Since(t0).Seconds()
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSSKB = ru.Maxrss
		}
	}
	if err != nil {
		r.Error = fmt.Sprintf("zetcd import: %v: %s", err, lastError(string(out)))
		log.Printf("scale: import failed after %.1fs: %s", r.Seconds, r.Error)
		return r
	}
	r.Zxids = importedZxids(string(out))
	log.Printf("scale: imported in %.1fs (zxids %s, peak RSS %s)", r.Seconds, r.Zxids, mib(r.PeakRSSKB))
	t0 = time.Now()
	s, err := launchScale(o, "zetcd")
	if err == nil {
		err = waitRead(s, scaleNode(o.sc.znodes-1))
		s.stop()
	}
	r.StartSeconds = time.Since(t0).Seconds()
	if err != nil {
		r.Error = fmt.Sprintf("zetcd on the import: %v", err)
		log.Printf("scale: %s", r.Error)
		return r
	}
	log.Printf("scale: zetcd on the import served after %.1fs", r.StartSeconds)
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
// sc.loaders sessions, each creating whole parents' children in multis of sc.batch creates.
func loadTree(addr string, sc scaleOptions) error {
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
				for _, r := range resp.Results {
					if r.Op == encoding.OpError {
						return fmt.Errorf("multi of %s...: %v", scaleNode(i), r.Err)
					}
				}
			}
		}
		return nil
	})
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
			return fmt.Errorf("%s exited: %s", s.name, lastError(s.log.String()))
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

// scaleEstimate is how long the scale step takes on a 2-core machine, roughly: zetcd loads about
// scaleZetcdRate znodes a second and ZooKeeper several times that; each restarts in about a
// tenth of its load.
func scaleEstimate(o *options) time.Duration {
	load := time.Duration(o.sc.znodes) * time.Second / scaleZetcdRate
	imp := time.Duration(o.sc.znodes) * time.Second / scaleImportRate
	return load*3/2*11/10 + 2*(30*time.Second+time.Duration(3*o.sc.reps)*time.Second) + imp
}

const scaleZetcdRate = 10000

// scaleImportRate is about how many znodes a second `zetcd import` and zetcd's start on it take
// together on a 2-core machine.
const scaleImportRate = 40000

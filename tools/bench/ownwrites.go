package main

// The own-core writes step. The writes of the matrix (create, setData, delete, mixed) at 16 and 64
// connections, with each server on a core of its own and zkboom on another (taskset, as the
// own-core step), every server started fresh: ZooKeeper, zetcd and bare etcd. Beside the
// throughput each run records the server's busy share (its threads' utime+stime, from
// /proc/PID/stat, over the run's wall time) and its CPU per request, which tell a server that
// waits (on its log's fsync, on a transaction in flight) from one that has no CPU left.

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ownWritesOps are the step's ops, in order: delete after create, as in the matrix.
var ownWritesOps = []string{"create", "set", "delete", "mixed"}

// ownWritesConns are the step's connection counts.
var ownWritesConns = []int{16, 64}

// ownWritesRuns is the own-core writes step of bare etcd, zetcd and ZooKeeper.
type ownWritesRuns struct {
	stepStart
	ServerCPUs string         `json:"serverCpus"`
	ZkboomCPUs string         `json:"zkboomCpus"`
	Results    []ownWritesRun `json:"results"`
}

// ownWritesRun is one run of the step: zkboom's figures and the server's CPU over the run.
type ownWritesRun struct {
	result
	// CPUSeconds is the server's utime+stime over the run, all its threads.
	CPUSeconds float64 `json:"cpuSeconds"`
	// WallSeconds is the run's wall time, as the server's CPU was sampled.
	WallSeconds float64 `json:"wallSeconds"`
}

// busy is the server's busy share of its core over the run.
func (r *ownWritesRun) busy() float64 {
	if r.WallSeconds == 0 {
		return 0
	}
	return r.CPUSeconds / r.WallSeconds
}

// cpuPerRequestUs is the server's CPU per request answered, in microseconds.
func (r *ownWritesRun) cpuPerRequestUs() float64 {
	if r.Report.Requests == 0 {
		return 0
	}
	return 1e6 * r.CPUSeconds / float64(r.Report.Requests)
}

// runOwnWrites runs the step against each target of --targets, each started fresh for every
// op and connection count (a server's state after many creates is not a fresh one's). It
// returns nil, and logs why, on a machine without two cores or without taskset.
func runOwnWrites(shared *options) (*ownWritesRuns, error) {
	if runtime.NumCPU() < 2 {
		log.Printf("own-core writes: left out, the machine has one core")
		return nil, nil
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		log.Printf("own-core writes: left out: %v", err)
		return nil, nil
	}
	o := *shared
	o.serverCPUs, o.zkboomCPUs = o.own.serverCPUs, o.own.zkboomCPUs
	ow := &ownWritesRuns{stepStart: newStepStart(), ServerCPUs: o.serverCPUs, ZkboomCPUs: o.zkboomCPUs}
	log.Printf("own-core writes: servers on CPUs %s, zkboom on CPUs %s (load average %s)", o.serverCPUs, o.zkboomCPUs, ow.LoadAvg)
	for _, name := range o.targetsOn {
		for _, c := range ownWritesConns {
			runs, err := ownWritesOn(&o, name, c)
			if err != nil {
				return nil, err
			}
			ow.Results = append(ow.Results, runs...)
		}
	}
	return ow, nil
}

// ownWritesOn starts target name fresh on a data directory of its own, warms it up and runs
// the step's ops at conns connections against it.
func ownWritesOn(shared *options, name string, conns int) ([]ownWritesRun, error) {
	o := *shared
	o.workDir = filepath.Join(shared.workDir, fmt.Sprintf("ownwrites-%s-%d", name, conns))
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(o.workDir)
	s, err := startTarget(&o, name)
	if err != nil {
		return nil, fmt.Errorf("own-core writes: %s: %w", name, err)
	}
	defer s.stop()
	if err := warmUp(&o, s); err != nil {
		return nil, fmt.Errorf("own-core writes: %s: %w\n%s", name, err, s.log.String())
	}
	var runs []ownWritesRun
	var created []result
	for _, op := range ownWritesOps {
		d, extra := o.duration, []string(nil)
		if op == "delete" {
			d, extra = 0, []string{"--total", strconv.Itoa(deleteTotal(created, conns, o.duration))}
		}
		sampler := sampleCPU(s.cmd.Process.Pid)
		res, err := measureRun(&o, s, "own-core writes: ", op, op, conns, d, extra...)
		samples := sampler.stop()
		if err != nil {
			return nil, fmt.Errorf("own-core writes: %s: %w\n%s", name, err, s.log.String())
		}
		cpu, wall := samples.window(time.Duration(res.Report.Seconds * float64(time.Second)))
		run := ownWritesRun{result: *res, CPUSeconds: cpu.Seconds(), WallSeconds: wall.Seconds()}
		log.Printf("own-core writes: %-9s %-6s %3d conns: busy %3.0f%%  CPU %4.0f us/request", name, op, conns, 100*run.busy(), run.cpuPerRequestUs())
		runs = append(runs, run)
		if op == "create" {
			created = append(created, *res)
		}
	}
	return runs, nil
}

// cpuSample is a server's CPU time so far at one moment.
type cpuSample struct {
	at  time.Time
	cpu time.Duration
}

// cpuSamples are a server's CPU times sampled over a zkboom run.
type cpuSamples []cpuSample

// cpuSampler samples a process's CPU time every cpuSamplePeriod until stop.
type cpuSampler struct {
	quit    chan struct{}
	samples chan cpuSamples
}

const cpuSamplePeriod = 20 * time.Millisecond

// sampleCPU starts sampling process pid's CPU time.
func sampleCPU(pid int) *cpuSampler {
	s := &cpuSampler{quit: make(chan struct{}), samples: make(chan cpuSamples, 1)}
	go func() {
		var out cpuSamples
		tick := time.NewTicker(cpuSamplePeriod)
		defer tick.Stop()
		for {
			if cpu, err := processCPU(pid); err == nil {
				out = append(out, cpuSample{time.Now(), cpu})
			}
			select {
			case <-s.quit:
				s.samples <- out
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling, with one last sample, and returns the samples.
func (s *cpuSampler) stop() cpuSamples {
	close(s.quit)
	return <-s.samples
}

// window is the CPU time spent, and the wall time, over the last d of the samples: zkboom's
// measured phase, which its run's report gives the length of, after the nodes it seeds (a
// delete run's, as many as it deletes) and before it exits.
func (ss cpuSamples) window(d time.Duration) (cpu, wall time.Duration) {
	if len(ss) < 2 {
		return 0, 0
	}
	last := ss[len(ss)-1]
	from := ss[0]
	for _, x := range ss {
		if last.at.Sub(x.at) < d {
			break
		}
		from = x
	}
	return last.cpu - from.cpu, last.at.Sub(from.at)
}

// processCPU is the utime+stime of process pid so far, all its threads (fields 14 and 15 of
// /proc/PID/stat, in clock ticks of 1/100 s, USER_HZ on Linux).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] { // utime, stime: fields 14 and 15, the 12th and 13th after the name
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// ownWritesEstimate is how long the step takes, roughly.
func ownWritesEstimate(o *options) time.Duration {
	runs := len(ownWritesOps) * len(ownWritesConns)
	return time.Duration(len(o.targetsOn)*len(ownWritesConns)) * (o.warmup + 10*time.Second + time.Duration(runs/len(ownWritesConns))*(o.duration+2*time.Second))
}

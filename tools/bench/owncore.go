package main

// The own-core step. In the matrix the load generator shares the servers' cores, and with 64
// connections its threads take the cores the server's threads wait for: zetcd answers a get in
// tens of microseconds once it runs, but the request waits for a core in the kernel's run queue,
// and the p99 measures that wait. This step runs the matrix's reads at 64 connections again with
// the server on one core and zkboom on another (taskset), zetcd and ZooKeeper alike, so that
// their latencies compare without the load generator in them. It needs two cores and taskset
// (util-linux); without them it is left out, and says so.

import (
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// ownCoreOptions configure the own-core step.
type ownCoreOptions struct {
	conns      int    // connections of every run
	serverCPUs string // taskset's list for the server
	zkboomCPUs string // and for zkboom
}

// ownCoreRuns is the own-core step of zetcd and ZooKeeper.
type ownCoreRuns struct {
	stepStart
	Conns      int      `json:"conns"`
	ServerCPUs string   `json:"serverCpus"`
	ZkboomCPUs string   `json:"zkboomCpus"`
	Results    []result `json:"results"`
}

// ownCoreOp reports whether the step runs op: the reads, whose p99 the load generator decides.
func ownCoreOp(op string) bool { return op == "get" || op == "exists" || op == "children" }

// runOwnCore runs the step against zetcd and ZooKeeper (of --targets), each started fresh on a
// data directory of its own and warmed up as in the matrix. It returns nil, and logs why, on a
// machine without two cores or without taskset.
func runOwnCore(shared *options) (*ownCoreRuns, error) {
	if runtime.NumCPU() < 2 {
		log.Printf("own core: left out, the machine has one core")
		return nil, nil
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		log.Printf("own core: left out: %v", err)
		return nil, nil
	}
	o := *shared
	o.workDir = filepath.Join(shared.workDir, "owncore")
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return nil, err
	}
	o.serverCPUs, o.zkboomCPUs = o.own.serverCPUs, o.own.zkboomCPUs
	oc := &ownCoreRuns{stepStart: newStepStart(), Conns: o.own.conns,
		ServerCPUs: o.serverCPUs, ZkboomCPUs: o.zkboomCPUs}
	log.Printf("own core: servers on CPUs %s, zkboom on CPUs %s", o.serverCPUs, o.zkboomCPUs)
	var err error
	oc.Results, err = onEachZKServer(&o, "own core", func(s *server) ([]result, error) { return ownCoreOn(&o, s) })
	if err != nil {
		return nil, err
	}
	return oc, nil
}

// ownCoreOn runs the step's ops against s, after the matrix's warm-up.
func ownCoreOn(o *options, s *server) ([]result, error) {
	if err := warmUp(o, s); err != nil {
		return nil, err
	}
	var runs []result
	for _, op := range o.ops {
		if !ownCoreOp(op) {
			continue
		}
		res, err := measureRun(o, s, "own core: ", op, op, o.own.conns, o.duration)
		if err != nil {
			return nil, err
		}
		runs = append(runs, *res)
	}
	return runs, nil
}

// onCPUs returns cmd to be run by taskset on cpus (taskset's list), or cmd itself when cpus is
// empty. taskset executes the program in its own process, so the process is the program's.
func onCPUs(cmd *exec.Cmd, cpus string) *exec.Cmd {
	if cpus == "" {
		return cmd
	}
	pinned := exec.Command("taskset", append([]string{"-c", cpus}, cmd.Args...)...)
	pinned.Dir, pinned.Env = cmd.Dir, cmd.Env
	return pinned
}

// ownCoreEstimate is how long the step takes, roughly.
func ownCoreEstimate(o *options) time.Duration { return opsStepEstimate(o, ownCoreOp) }

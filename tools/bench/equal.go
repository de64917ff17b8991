package main

// The equal-load step. The matrix runs each server closed-loop, as fast as it answers, so a
// server that answers more requests a second also queues more of them, and leaves the load
// generator, which shares its cores, more to do: its latency is not measured at the load the
// other server's is. This step offers zetcd and ZooKeeper the same request rate (zkboom --rate)
// at the same connections: for each op of the matrix but delete (whose nodes run out), a share
// of the lower of the two servers' matrix throughputs at those connections, so that both keep
// up, and their latencies compare like for like.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// equalOptions configure the equal-load step.
type equalOptions struct {
	conns int     // connections of every run
	share float64 // the rate offered, as a share of the lower matrix throughput
}

// equalLoadRuns is the equal-load step of zetcd and ZooKeeper.
type equalLoadRuns struct {
	stepStart
	Conns   int                `json:"conns"`
	Share   float64            `json:"share"`
	Rates   map[string]float64 `json:"rates"` // requests a second offered, by op
	Results []result           `json:"results"`
}

// equalLoadOp reports whether the step runs op: every op of the matrix but delete, whose nodes
// run out.
func equalLoadOp(op string) bool { return op != "delete" }

// equalRate is the rate the step offers for op: share of the lower of zetcd's and ZooKeeper's
// matrix throughputs at conns; 0 when the matrix lacks either.
func equalRate(matrix []result, op string, conns int, share float64) float64 {
	lowest := 0.0
	for _, target := range []string{"zetcd", "zookeeper"} {
		r := findResult(matrix, target, op, conns)
		if r == nil || r.Report.OpsPerSec == 0 {
			return 0
		}
		if lowest == 0 || r.Report.OpsPerSec < lowest {
			lowest = r.Report.OpsPerSec
		}
	}
	return float64(int(lowest * share))
}

// runEqualLoad runs the step against zetcd and ZooKeeper (of --targets), each started fresh on
// a data directory of its own and warmed up as in the matrix.
func runEqualLoad(shared *options, matrix []result) (*equalLoadRuns, error) {
	o := *shared
	o.workDir = filepath.Join(shared.workDir, "equal")
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return nil, err
	}
	er := &equalLoadRuns{stepStart: newStepStart(), Conns: o.equal.conns, Share: o.equal.share,
		Rates: map[string]float64{}}
	for _, op := range o.ops {
		if rate := equalRate(matrix, op, o.equal.conns, o.equal.share); equalLoadOp(op) && rate > 0 {
			er.Rates[op] = rate
		}
	}
	var err error
	er.Results, err = onEachZKServer(&o, "equal load", func(s *server) ([]result, error) { return equalLoadOn(&o, s, er.Rates) })
	if err != nil {
		return nil, err
	}
	return er, nil
}

// equalLoadOn runs the step's ops against s at their rates, after the matrix's warm-up.
func equalLoadOn(o *options, s *server, rates map[string]float64) ([]result, error) {
	if err := warmUp(o, s); err != nil {
		return nil, err
	}
	var runs []result
	for _, op := range o.ops {
		rate, ok := rates[op]
		if !ok {
			continue
		}
		res, err := measureRun(o, s, fmt.Sprintf("equal load at %.0f/s: ", rate), op, op, o.equal.conns, o.duration,
			"--rate", strconv.FormatFloat(rate, 'f', 0, 64))
		if err != nil {
			return nil, err
		}
		runs = append(runs, *res)
	}
	return runs, nil
}

// equalLoadEstimate is how long the step takes, roughly.
func equalLoadEstimate(o *options) time.Duration { return opsStepEstimate(o, equalLoadOp) }

// opsStepEstimate is how long a step takes, roughly, that runs against zetcd and ZooKeeper each
// op of o.ops for which runs reports true: per server a start, the warm-up and the runs.
func opsStepEstimate(o *options, runs func(op string) bool) time.Duration {
	n := 0
	for _, op := range o.ops {
		if runs(op) {
			n++
		}
	}
	return 2 * (time.Duration(n)*(o.duration+1500*time.Millisecond) + o.warmup + 10*time.Second)
}

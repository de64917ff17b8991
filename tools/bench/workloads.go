package main

// The workloads step: two workloads the matrix does not cover, run by zkboom against zetcd and
// ZooKeeper, and the watch workload against bare etcd too (runWorkloads says on which servers):
//
//	seq-create-persistent  --conns 64 --sequential create: 64 sessions creating PERSISTENT_SEQUENTIAL
//	                       nodes under one parent (a queue directory)
//	seq-create-ephemeral   the same with EPHEMERAL_SEQUENTIAL (a lock directory)
//	watch                  --conns 16 --rate 500 watch: 16 watchers, setData at 500/s on the
//	                       watched nodes, the time from just before each setData is sent to its
//	                       event's arrival (etcd: a put, and the event on another client's
//	                       watch of the key: the floor of a write's event on etcd)
//
// For zetcd each run also gives the etcd round trips per request from /metrics: the committer
// names a batch's sequential creates after their parent's child counter and commits them in one
// transaction that guards it, so a round trip per create is a transaction per create, and a
// batch that finds the counter moved (a create through another zetcd) is one more.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// workloadOptions configure the workloads step.
type workloadOptions struct {
	seqConns      int           // sessions creating in the one parent
	watchers      int           // watch: sessions watching
	watchRate     float64       // watch: setData per second, over all watchers
	watchDuration time.Duration // watch: length of the run
	watchRounds   int           // watch: rounds, every target in each
}

// workloadRuns is the workloads step of every server: result.Op is the workload's name.
type workloadRuns struct {
	stepStart
	Duration  string   `json:"duration"` // of each sequential-create run
	WatchRate float64  `json:"watchRate"`
	Results   []result `json:"results"`
}

// workload is one zkboom run of the step.
type workload struct {
	name     string
	op       string
	conns    int
	duration time.Duration
	extra    []string // zkboom flags
}

// seqWorkloads are the sequential creates, run one after the other on one server.
func seqWorkloads(o *options) []workload {
	return []workload{
		{"seq-create-persistent", "create", o.work.seqConns, o.duration, []string{"--sequential"}},
		{"seq-create-ephemeral", "create", o.work.seqConns, o.duration, []string{"--sequential", "--ephemeral"}},
	}
}

func watchWorkload(o *options) workload {
	return workload{"watch", "watch", o.work.watchers, o.work.watchDuration, []string{"--rate", strconv.FormatFloat(o.work.watchRate, 'f', -1, 64)}}
}

// runWorkloads runs the sequential creates against zetcd and ZooKeeper (of --targets), each
// started fresh, then rounds of the watch workload: in each, every target, bare etcd included,
// started fresh again and warmed up as in the matrix, in turn. Fresh servers keep the creates'
// leftovers (a large tree, etcd's compaction of it, ZooKeeper's snapshot) out of the watch run;
// rounds let the report compare servers measured minutes apart on a machine whose speed drifts.
func runWorkloads(shared *options) (*workloadRuns, error) {
	o := *shared
	o.workDir = filepath.Join(shared.workDir, "workloads")
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return nil, err
	}
	wr := &workloadRuns{stepStart: newStepStart(), Duration: o.duration.String(), WatchRate: o.work.watchRate}
	var err error
	wr.Results, err = onEachZKServer(&o, "workloads", func(s *server) ([]result, error) {
		var runs []result
		for _, w := range seqWorkloads(&o) {
			res, err := runWorkload(&o, s, w)
			if err != nil {
				return nil, err
			}
			runs = append(runs, *res)
		}
		return runs, nil
	})
	if err != nil {
		return nil, err
	}
	for round := 1; round <= max(o.work.watchRounds, 1); round++ {
		ow := o
		ow.workDir = filepath.Join(o.workDir, fmt.Sprintf("watch%d", round))
		for _, name := range o.targetsOn {
			r, err := runWatch(&ow, name)
			if err != nil {
				return nil, err
			}
			r.Round = round
			wr.Results = append(wr.Results, *r)
		}
	}
	return wr, nil
}

// runWatch runs the watch workload against target name, started fresh and warmed up.
func runWatch(o *options, name string) (*result, error) {
	runs, err := onServer(o, "workloads", name, func(s *server) ([]result, error) {
		if err := warmUp(o, s); err != nil {
			return nil, err
		}
		r, err := runWorkload(o, s, watchWorkload(o))
		if err != nil {
			return nil, err
		}
		return []result{*r}, nil
	})
	if err != nil {
		return nil, err
	}
	return &runs[0], nil
}

func runWorkload(o *options, s *server, w workload) (*result, error) {
	return measureRun(o, s, "workloads: ", w.name, w.op, w.conns, w.duration, w.extra...)
}

// workloadsEstimate is how long the workloads step takes, roughly: per server a start, the
// runs, and zkboom's setup of each.
func workloadsEstimate(o *options) time.Duration {
	var seq time.Duration
	for _, w := range seqWorkloads(o) {
		seq += w.duration + 3*time.Second
	}
	watch := o.warmup + o.work.watchDuration + 15*time.Second
	return 2*(seq+10*time.Second) + time.Duration(max(o.work.watchRounds, 1)*len(o.targetsOn))*watch
}

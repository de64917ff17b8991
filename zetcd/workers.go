package zetcd

import (
	"sync"
	"time"
)

// workerPool runs the executors and writers of all connections (workQueue workers) on
// goroutines kept parked between tasks. A connection with one request at a time starts its
// executor anew for every request; a new goroutine starts with a small stack, and a write's
// path through the session decorators and the store grows it, copying it, on every request
// (6% of the CPU of setData at 64 connections). A parked worker keeps the stack earlier tasks
// grew. Workers park in LIFO order, so the busiest few stay warm; one parked longer than
// maxWorkerIdle exits, as does one that finds maxIdleWorkers parked already, so that a burst
// of many connections leaves no goroutines behind (idle connections hold none).
type workerPool struct {
	mu sync.Mutex
	// idle holds the parked workers, newest last; guarded by mu.
	idle []*poolWorker
	// sweeping, guarded by mu: a sweep goroutine runs (it exits once idle is empty).
	sweeping bool
}

// poolWorker is one parked worker: go hands it its next task; a nil task makes it exit.
type poolWorker struct {
	task  chan func()
	since time.Time // when it parked
}

const (
	maxIdleWorkers = 256
	maxWorkerIdle  = time.Second
)

// workers is the process's pool: every server shares it.
var workers workerPool

// goRun runs f on a parked worker, or on a new goroutine when none is parked.
func (p *workerPool) goRun(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.task <- f
		return
	}
	p.mu.Unlock()
	go p.work(f)
}

// work runs tasks until it is told to exit or finds the pool full.
func (p *workerPool) work(f func()) {
	var w *poolWorker
	for f != nil {
		f()
		if w == nil {
			w = &poolWorker{task: make(chan func(), 1)}
		}
		if !p.park(w) {
			return
		}
		f = <-w.task
	}
}

// park adds w to the idle workers; false when the pool holds enough of them already.
func (p *workerPool) park(w *poolWorker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleWorkers {
		return false
	}
	w.since = time.Now()
	p.idle = append(p.idle, w)
	if !p.sweeping {
		p.sweeping = true
		go p.sweep()
	}
	return true
}

// sweep tells the workers parked longer than maxWorkerIdle to exit, oldest first, until none
// is parked.
func (p *workerPool) sweep() {
	for {
		time.Sleep(maxWorkerIdle / 2)
		p.mu.Lock()
		old := 0
		for old < len(p.idle) && time.Since(p.idle[old].since) > maxWorkerIdle {
			p.idle[old].task <- nil // buffered: the worker is parked, its channel empty
			old++
		}
		rest := copy(p.idle, p.idle[old:])
		clear(p.idle[rest:])
		p.idle = p.idle[:rest]
		if len(p.idle) == 0 {
			p.sweeping = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// parked is the number of parked workers (tests).
func (p *workerPool) parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

package zetcd

import (
	"sync"
	"testing"
	"time"
)

// TestWorkerPoolReusesAndRetires checks that a finished task's goroutine parks and runs the
// next task, that no more than maxIdleWorkers park after a burst, and that parked workers exit
// once idle for maxWorkerIdle.
func TestWorkerPoolReusesAndRetires(t *testing.T) {
	var p workerPool
	ran := make(chan struct{})
	p.goRun(func() { ran <- struct{}{} })
	<-ran
	waitParked(t, &p, 1)
	p.goRun(func() { ran <- struct{}{} })
	<-ran
	waitParked(t, &p, 1) // the parked worker ran it: no second goroutine parked

	release := make(chan struct{})
	var started sync.WaitGroup
	const burst = maxIdleWorkers + 50
	started.Add(burst)
	for range burst {
		p.goRun(func() { started.Done(); <-release })
	}
	started.Wait()
	close(release)
	waitParked(t, &p, maxIdleWorkers)

	deadline := time.Now().Add(3 * maxWorkerIdle)
	for p.parked() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still parked %v after the burst", p.parked(), 3*maxWorkerIdle)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitParked(t *testing.T, p *workerPool, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for p.parked() != want {
		if time.Now().After(deadline) {
			t.Fatalf("parked workers: %d, want %d", p.parked(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

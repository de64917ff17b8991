package main

import (
	"runtime/debug"
	"time"

	"go.uber.org/zap"
)

// releaseStartMemory gives back to the system, in the background, the memory the start's garbage
// held, to be called once the replica is loaded. A start builds two large structures that live
// as long as the process, etcd's key index and the replica (etcdstore/replica.go, load), and
// reads every key to do so: Go's collector lets the heap reach twice what it last found live
// before it collects, and keeps the memory it reached as headroom for a heap that will not grow
// so fast again. One collection and a return of the free memory at the end bring RSS down to
// what the tree holds (at a million znodes of 128 bytes 1.0 GiB instead of 1.2).
//
// The start keeps Go's default GOGC: a higher one makes the start's CPU smaller but its peak
// heap up to (1 + GOGC/100) times what was live, which at ten million znodes is more than the
// machine can spare.
func releaseStartMemory(log *zap.Logger) {
	go func() {
		begin := time.Now()
		debug.FreeOSMemory()
		log.Debug("start's memory returned to the system", zap.Duration("took", time.Since(begin)))
	}()
}

package main

import (
	"math"
	"os"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
)

// startGCPercent is the collector's GOGC while zetcd starts. A start builds two large
// structures that live as long as the process, and little else: etcd's key index and the
// replica (etcdstore/replica.go, load). With Go's default of 100 the collector marks that growing
// heap at every doubling, a sixth of a start's CPU at a million znodes, on the cores the start
// itself needs; at 400 it marks it about half as often. The start's peak heap is then up to
// five times what was live at the last mark instead of twice, bounded by a memory limit of
// three quarters of the machine's memory (or its cgroup's limit) while the start lasts.
const startGCPercent = 400

// startGC sets the start's collector, unless GOGC or GOMEMLIMIT is set, and returns what ends
// it, to be called once the replica is loaded: the collector goes back to what it was, and
// the memory the start's garbage held is given back to the system at once, in the background,
// rather than kept as headroom for a heap that will not grow so fast again.
func startGC(log *zap.Logger) (started func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	limit := int64(math.MaxInt64)
	if mem := machineMemory(); mem > 0 {
		limit = mem / 4 * 3
	}
	oldLimit := debug.SetMemoryLimit(limit)
	oldPercent := debug.SetGCPercent(startGCPercent)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
		go func() {
			begin := time.Now()
			debug.FreeOSMemory()
			log.Debug("start's memory returned to the system", zap.Duration("took", time.Since(begin)))
		}()
	}
}

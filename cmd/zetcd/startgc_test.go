package main

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The start's garbage is given back: after releaseStartMemory the heap's free memory is
// returned to the system.
func TestReleaseStartMemory(t *testing.T) {
	garbage := make([][]byte, 0, 256)
	for range 256 {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	garbage = nil
	_ = garbage
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	releaseStartMemory(zap.NewNop())
	deadline := time.Now().Add(10 * time.Second)
	for {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if after.HeapReleased >= before.HeapReleased+128<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("released %d MiB of the heap after 10s (before: %d MiB); want 128 MiB more",
				after.HeapReleased>>20, before.HeapReleased>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

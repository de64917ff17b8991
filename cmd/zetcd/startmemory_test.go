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
	makeGarbage(256 << 20)
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

// makeGarbage allocates n bytes a MiB at a time and keeps none of them.
func makeGarbage(n int) {
	kept := make([][]byte, 0, n>>20)
	for range n >> 20 {
		kept = append(kept, make([]byte, 1<<20))
	}
	runtime.KeepAlive(kept)
}

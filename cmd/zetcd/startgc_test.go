package main

import (
	"runtime/debug"
	"testing"

	"go.uber.org/zap"
)

func TestStartGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	loaded := startGC(zap.NewNop())
	if got := debug.SetGCPercent(startGCPercent); got != startGCPercent {
		t.Errorf("GOGC while starting: %d, want %d", got, startGCPercent)
	}
	if limit := debug.SetMemoryLimit(-1); limit != machineMemory()/4*3 {
		t.Errorf("memory limit while starting: %d, want %d", limit, machineMemory()/4*3)
	}
	loaded()
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GOGC once loaded: %d, want 100", got)
	}
	debug.SetGCPercent(100)
}

func TestStartGCLeavesGOGCSet(t *testing.T) {
	t.Setenv("GOGC", "50")
	before := debug.SetGCPercent(50)
	defer debug.SetGCPercent(before)
	startGC(zap.NewNop())()
	if got := debug.SetGCPercent(-1); got != 50 {
		t.Errorf("GOGC with GOGC=50 set: %d, want 50", got)
	}
	debug.SetGCPercent(50)
}

package main

import (
	"errors"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

func TestMultiError(t *testing.T) {
	result := func(codes ...encoding.ErrCode) *encoding.MultiResponse {
		r := &encoding.MultiResponse{}
		for _, c := range codes {
			r.Results = append(r.Results, encoding.MultiResult{Op: encoding.OpError, Err: c})
		}
		return r
	}
	ok := &encoding.MultiResponse{Results: []encoding.MultiResult{{Op: encoding.OpCreate}, {Op: encoding.OpCreate}}}
	for _, c := range []struct {
		resp *encoding.MultiResponse
		want error
	}{
		{ok, nil},
		{result(encoding.ErrOK, encoding.ErrQuotaExceeded, encoding.ErrRuntimeInconsistency), encoding.ErrQuotaExceeded},
		{result(encoding.ErrRuntimeInconsistency, encoding.ErrNodeExists), encoding.ErrNodeExists},
		{result(encoding.ErrRuntimeInconsistency, encoding.ErrRuntimeInconsistency), encoding.ErrRuntimeInconsistency},
	} {
		if got := multiError(c.resp); !errors.Is(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("multiError(%v) = %v, want %v", c.resp.Results, got, c.want)
		}
	}
}

func TestHeapBytes(t *testing.T) {
	for heap, want := range map[string]int64{"14g": 14 << 30, "2G": 2 << 30, "512m": 512 << 20, "64k": 64 << 10, "1048576": 1 << 20} {
		if got, err := heapBytes(heap); err != nil || got != want {
			t.Errorf("heapBytes(%q) = %d, %v; want %d", heap, got, err, want)
		}
	}
	for _, bad := range []string{"", "g", "14x", "-1g", "0"} {
		if _, err := heapBytes(bad); err == nil {
			t.Errorf("heapBytes(%q): no error", bad)
		}
	}
}

// TestScaleMemNeed: ZooKeeper needs its heap and the JVM's own, zetcd its size per znode; each
// the guard's floor on top. A machine with less is said to lack it.
func TestScaleMemNeed(t *testing.T) {
	sc := largeScaleOptions(scaleOptions{dataSize: 128}, 10000000, "14g", scaleQuota)
	if got, want := scaleMemNeed(sc, "zookeeper"), int64(14<<30+scaleJVMOverhead+scaleMemFloor); got != want {
		t.Errorf("ZooKeeper needs %d, want %d", got, want)
	}
	if got, want := scaleMemNeed(sc, "zetcd"), int64(10000000*scaleZetcdBytesPerZnode+scaleMemFloor); got != want {
		t.Errorf("zetcd needs %d, want %d", got, want)
	}
	if why := memoryShortfall(9<<30, 16<<30); why != "the machine has 9.0 GiB of memory available, and needs 16.0 GiB" {
		t.Errorf("shortfall: %q", why)
	}
	if why := memoryShortfall(16<<30, 16<<30); why != "" {
		t.Errorf("shortfall of a machine with enough: %q", why)
	}
	if avail, err := memAvailable(); err != nil || avail <= 0 {
		t.Errorf("memAvailable() = %d, %v", avail, err)
	}
}

func TestSummarizeGets(t *testing.T) {
	var lats []time.Duration
	for i := 100; i >= 1; i-- {
		lats = append(lats, time.Duration(i)*time.Millisecond)
	}
	g := summarizeGets(lats, 2*time.Second)
	if g.Requests != 100 || g.OpsPerSec != 50 || g.P50Ms != 51 || g.P99Ms != 100 {
		t.Errorf("summarizeGets = %+v, want 100 requests, 50 ops/s, p50 51 ms, p99 100 ms", g)
	}
	if g := summarizeGets(nil, time.Second); g.Requests != 0 || g.P99Ms != 0 {
		t.Errorf("summarizeGets(none) = %+v", g)
	}
}

// TestGuardMemory: the guard leaves a server alone while the machine has its floor available,
// and kills it, saying why, once it has not.
func TestGuardMemory(t *testing.T) {
	s, err := start("sleeper", exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	go guardMemory(s, 0)
	select {
	case <-s.exited:
		t.Fatal("the guard killed a server with memory to spare")
	case <-time.After(4 * scaleGuardEvery):
	}
	s.stop()

	s, err = start("sleeper", exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	go guardMemory(s, math.MaxInt64)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the guard left a server running below its floor")
	}
	if why := exitReason(s); !strings.HasPrefix(why, "sleeper stopped: the machine's available memory fell to ") {
		t.Errorf("exitReason = %q", why)
	}
}

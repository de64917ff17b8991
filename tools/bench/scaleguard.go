package main

// The scale steps' memory: a tree of ten million znodes takes most of a small machine's memory,
// and a machine without swap that runs out kills whatever process its OOM killer picks, the
// bench's or another's. So a server is started only when the machine has the memory it will
// need (lackOfMemory), and killed while it runs if the machine's available memory falls below
// scaleMemFloor (guardMemory): the step records that as how far the server got.

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// scaleMemFloor is the machine's available memory below which the guard kills the server.
var scaleMemFloor int64 = 1 << 30

const (
	// scaleZetcdBytesPerZnode is about the RSS zetcd with its embedded etcd takes per znode of
	// 128 bytes after a load (the scale step's "RSS after the load" at a million znodes).
	scaleZetcdBytesPerZnode = 1500
	// scaleJVMOverhead is about what ZooKeeper's JVM takes beyond its heap: code, metaspace,
	// threads, the collector's own structures.
	scaleJVMOverhead = 1 << 30
	// scaleProgressEvery is how often the load logs its progress; scaleGuardEvery how often
	// the guard reads the machine's memory.
	scaleProgressEvery = 10 * time.Second
	scaleGuardEvery    = 500 * time.Millisecond
)

// scaleMemNeed is the memory the machine must have available to start name for a scale step of
// sc: the server's estimated size on the whole tree, and the guard's floor.
func scaleMemNeed(sc scaleOptions, name string) int64 {
	if name == "zookeeper" {
		heap, _ := heapBytes(sc.heap)
		return heap + scaleJVMOverhead + scaleMemFloor
	}
	perZnode := int64(scaleZetcdBytesPerZnode) * int64(max(sc.dataSize, 128)) / 128
	return int64(sc.znodes)*perZnode + scaleMemFloor
}

// lackOfMemory says why name cannot be started for a scale step of sc on this machine: the
// memory available against what it needs; "" if it can.
func lackOfMemory(sc scaleOptions, name string) string {
	avail, err := memAvailable()
	if err != nil {
		return fmt.Sprintf("the machine's available memory is unknown: %v", err)
	}
	return memoryShortfall(avail, scaleMemNeed(sc, name))
}

// memoryShortfall says, if avail is below need, that the machine lacks memory; "" if not.
func memoryShortfall(avail, need int64) string {
	if avail >= need {
		return ""
	}
	return fmt.Sprintf("the machine has %s of memory available, and needs %s", byteSize(float64(avail)), byteSize(float64(need)))
}

// guardMemory kills s if the machine's available memory falls below floor (scaleMemFloor) while
// s runs, and sets s.lowMemory to say so first. It returns when s exits.
func guardMemory(s *server, floor int64) {
	t := time.NewTicker(scaleGuardEvery)
	defer t.Stop()
	for {
		select {
		case <-s.exited:
			return
		case <-t.C:
		}
		avail, err := memAvailable()
		if err != nil || avail >= floor {
			continue
		}
		why := fmt.Sprintf("%s stopped: the machine's available memory fell to %s (RSS %s), below the bench's floor of %s",
			s.name, byteSize(float64(avail)), mib(readMemory(s.cmd.Process.Pid).EndRSSKB), byteSize(float64(floor)))
		s.lowMemory.Store(&why)
		log.Print(why)
		s.cmd.Process.Kill()
		return
	}
}

// logProgress logs the load of s every scaleProgressEvery until done is closed: the znodes
// created so far, the rate since the last line, s's RSS and the machine's available memory.
func logProgress(s *server, sc scaleOptions, created *atomic.Int64, done <-chan struct{}) {
	t := time.NewTicker(scaleProgressEvery)
	defer t.Stop()
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			n := created.Load()
			avail, _ := memAvailable()
			log.Printf("%s: %-9s %s of %s znodes (%.0f/s), RSS %s, %s available", sc.step, s.name, thousands(int(n)),
				thousands(sc.znodes), float64(n-last)/now.Sub(lastAt).Seconds(), mib(readMemory(s.cmd.Process.Pid).EndRSSKB),
				byteSize(float64(avail)))
			last, lastAt = n, now
		}
	}
}

// memAvailable is the machine's available memory in bytes (MemAvailable of /proc/meminfo: free
// memory and what the kernel can reclaim without swapping).
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}

// heapBytes is the size a JVM's -Xmx value names: a number of bytes with an optional k, m or g
// (either case).
func heapBytes(heap string) (int64, error) {
	unit := int64(1)
	num := heap
	if n := len(heap); n > 0 {
		switch heap[n-1] {
		case 'k', 'K':
			unit, num = 1<<10, heap[:n-1]
		case 'm', 'M':
			unit, num = 1<<20, heap[:n-1]
		case 'g', 'G':
			unit, num = 1<<30, heap[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q: not a heap size (like 14g)", heap)
	}
	return v * unit, nil
}

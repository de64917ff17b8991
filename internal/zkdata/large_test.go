package zkdata_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// largeNodes is how many nodes TestLargeLoad writes: ZKDATA_LARGE_NODES, else 200000 (20000
// with -short).
func largeNodes(t testing.TB) int {
	if v := os.Getenv("ZKDATA_LARGE_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("ZKDATA_LARGE_NODES=%q: %v", v, err)
		}
		return n
	}
	if testing.Short() {
		return 20000
	}
	return 200000
}

// writeLarge writes a directory of n nodes under 1000-child parents in a snapshot, and a log of
// txns txns after it (setData, creates and deletes), and returns the snapshot's zxid.
func writeLarge(t testing.TB, dir, ext string, n, txns int) {
	t.Helper()
	const fan = 1000
	nodes := systemNodes()
	i, made := 0, 0
	writeSnapshot(t, dir, 0x100, ext, map[int64]int32{1: 30000}, map[int64][]encoding.ACL{1: readOnly}, func() (synthNode, bool) {
		if i < len(nodes) {
			i++
			return nodes[i-1], true
		}
		if made == n {
			return synthNode{}, false
		}
		made++
		if (made-1)%(fan+1) == 0 {
			return synthNode{path: fmt.Sprintf("/p%d", (made-1)/(fan+1)), acl: -1, zxid: 5, cversion: fan}, true
		}
		p := (made - 1) / (fan + 1)
		c := (made-1)%(fan+1) - 1
		return synthNode{path: fmt.Sprintf("/p%d/n%d", p, c), data: []byte("0123456789abcdef"), acl: -1, zxid: 6}, true
	})
	l := newLog(t, dir, 0x101)
	for k := range txns {
		zxid := int64(0x101 + k)
		j := k / 3
		p := fmt.Sprintf("/p%d/n%d", j%max(1, n/(fan+1)), j%fan)
		switch k % 3 {
		case 0:
			l.txn(1, zxid, encoding.OpSetData, true, func(e *encoding.Encoder) { e.String(p); e.Buffer([]byte("new")); e.Int32(1) })
		case 1:
			l.txn(1, zxid, encoding.OpCreate, true, create(p+"x", []byte("c"), false, -1))
		case 2:
			l.txn(1, zxid, encoding.OpDelete, true, func(e *encoding.Encoder) { e.String(p + "x") })
		}
	}
	l.close(t)
}

// TestLargeLoad times the load of a large tree.
func TestLargeLoad(t *testing.T) {
	n := largeNodes(t)
	for _, ext := range []string{"", "snappy"} {
		dir := t.TempDir()
		begin := time.Now()
		writeLarge(t, dir, ext, n, 30000)
		wrote := time.Since(begin)
		runtime.GC()
		begin = time.Now()
		progress := 0
		st, err := zkdata.Load(dir, zkdata.Options{Progress: func(zkdata.Progress) { progress++ }})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		took := time.Since(begin)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("snapshot %q of %d nodes and 30000 txns: written in %v, loaded in %v (%d progress calls, heap %d MiB)",
			ext, n, wrote.Round(time.Millisecond), took.Round(time.Millisecond), progress, ms.HeapAlloc>>20)
		if want := n + 4; len(st.Nodes) != want {
			t.Errorf("%d nodes, want %d", len(st.Nodes), want)
		}
	}
}

package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestProcessNonReadersBoundedMemory is a hostile client: clients that pipeline
// getData of a 1 MB node and never read their socket. Unbounded, the zetcd process queued their
// replies at about 140 MB/s. Here the real binary (embedded etcd) runs with small bounds; the
// queued bytes it reports and its resident memory stay bounded, and a bystander session's
// requests keep succeeding meanwhile.
func TestProcessNonReadersBoundedMemory(t *testing.T) {
	const perConn, total, clients, nodeBytes = 4 << 20, 8 << 20, 4, 1000 * 1000
	addr, maddr := itest.FreePort(t), itest.FreePort(t)
	p := itest.StartProcessArgs(t, addr, "--data-dir", t.TempDir(), "--metrics-addr", maddr,
		"--max-conn-queued-bytes", strconv.Itoa(perConn), "--max-queued-bytes", strconv.Itoa(total))
	setup := itest.ConnectRaw(t, addr)
	setup.MustCreate("/big", bytes.Repeat([]byte("b"), nodeBytes), 0)
	setup.MustCreate("/small", []byte("s"), 0)
	rss0 := residentBytes(t, p.Cmd.Process.Pid)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		c := itest.ConnectRawTimeout(t, addr, 40000) // writes forever: never expires for silence
		c.Conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		wg.Go(func() { c.Flood(&encoding.GetDataRequest{Path: "/big"}, stop) })
	}
	bystander := itest.ConnectRaw(t, addr)
	var maxQueued, maxRSS float64
	calls := 0
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); calls++ {
		var resp encoding.GetDataResponse
		if code := bystander.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/small"}, &resp); code != 0 || string(resp.Data) != "s" {
			t.Fatalf("bystander getData while the others do not read: %v %q", code, resp.Data)
		}
		bystander.MustCreate(fmt.Sprintf("/by%d", calls), nil, 0)
		if calls%20 == 0 {
			maxQueued = max(maxQueued, itest.Scrape(t, "http://"+maddr+"/metrics")["zetcd_queued_bytes"])
			maxRSS = max(maxRSS, float64(residentBytes(t, p.Cmd.Process.Pid)))
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("bystander calls %d; queued bytes peak %.0f; RSS %d MiB before, peak %.0f MiB", calls, maxQueued, rss0>>20, maxRSS/(1<<20))
	// The server's bound, and a reply and a request per connection past it.
	if want := float64(total + clients*(nodeBytes+64<<10)); maxQueued > want {
		t.Errorf("queued bytes peaked at %.0f, want at most %.0f", maxQueued, want)
	}
	// 8 s of 4 unbounded clients would be more than a GB; garbage and etcd's own reads of the
	// node come on top of the bound.
	if grew := maxRSS - float64(rss0); grew > 200<<20 {
		t.Errorf("resident memory grew by %.0f MiB while clients did not read", grew/(1<<20))
	}
}

// residentBytes reads a process's resident set size from /proc.
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestProcessIdleConnectionStacks: an idle connection of the real binary costs one goroutine
// of the runtime's smallest stack (2 KiB), though serving its session's requests grew its stack
// (to 4 KiB or more: the session's start in etcd, a create, reads): the wait moves to a new
// goroutine once the connection is idle (zetcd's runReader). Measured from zetcd's own Go
// metrics before and after the sessions, each of which adds exactly one goroutine.
func TestProcessIdleConnectionStacks(t *testing.T) {
	const n = 300
	addr, maddr := itest.FreePort(t), itest.FreePort(t)
	itest.StartProcessArgs(t, addr, "--data-dir", t.TempDir(), "--metrics-addr", maddr, "--pprof")
	metrics := "http://" + maddr + "/metrics"
	gc := func() map[string]float64 {
		for range 2 {
			resp, err := http.Get("http://" + maddr + "/debug/pprof/heap?gc=1")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return itest.Scrape(t, metrics)
	}
	itest.ConnectRaw(t, addr).MustCreate("/stacks", nil, 0) // the first session starts etcdstore's goroutines
	time.Sleep(2 * time.Second)                             // its requests' workers exit (below)
	before := gc()
	clients := make([]*itest.RawClient, n)
	for i := range clients {
		c := itest.ConnectRawTimeout(t, addr, 30000)
		c.MustCreate(fmt.Sprintf("/stacks/%d", i), bytes.Repeat([]byte("d"), 1000), encoding.ModeEphemeral)
		var resp encoding.GetDataResponse
		c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: fmt.Sprintf("/stacks/%d", i)}, &resp)
		clients[i] = c
	}
	// Idle: past the reader's quarter second, and past the second after which the workers
	// that ran the sessions' requests (zetcd's workerPool) exit.
	time.Sleep(2 * time.Second)
	after := gc()
	added := after["go_goroutines"] - before["go_goroutines"]
	perConn := (after["go_memstats_stack_inuse_bytes"] - before["go_memstats_stack_inuse_bytes"]) / n
	t.Logf("%d idle connections: %.0f goroutines more, %.0f bytes of stack each", n, added, perConn)
	if added < n-5 || added > n+20 { // a few of zetcd's and etcd's own come and go
		t.Errorf("%d idle connections added %.0f goroutines, want one each", n, added)
	}
	// 2 KiB stacks are counted by the 32 KiB span that holds sixteen, so a few spans part used
	// and the stacks of goroutines that come and go add a few hundred bytes a connection; a
	// wait that did not move costs 3.9 KiB.
	if perConn > 3*1024 {
		t.Errorf("%d idle connections: %.0f bytes of goroutine stack each, want 2 KiB", n, perConn)
	}
	for _, c := range clients { // still served after the move
		var resp encoding.GetDataResponse
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/stacks"}, &resp); code != 0 {
			t.Fatalf("getData after idle: %v", code)
		}
	}
}

package integration

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// BenchmarkWatchLatency measures watch delivery: the time from one session sending a setData to
// another session receiving the NodeDataChanged event, against zetcd and a real ZooKeeper in the
// same run. It reports p50 and p99 in microseconds.
//
//	go test ./integration -run '^$' -bench WatchLatency -benchtime 2000x
func BenchmarkWatchLatency(b *testing.B) {
	for _, s := range testenv.Servers {
		b.Run(s.Name, func(b *testing.B) {
			addr := s.Start(b)
			w := itest.ConnectRaw(b, addr)
			x := itest.ConnectRaw(b, addr)
			x.Create("/lat", nil, 0)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.Watch("getData", "/lat")
				start := time.Now()
				x.Send(encoding.OpSetData, &encoding.SetDataRequest{Path: "/lat", Data: []byte(strconv.Itoa(i)), Version: -1})
				w.WaitEvents(1)
				lat = append(lat, time.Since(start))
				if _, _, err := x.ReadReply(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkWatchMemory measures the memory of one zetcd process holding 100,000 watches over
// 1,000 connections: the zetcd binary runs against a separate etcd so its RSS is zetcd's alone,
// read from /proc before and after the watches are set.
//
//	go test ./integration -run '^$' -bench WatchMemory -benchtime 1x
func BenchmarkWatchMemory(b *testing.B) {
	const conns, perConn, nodes = 1000, 100, 1000
	cluster := startEtcd(b)
	p := itest.StartProcessArgs(b, itest.FreePort(b), "--endpoints", cluster.Etcd.Endpoint, "--data-dir", b.TempDir())
	setup := itest.ConnectRaw(b, p.Addr)
	setup.Create("/m", nil, 0)
	for i := 0; i < nodes; i++ {
		setup.Create(fmt.Sprintf("/m/n%d", i), []byte("x"), 0)
	}
	clients := make([]*itest.RawClient, conns)
	for i := range clients {
		clients[i] = itest.ConnectRaw(b, p.Addr)
	}
	before := rssKiB(b, p.Cmd.Process.Pid)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i, c := range clients {
			for j := 0; j < perConn; j++ {
				c.Send(encoding.OpGetData, &encoding.GetDataRequest{Path: fmt.Sprintf("/m/n%d", (i+j*7)%nodes), Watch: true})
			}
		}
		for _, c := range clients {
			for j := 0; j < perConn; j++ {
				if hdr, _, err := c.ReadReply(); err != nil || hdr.Err != 0 {
					b.Fatalf("getData watch: %+v %v", hdr, err)
				}
			}
		}
	}
	b.StopTimer()
	after := rssKiB(b, p.Cmd.Process.Pid)
	b.ReportMetric(float64(before)/1024, "rss-before-MiB")
	b.ReportMetric(float64(after)/1024, "rss-after-MiB")
	b.ReportMetric(float64(after-before)*1024/float64(conns*perConn), "bytes/watch")
}

// rssKiB reads a process's resident set size.
func rssKiB(t testing.TB, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

package etcdstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/zetcd"
)

// BenchmarkWrite measures the creates and setData of conns sessions at once through the
// committer, on a real embedded etcd called in process with fence guards (as zetcd runs it),
// with up to depth
// batches in flight (Config.CommitDepth): time and allocations per write, etcd's in this
// process included (go test -bench Write -benchmem).
func BenchmarkWrite(b *testing.B) {
	for _, op := range []string{"create", "setData"} {
		for _, conns := range []int{1, 16, 64} {
			for _, depth := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("%s/conns=%d/depth=%d", op, conns, depth), func(b *testing.B) { benchWrite(b, op, conns, depth) })
			}
		}
	}
}

func benchWrite(b *testing.B, op string, conns, depth int) {
	ctx := context.Background()
	e, err := embedetcd.Start(embedetcd.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	cli, leases := e.InProcessClient()
	b.Cleanup(func() { cli.Close() })
	st, err := New(ctx, Config{Client: cli, LeaseClient: leases, Watcher: e.Watcher(), Logger: zap.NewNop(),
		ReapInterval: -1, FenceGuards: true, CommitDepth: depth})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	sessions := make([]zetcd.Session, conns)
	for i := range sessions {
		if sessions[i], err = st.Connect(ctx, zetcd.ConnectParams{Timeout: 30 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, 128)
	for i := range conns {
		p := fmt.Sprintf("/s%d", i)
		if _, _, err := sessions[0].Create(ctx, &encoding.CreateRequest{Path: p, Data: data, ACL: openACL}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, n := sessions[i], 0
			for next.Add(1) <= int64(b.N) {
				var err error
				switch op {
				case "create":
					_, _, err = s.Create(ctx, &encoding.CreateRequest{Path: fmt.Sprintf("/s%d/n%d", i, n), Data: data, ACL: openACL})
				case "setData":
					_, _, err = s.SetData(ctx, &encoding.SetDataRequest{Path: fmt.Sprintf("/s%d", i), Data: data, Version: -1})
				}
				if err != nil {
					b.Error(err)
					return
				}
				n++
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(st.commits.requeued.Load())/float64(b.N), "requeued/op")
}

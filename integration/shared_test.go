package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestSharedEtcdCluster: zetcd shares its etcd with another application, which writes keys
// outside zetcd's prefix all along. Those revisions bring no event to zetcd's watch, so only
// etcd's progress notification tells its replica that it has seen them. A sync must still
// bring the replica up to etcd's revision and be answered, on zetcd processes in front of the
// same etcd, and what one of them wrote is read on the other after a sync.
func TestSharedEtcdCluster(t *testing.T) {
	cluster := startEtcd(t)
	a := startZetcdOn(t, cluster)
	b := startZetcdOn(t, cluster)
	ca, cb := itest.ConnectRaw(t, a.Addr), itest.ConnectRaw(t, b.Addr)

	cli := cluster.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the other application
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("/other-app/%d", i%10), "x"); err != nil && ctx.Err() == nil {
				t.Errorf("the other application's put: %v", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer wg.Wait()
	defer cancel()

	for i := range 20 {
		data := fmt.Appendf(nil, "%d", i)
		if code := ca.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/", Data: data, Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Fatalf("round %d: setData through a: %v", i, code)
		}
		for name, c := range map[string]*itest.RawClient{"a": ca, "b": cb} {
			if code := c.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{}); code != 0 {
				t.Fatalf("round %d: sync through %s: %v", i, name, code)
			}
			var got encoding.GetDataResponse
			if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/"}, &got); code != 0 || string(got.Data) != string(data) {
				t.Fatalf("round %d: getData through %s after sync: %v %q, want %q", i, name, code, got.Data, data)
			}
		}
	}
}

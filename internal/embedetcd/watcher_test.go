package embedetcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestStoreWatcher checks the store watcher against what the watch feed relies on: a prefix
// watched from a past revision gets every event after it, in revision order and nothing outside
// the prefix; a progress request is answered with the store's revision; a watch from a
// compacted revision is told so and closed; ending the context or the watcher closes the channel.
func TestStoreWatcher(t *testing.T) {
	e, err := Start(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli, _ := e.InProcessClient()
	defer cli.Close()
	ctx := context.Background()
	first, err := cli.Put(ctx, "p/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range [][2]string{{"p/b", "2"}, {"q/x", "outside"}, {"p/a", "3"}} {
		if _, err := cli.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := cli.Delete(ctx, "p/b"); err != nil {
		t.Fatal(err)
	}

	w := e.Watcher()
	defer w.Close()
	wctx, cancel := context.WithCancel(ctx)
	wch := w.Watch(wctx, "p/", clientv3.WithPrefix(), clientv3.WithRev(first.Header.Revision+1))
	want := []string{"PUT p/b 2", "PUT p/a 3", "DELETE p/b "}
	got := receiveEvents(t, wch, len(want))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	put, err := cli.Put(ctx, "p/c", "4") // after the watch caught up: delivered as it commits
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveEvents(t, wch, 1); got[0] != "PUT p/c 4" {
		t.Fatalf("event %q after catching up", got[0])
	}

	if err := w.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	resp := receive(t, wch)
	if !resp.IsProgressNotify() || resp.Header.Revision != put.Header.Revision {
		t.Fatalf("progress response %+v, want one at revision %d", resp, put.Header.Revision)
	}
	cancel()
	expectClosed(t, wch)

	if _, err := cli.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	compacted := w.Watch(ctx, "p/", clientv3.WithPrefix(), clientv3.WithRev(first.Header.Revision))
	resp = receive(t, compacted)
	if resp.CompactRevision != put.Header.Revision || resp.Err() == nil {
		t.Fatalf("watch from a compacted revision: %+v, err %v", resp, resp.Err())
	}
	expectClosed(t, compacted)

	open := w.Watch(ctx, "p/", clientv3.WithPrefix())
	w.Close()
	expectClosed(t, open)
}

func receive(t *testing.T, wch clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	select {
	case resp, ok := <-wch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return resp
	case <-time.After(5 * time.Second):
		t.Fatal("no watch response in 5 s")
	}
	panic("unreachable")
}

// receiveEvents reads responses until n events came, as "TYPE key value".
func receiveEvents(t *testing.T, wch clientv3.WatchChan, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		for _, ev := range receive(t, wch).Events {
			kind := "PUT"
			if ev.Type == mvccpb.DELETE {
				kind = "DELETE"
			}
			out = append(out, fmt.Sprintf("%s %s %s", kind, ev.Kv.Key, ev.Kv.Value))
		}
	}
	return out
}

func expectClosed(t *testing.T, wch clientv3.WatchChan) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-wch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel still open 5 s after its end")
		}
	}
}

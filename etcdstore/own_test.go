package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// awaitOwnChecked waits until the watch feed has checked every revision the committer applied
// against etcd's events, and returns the counts (own.go).
func awaitOwnChecked(t *testing.T, b *Store) ownRevisions {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.applyMu.Lock()
		own, left := b.own, len(b.own.events)
		b.applyMu.Unlock()
		if left == 0 {
			return own
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed has not checked %d of the committer's revisions within 10s", left)
		}
	}
}

// TestOwnRevisionsServeAtOnce: a write's revision is applied to the replica, and its watches
// fired, by the committer as soon as etcd commits it: with etcd's watch stream held back, the
// write's event has reached the watching session when the write returns, and a read of another
// session is answered from the replica with no etcd round trip. The feed then finds etcd's
// events the same.
func TestOwnRevisionsServeAtOnce(t *testing.T) {
	ctx := context.Background()
	metrics, reg := newTestMetrics(t)
	b, kv, gw, _ := newGatedBackendWith(t, Config{Metrics: metrics})
	sink := &zetcdtest.Events{}
	watching, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: "/x", Watch: true}); !errors.Is(err, encoding.ErrNoNode) {
		t.Fatalf("exists /x: %v, want NoNode", err)
	}
	writer, reader := openTestSession(t, b), openTestSession(t, b)
	awaitTreeCurrent(t, b)

	gw.pause()
	_, z, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", Data: []byte("1"), ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sink.Take(), []string{fmt.Sprintf("NodeCreated /x @%d", z)}; !slices.Equal(got, want) {
		t.Errorf("events when the create returned, etcd's watch held back: %q, want %q", got, want)
	}
	before := kv.n.Load()
	resp, _, err := reader.GetData(ctx, &encoding.GetDataRequest{Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if trips := kv.n.Load() - before; !bytes.Equal(resp.Data, []byte("1")) || trips != 0 {
		t.Errorf("read %q with %d etcd round trips, etcd's watch held back; want \"1\" from the replica", resp.Data, trips)
	}
	if _, _, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("2"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	gw.resume()
	own := awaitOwnChecked(t, b)
	if own.applied < 2 || own.checked != own.applied || own.differed != 0 {
		t.Errorf("the committer applied %d revisions, the feed checked %d, %d differed; want 2 or more, all checked, none differing",
			own.applied, own.checked, own.differed)
	}
	if got, diverged := series(t, reg, "zetcd_own_revisions_total"), series(t, reg, "zetcd_replica_divergences_total"); got != float64(own.applied) || diverged != 0 {
		t.Errorf("zetcd_own_revisions_total %v, zetcd_replica_divergences_total %v; want %d and 0", got, diverged, own.applied)
	}
	checkTreeMatchesEtcd(t, b)
}

// TestOwnRevisionDifferingReloads: when the events the committer applied for its revision are
// not etcd's (a bug, made here by dropping the data key's event), the feed finds the difference
// and loads the replica again, which then holds the node.
func TestOwnRevisionDifferingReloads(t *testing.T) {
	ctx := context.Background()
	metrics, reg := newTestMetrics(t)
	b, _, gw, _ := newGatedBackendWith(t, Config{Metrics: metrics})
	writer := openTestSession(t, b)
	awaitTreeCurrent(t, b)

	gw.pause()
	dataKey := b.keys.data("/x")
	b.tree.mu.Lock()
	b.tree.alterOwn = func(evs []*clientv3.Event) []*clientv3.Event {
		return slices.DeleteFunc(evs, func(ev *clientv3.Event) bool { return string(ev.Kv.Key) == dataKey })
	}
	b.tree.mu.Unlock()
	if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", Data: []byte("1"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok, _ := b.tree.node("/x", false); ok {
		t.Fatal("the replica holds /x though its event was dropped")
	}
	b.tree.mu.Lock()
	b.tree.alterOwn = nil
	b.tree.mu.Unlock()
	gw.resume()

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.applyMu.Lock()
		differed := b.own.differed
		b.applyMu.Unlock()
		if _, _, _, ok, _ := b.tree.node("/x", false); ok && differed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 10s: %d differing revisions found, want 1, and /x not in the replica", differed)
		}
	}
	if diverged := series(t, reg, "zetcd_replica_divergences_total"); diverged != 1 {
		t.Errorf("zetcd_replica_divergences_total %v, want 1", diverged)
	}
	awaitTreeCurrent(t, b)
	checkTreeMatchesEtcd(t, b)
}

// TestOwnRevisionLeftToABusyFeed: while the feed holds the apply lock (applying a revision, or
// reloading the replica, which takes as long as reading the tree from etcd), a write is answered
// without waiting for it, and the feed applies the write's revision.
func TestOwnRevisionLeftToABusyFeed(t *testing.T) {
	ctx := context.Background()
	b, _, _, _ := newGatedBackend(t)
	writer := openTestSession(t, b)
	awaitTreeCurrent(t, b)

	b.applyMu.Lock() // as the feed does
	done := make(chan error, 1)
	go func() {
		_, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", ACL: openACL})
		done <- err
	}()
	select {
	case err := <-done:
		b.applyMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		b.applyMu.Unlock()
		t.Fatal("the create waited for the feed's apply lock")
	}
	awaitTreeCurrent(t, b)
	if _, _, _, ok, err := b.tree.node("/x", false); !ok || err != nil {
		t.Errorf("/x in the replica: %v, %v; want it there", ok, err)
	}
}

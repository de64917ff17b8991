package etcdstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReaperOneLeader: of two backends (two zetcd processes) on one etcd and prefix, exactly one
// reaps; when it closes, the other takes over.
func TestReaperOneLeader(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	newBackend := func() *Store {
		b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	b1, b2 := newBackend(), newBackend()
	waitUntil(t, "a reaper leader", func() bool { return b1.reaper.leader.Load() || b2.reaper.leader.Load() })
	leader, other := b1, b2
	if b2.reaper.leader.Load() {
		leader, other = b2, b1
	}
	if other.reaper.leader.Load() {
		t.Fatal("both backends lead the reaper")
	}
	// Each candidacy is the one key it wrote before campaigning (Campaign writes none).
	keys, err := cli.Get(ctx, b1.keys.reaperElection()+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.Kvs) != 2 {
		t.Errorf("%d election keys for two candidates, want 2: %v", len(keys.Kvs), keys.Kvs)
	}

	// Containers emptied through both backends, and a TTL node, are reaped by the leader only.
	churn := func(s zetcd.Session, name string) {
		t.Helper()
		if _, _, err := s.CreateContainer(ctx, &encoding.CreateRequest{Path: name, ACL: openACL, Flags: encoding.ModeContainer}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: name + "/x", ACL: openACL}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: name + "/x", Version: -1}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(s zetcd.Session, paths ...string) func() bool {
		return func() bool {
			for _, p := range paths {
				if _, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: p}); err == nil {
					return false
				}
			}
			return true
		}
	}
	s1, s2 := openTestSession(t, b1), openTestSession(t, b2)
	var paths []string
	for i := 0; i < 6; i++ {
		s := s1
		if i%2 == 1 {
			s = s2
		}
		p := fmt.Sprintf("/c%d", i)
		churn(s, p)
		paths = append(paths, p)
	}
	if _, _, err := s2.CreateTTL(ctx, &encoding.CreateTTLRequest{Path: "/ttl", ACL: openACL, Flags: encoding.ModePersistentWithTTL, TTL: 100}); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, "/ttl")
	waitUntil(t, "the containers and the TTL node to be reaped", gone(s1, paths...))
	// The reaper counts a node after its delete commits, so a reader can see the node gone
	// first: wait for the count rather than read it at once.
	waitUntil(t, "the leader to count 7 reaped nodes", func() bool { return leader.reaper.reaped.Load() >= 7 })
	if got := leader.reaper.reaped.Load(); got != 7 {
		t.Errorf("leader reaped %d nodes, want 7", got)
	}
	if got := other.reaper.reaped.Load(); got != 0 {
		t.Errorf("the other backend reaped %d nodes, want 0", got)
	}
	root, _, err := s1.Exists(ctx, &encoding.ExistsRequest{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	// 1 + 7 + 6 children created (the 6 /cN/x are not root's), 7 deleted by the reaper.
	if root.Stat.NumChildren != 1 || root.Stat.Cversion != -1+2*7 {
		t.Errorf("root after reaping: %+v", root.Stat)
	}

	// The leader goes away; the other takes over at once (the lease is revoked on close).
	otherSession := s1
	if other == b2 {
		otherSession = s2
	}
	leader.Close()
	waitUntil(t, "the other backend to take over", func() bool { return other.reaper.leader.Load() })
	churn(otherSession, "/after")
	waitUntil(t, "the new leader to reap", gone(otherSession, "/after"))
	waitUntil(t, "the new leader to count its reaped node", func() bool { return other.reaper.reaped.Load() >= 1 })
	if got := other.reaper.reaped.Load(); got != 1 {
		t.Errorf("new leader reaped %d nodes, want 1", got)
	}
}

// TestReaperGuards: a node that changes between the reaper's read and its delete survives.
func TestReaperGuards(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if b.reaper.done != nil {
		t.Fatal("a negative ReapInterval started the reaper")
	}
	s := openTestSession(t, b)
	if _, _, err := s.CreateContainer(ctx, &encoding.CreateRequest{Path: "/c", ACL: openACL, Flags: encoding.ModeContainer}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/c/x", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	st, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	// Read while it had a child: the guarded delete refuses.
	if ok, err := b.reapNode(ctx, "/c", int64(st.Stat.Mzxid)); err != nil || ok {
		t.Fatalf("reaped a container with a child: %v %v", ok, err)
	}
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/c/x", Version: -1}); err != nil {
		t.Fatal(err)
	}
	// setData after the read: refused too.
	if _, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/c", Data: []byte("x"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.reapNode(ctx, "/c", int64(st.Stat.Mzxid)); err != nil || ok {
		t.Fatalf("reaped a container changed since it was read: %v %v", ok, err)
	}
	if n, err := b.reapOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reap pass: %d, %v; want 1", n, err)
	}
	// The session has not seen the reaper's delete: sync, then read.
	if _, _, err := s.Sync(ctx, &encoding.SyncRequest{Path: "/c"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/c"}); err != encoding.ErrNoNode {
		t.Fatalf("container after the pass: %v", err)
	}
	r, err := cli.Get(ctx, b.keys.reapIndexPrefix(), clientv3.WithPrefix())
	if err != nil || r.Count != 0 {
		t.Errorf("reap index after the pass: %v %v", r, err)
	}
}

package etcdstore

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// TestFenceGuardsSeeEveryTreeWrite: with fence guards, a batch's guards fail after any write to
// the tree since its read, also one to a node the batch did not read (per-node guards pass
// then), and every path that writes znodes outside the committer (setACL, a session's end with
// its ephemerals, the reaper) puts the fence: the watch feed, which turns fence guards off at
// the first znode put without it, leaves them on.
func TestFenceGuardsSeeEveryTreeWrite(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: 50 * time.Millisecond, FenceGuards: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s := openTestSession(t, b)
	for _, p := range []string{"/f", "/g"} {
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	guardsHold := func(m *multiState, fence bool) bool {
		t.Helper()
		r, err := cli.Txn(ctx).If(m.guards(fence)...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return r.Succeeded
	}
	m, err := b.readMultiState(ctx, []string{"/f"}, s.(*etcdSession).lastRev)
	if err != nil {
		t.Fatal(err)
	}
	if !guardsHold(m, true) || !guardsHold(m, false) {
		t.Fatal("guards fail with no write since the read")
	}
	if _, _, err := s.SetACL(ctx, &encoding.SetACLRequest{Path: "/g", ACL: openACL, Version: -1}); err != nil {
		t.Fatal(err)
	}
	if guardsHold(m, true) {
		t.Error("fence guards hold after a setACL of another node since the read")
	}
	if !guardsHold(m, false) {
		t.Error("per-node guards fail after a write to a node not read")
	}

	// The other paths that write znodes: a session ending with an ephemeral (its parent's
	// child-delete key), the reaper deleting an emptied container (same).
	owner := openTestSession(t, b)
	if _, _, err := owner.Create(ctx, &encoding.CreateRequest{Path: "/f/e", ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateContainer(ctx, &encoding.CreateRequest{Path: "/c", ACL: openACL, Flags: encoding.ModeContainer}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/c/x", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/c/x", Version: -1}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reaper to delete /c", func() bool {
		_, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/c"})
		return err == encoding.ErrNoNode
	})
	if _, _, err := s.Sync(ctx, &encoding.SyncRequest{Path: "/"}); err != nil {
		t.Fatal(err)
	}
	if !b.fenceGuards.Load() {
		t.Fatal("the watch feed saw a znode written without the fence")
	}
}

// TestFenceGuardsOffAfterUnfencedWrite: a znode put by a writer that does not put the fence
// (here etcd's client directly) turns fence guards off; an expiring lease's deletes do not.
func TestFenceGuardsOffAfterUnfencedWrite(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	b, _, _ := newTestBackendOn(t, cli, Config{FenceGuards: true})
	owner, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := owner.Create(ctx, &encoding.CreateRequest{Path: "/e", ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
		t.Fatal(err)
	}
	revoked, err := cli.Revoke(ctx, clientv3.LeaseID(owner.(*etcdSession).id))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the feed to apply the revoke", func() bool { return b.tree.revision() >= revoked.Header.Revision })
	if !b.fenceGuards.Load() {
		t.Fatal("an expired lease's deletes turned fence guards off")
	}
	put, err := cli.Put(ctx, b.keys.data("/x"), string(encodeDataValue([]byte("d"), 0, zxidIndexes{}, aclValue{ACL: openACL})))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the feed to apply the put", func() bool { return b.tree.revision() >= put.Header.Revision })
	if b.fenceGuards.Load() {
		t.Fatal("a znode put without the fence left fence guards on")
	}
}

package etcdstore

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// syncSession waits until the session's reads see every write committed so far (sync).
func syncSession(t *testing.T, s zetcd.Session) {
	t.Helper()
	if _, _, err := s.Sync(context.Background(), &encoding.SyncRequest{Path: "/"}); err != nil {
		t.Fatal(err)
	}
}

// nodeKeysIn lists the etcd keys under the prefix that name path (its data key, meta keys and
// reap index key).
func nodeKeysIn(t *testing.T, b *Store, cli *clientv3.Client, path string) []string {
	t.Helper()
	r, err := cli.Get(context.Background(), b.keys.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range r.Kvs {
		k := string(kv.Key)
		if k == b.keys.data(path) || strings.HasPrefix(k, b.keys.metaPrefix(path)) || k == b.keys.reapIndex(path) {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestEtcdCreateWritesOneKey: a created znode is one etcd key, its data key, which holds its
// meta (ctime, mode, TTL, ACL); a setACL adds its ACL key, and aversion counts from there.
func TestEtcdCreateWritesOneKey(t *testing.T) {
	ctx := context.Background()
	b, _, cli := newTestBackend(t)
	s := openTestSession(t, b)
	for i, flags := range []encoding.CreateMode{encoding.ModePersistent, encoding.ModeEphemeral} {
		path := []string{"/persistent", "/ephemeral"}[i]
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: path, Data: []byte("d"), ACL: openACL, Flags: flags}); err != nil {
			t.Fatal(err)
		}
		if keys := nodeKeysIn(t, b, cli, path); !reflect.DeepEqual(keys, []string{b.keys.data(path)}) {
			t.Errorf("%s: keys %q after its create, want its data key alone", path, keys)
		}
		readOnly := []encoding.ACL{{Perms: encoding.PermRead | encoding.PermAdmin, ID: openACL[0].ID}}
		res, _, err := s.SetACL(ctx, &encoding.SetACLRequest{Path: path, ACL: readOnly, Version: 0})
		if err != nil || res.Stat.Aversion != 1 {
			t.Fatalf("%s: setACL: %+v, %v", path, res, err)
		}
		if keys := nodeKeysIn(t, b, cli, path); len(keys) != 2 {
			t.Errorf("%s: keys %q after a setACL, want the data and ACL keys", path, keys)
		}
		acl, _, err := s.GetACL(ctx, &encoding.GetACLRequest{Path: path})
		if err != nil || !reflect.DeepEqual(acl.ACL, readOnly) || acl.Stat.Aversion != 1 {
			t.Errorf("%s: getACL after setACL: %+v, %v", path, acl, err)
		}
		if _, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: path, Version: 0}); err != encoding.ErrNoAuth {
			t.Errorf("%s: setData refused by the new ACL: %v, want NoAuth", path, err)
		}
	}
}

// TestEtcdFeedKnowsACLsOfDeletedNodes: the watch feed decides whether to deliver the events of
// a deleted node, and of one a multi deletes and creates again, on the ACL the node had before
// the revision, which the replica hands over as it applies the revision: no etcd read. The node
// created again denies the watcher READ, which its NodeDeleted, decided on the ACL before,
// must not depend on.
func TestEtcdFeedKnowsACLsOfDeletedNodes(t *testing.T) {
	ctx := context.Background()
	b, kv, _ := newTestBackend(t)
	writer := openTestSession(t, b)
	sink := &zetcdtest.Events{}
	watching, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/gone", "/again"} {
		if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			t.Fatal(err)
		}
		syncSession(t, watching)
		if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: p, Watch: true}); err != nil {
			t.Fatal(err)
		}
	}
	aliceOnly := []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "digest", ID: znode.DigestID("alice", "pw")}}}
	before := kv.n.Load()
	zGone, err := writer.Delete(ctx, &encoding.DeleteRequest{Path: "/gone", Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, zAgain, err := writer.Multi(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/again", Version: -1}},
		{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/again", ACL: aliceOnly}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := watching.AwaitEvents(ctx, zAgain); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("NodeDeleted /gone @%d", zGone), fmt.Sprintf("NodeDeleted /again @%d", zAgain)}
	if got := sink.Take(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if n := kv.n.Load() - before; n != 2 {
		t.Errorf("%d etcd round trips for the two writes and their events, want 2 (the writes')", n)
	}
}

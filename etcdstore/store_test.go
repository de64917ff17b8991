package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// countingKV counts etcd round trips: every KV call and every committed Txn is one.
type countingKV struct {
	clientv3.KV
	n atomic.Int64
}

func (c *countingKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	c.n.Add(1)
	return c.KV.Put(ctx, key, val, opts...)
}

func (c *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.n.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

func (c *countingKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	c.n.Add(1)
	return c.KV.Delete(ctx, key, opts...)
}

func (c *countingKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	c.n.Add(1)
	return c.KV.Do(ctx, op)
}

func (c *countingKV) Txn(ctx context.Context) clientv3.Txn {
	return &countingTxn{Txn: c.KV.Txn(ctx), n: &c.n}
}

type countingTxn struct {
	clientv3.Txn
	n *atomic.Int64
}

func (t *countingTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *countingTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *countingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *countingTxn) Commit() (*clientv3.TxnResponse, error) {
	t.n.Add(1)
	return t.Txn.Commit()
}

// startEtcd starts an embedded etcd for one test and returns a client of it.
func startEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	e, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newTestBackend starts an etcd and one backend on it, outside the leader election: the
// elected process's background work (reaping, orphan scans) would show in the round-trip
// counts of the tests that use kv.
func newTestBackend(t *testing.T) (*Store, *countingKV, *clientv3.Client) {
	t.Helper()
	cli := startEtcd(t)
	kv := &countingKV{KV: cli.KV}
	b, err := New(context.Background(), Config{Client: cli, KV: kv, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, kv, cli
}

func openTestSession(t *testing.T, b *Store) zetcd.Session {
	t.Helper()
	s, err := b.Connect(context.Background(), zetcd.ConnectParams{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var openACL = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

func wantCode(t *testing.T, err error, want encoding.ErrCode) {
	t.Helper()
	var got encoding.ErrCode
	if !errors.As(err, &got) || got != want {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

// TestEtcdRoundTrips measures the etcd round trips of each operation in its common case: one
// for every write (a sequential create takes its parent's counter from the replica), none for
// a read.
func TestEtcdRoundTrips(t *testing.T) {
	b, kv, _ := newTestBackend(t)
	s := openTestSession(t, b)
	ctx := context.Background()
	count := func(name string, want int64, f func() error) {
		t.Helper()
		before := kv.n.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := kv.n.Load() - before
		t.Logf("%-22s %d etcd round trip(s)", name, got)
		if got != want {
			t.Errorf("%s: %d etcd round trips, want %d", name, got, want)
		}
	}
	count("create", 1, func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a", Data: []byte("x"), ACL: openACL})
		return err
	})
	count("create2", 1, func() error {
		_, _, err := s.Create2(ctx, &encoding.CreateRequest{Path: "/a/b", ACL: openACL})
		return err
	})
	count("create ephemeral", 1, func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a/e", ACL: openACL, Flags: encoding.ModeEphemeral})
		return err
	})
	count("create sequential", 1, func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a/s-", ACL: openACL, Flags: encoding.ModePersistentSequential})
		return err
	})
	count("create (NodeExists)", 1, func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a", ACL: openACL})
		if errors.Is(err, encoding.ErrNodeExists) {
			return nil
		}
		return err
	})
	count("exists", 0, func() error { _, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/a"}); return err })
	count("getData", 0, func() error { _, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/a"}); return err })
	count("setData", 1, func() error {
		_, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/a", Data: []byte("y"), Version: 0})
		return err
	})
	count("setData (BadVersion)", 1, func() error {
		_, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/a", Data: []byte("y"), Version: 7})
		if errors.Is(err, encoding.ErrBadVersion) {
			return nil
		}
		return err
	})
	count("getChildren", 0, func() error {
		_, _, err := s.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/a"})
		return err
	})
	count("getChildren2", 0, func() error {
		_, _, err := s.GetChildren2(ctx, &encoding.GetChildren2Request{Path: "/a"})
		return err
	})
	count("getACL", 0, func() error { _, _, err := s.GetACL(ctx, &encoding.GetACLRequest{Path: "/a"}); return err })
	count("sync", 1, func() error { _, _, err := s.Sync(ctx, &encoding.SyncRequest{Path: "/a"}); return err })
	count("delete", 1, func() error { _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/a/b", Version: -1}); return err })
	count("delete (NotEmpty)", 1, func() error {
		_, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/a", Version: -1})
		if errors.Is(err, encoding.ErrNotEmpty) {
			return nil
		}
		return err
	})

	// Multi: read from the replica, one guarded commit (multi.go).
	create := func(path string, flags encoding.CreateMode) encoding.MultiOp {
		return encoding.MultiOp{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: path, ACL: openACL, Flags: flags}}
	}
	multi := func(ops ...encoding.MultiOp) func() error {
		return func() error {
			_, _, err := s.Multi(ctx, &encoding.MultiRequest{Ops: ops})
			return err
		}
	}
	count("multi (broker registration)", 1, multi(
		create("/a/broker", encoding.ModeEphemeral),
		encoding.MultiOp{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/a/broker", Data: []byte("b"), Version: 0}}))
	count("multi (failed check)", 1, multi(
		encoding.MultiOp{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: "/a", Version: 9}},
		create("/a/x", 0)))
	count("multi (sequential)", 1, multi(create("/a/m-", encoding.ModePersistentSequential), create("/a/m-", encoding.ModePersistentSequential)))
	count("multi (empty)", 1, multi())
	count("multiRead", 0, func() error {
		_, _, err := s.MultiRead(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/a"}},
			{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/a"}},
		}})
		return err
	})
	// A sequential create takes its parent's counter from the replica, also after a multi
	// moved it; a versioned write to a node a multi left with an offsets key is checked on the
	// replica's keys like any other.
	seq := func() error {
		_, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a/m-", ACL: openACL, Flags: encoding.ModePersistentSequential})
		return err
	}
	count("create sequential (counter moved by the multi)", 1, seq)
	count("create sequential", 1, seq)
	count("setData (offset version)", 1, func() error {
		_, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/a/broker", Data: []byte("c"), Version: 1})
		return err
	})
	count("createContainer", 1, func() error {
		_, _, err := s.CreateContainer(ctx, &encoding.CreateRequest{Path: "/a/c", ACL: openACL, Flags: encoding.ModeContainer})
		return err
	})
	count("createTTL", 1, func() error {
		_, _, err := s.CreateTTL(ctx, &encoding.CreateTTLRequest{Path: "/a/t", ACL: openACL, Flags: encoding.ModePersistentWithTTL, TTL: 1000})
		return err
	})
	count("getAllChildrenNumber", 0, func() error {
		_, _, err := s.GetAllChildrenNumber(ctx, &encoding.GetAllChildrenNumberRequest{Path: "/"})
		return err
	})
	count("reconfig (ReconfigDisabled)", 1, func() error {
		_, _, err := s.Reconfig(ctx, &encoding.ReconfigRequest{})
		if errors.Is(err, encoding.ErrReconfigDisabled) {
			return nil
		}
		return err
	})
}

// TestEtcdStats checks the Stat arithmetic of ZooKeeper's DataTree directly on the backend.
func TestEtcdStats(t *testing.T) {
	b, _, _ := newTestBackend(t)
	s := openTestSession(t, b)
	ctx := context.Background()

	root, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (encoding.Stat{Cversion: -1, NumChildren: 1}); root.Stat != want {
		t.Errorf("fresh / stat = %+v, want %+v", root.Stat, want)
	}
	zk, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/zookeeper"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (encoding.Stat{Cversion: -2, NumChildren: 2}); zk.Stat != want {
		t.Errorf("fresh /zookeeper stat = %+v, want %+v", zk.Stat, want)
	}
	cfg, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/zookeeper/config"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Data == nil || len(cfg.Data) != 0 || cfg.Stat.Aversion != -1 {
		t.Errorf("/zookeeper/config: data %v stat %+v, want empty data and aversion -1", cfg.Data, cfg.Stat)
	}

	c2, z1, err := s.Create2(ctx, &encoding.CreateRequest{Path: "/p", Data: nil, ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Stat.Czxid != z1 || c2.Stat.Mzxid != z1 || c2.Stat.Pzxid != z1 || c2.Stat.Version != 0 || c2.Stat.DataLength != 0 {
		t.Errorf("create2 stat %+v at zxid %v", c2.Stat, z1)
	}
	got, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != nil {
		t.Errorf("null data came back as %q", got.Data)
	}
	if got.Stat != c2.Stat {
		t.Errorf("getData stat %+v != create2 stat %+v", got.Stat, c2.Stat)
	}

	// Children: sequence numbers come from the create counter, which deletes do not lower.
	var names []string
	for i := 0; i < 3; i++ {
		r, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/p/c-", ACL: openACL, Flags: encoding.ModePersistentSequential})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, r.Path)
	}
	if names[0] != "/p/c-0000000000" || names[2] != "/p/c-0000000002" {
		t.Fatalf("sequential names %v", names)
	}
	zDel, err := s.Delete(ctx, &encoding.DeleteRequest{Path: names[1], Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Stat.Cversion != 4 || p.Stat.NumChildren != 2 || p.Stat.Pzxid != zDel || p.Stat.Mzxid != z1 {
		t.Errorf("/p after 3 creates, 1 delete: %+v (delete zxid %v)", p.Stat, zDel)
	}
	r, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/p/c-", ACL: openACL, Flags: encoding.ModePersistentSequential})
	if err != nil {
		t.Fatal(err)
	}
	if r.Path != "/p/c-0000000003" {
		t.Errorf("sequential after delete = %s, want /p/c-0000000003", r.Path)
	}

	// setData moves version and mzxid; setACL moves aversion only.
	sd, zSet, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/p", Data: []byte("hello"), Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	if sd.Stat.Version != 1 || sd.Stat.Mzxid != zSet || sd.Stat.DataLength != 5 || sd.Stat.Czxid != z1 {
		t.Errorf("setData stat %+v", sd.Stat)
	}
	sa, _, err := s.SetACL(ctx, &encoding.SetACLRequest{Path: "/p", ACL: openACL, Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	if sa.Stat.Aversion != 1 || sa.Stat.Mzxid != zSet || sa.Stat.Version != 1 {
		t.Errorf("setACL stat %+v", sa.Stat)
	}
	_, _, err = s.SetACL(ctx, &encoding.SetACLRequest{Path: "/p", ACL: openACL, Version: 0})
	wantCode(t, err, encoding.ErrBadVersion)
}

// TestEtcdErrorOrder checks ZooKeeper's check order and that failed writes consume a zxid.
func TestEtcdErrorOrder(t *testing.T) {
	b, _, _ := newTestBackend(t)
	s := openTestSession(t, b)
	ctx := context.Background()
	create := func(path string, mode encoding.CreateMode, acl []encoding.ACL) (encoding.Zxid, error) {
		_, z, err := s.Create(ctx, &encoding.CreateRequest{Path: path, ACL: acl, Flags: mode})
		return z, err
	}
	if _, err := create("/e", encoding.ModeEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	z0, err := create("/x", encoding.ModePersistent, openACL)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		mode encoding.CreateMode
		acl  []encoding.ACL
		want encoding.ErrCode
	}{
		{"/x", 7, openACL, encoding.ErrBadArguments},
		{"x", 0, openACL, encoding.ErrBadArguments},
		{"/missing/a", 0, nil, encoding.ErrInvalidACL}, // InvalidACL beats NoNode
		{"/missing/a", 0, openACL, encoding.ErrNoNode},
		{"/missing/.", 0, openACL, encoding.ErrNoNode}, // NoNode beats an invalid name
		{"/x/.", 0, openACL, encoding.ErrBadArguments},
		{"/x", 0, openACL, encoding.ErrNodeExists},
		{"/e/child", 0, openACL, encoding.ErrNoChildrenForEphemerals},
		{"/x", encoding.ModePersistentWithTTL, openACL, encoding.ErrBadArguments}, // TTL mode needs createTTL
		{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "world", ID: "someone"}}}, encoding.ErrInvalidACL},
		{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "digest", ID: "nocolon"}}}, encoding.ErrInvalidACL},
		{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "ip", ID: "10.0.0.0/99"}}}, encoding.ErrInvalidACL},
		{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "auth", ID: ""}}}, encoding.ErrInvalidACL},
	}
	last := z0
	for _, c := range cases {
		z, err := create(c.path, c.mode, c.acl)
		wantCode(t, err, c.want)
		if z <= last {
			t.Errorf("create %q (%v): zxid %v did not advance past %v", c.path, c.want, z, last)
		}
		last = z
	}
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/zookeeper", Version: -1}); !errors.Is(err, encoding.ErrBadArguments) {
		t.Errorf("delete /zookeeper: %v, want BadArguments", err)
	}
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/x", Version: 3}); !errors.Is(err, encoding.ErrBadVersion) {
		t.Errorf("delete with wrong version: %v", err)
	}
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/nope", Version: 3}); !errors.Is(err, encoding.ErrNoNode) {
		t.Errorf("delete missing: %v", err)
	}
}

// TestEtcdSessionLifecycle checks close deletes ephemerals in one zxid with exact parent stats,
// that a resumed session needs its password, and that an ended session cannot be resumed.
func TestEtcdSessionLifecycle(t *testing.T) {
	b, _, _ := newTestBackend(t)
	ctx := context.Background()
	s := openTestSession(t, b)
	other := openTestSession(t, b)
	if _, _, err := other.Create(ctx, &encoding.CreateRequest{Path: "/p", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/p/e1", "/p/e2", "/e3"} {
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.ID(), Passwd: make([]byte, 16), Timeout: time.Second}); !errors.Is(err, zetcd.ErrSessionExpired) {
		t.Fatalf("resume with a wrong password: %v, want ErrSessionExpired", err)
	}
	resumed, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.ID(), Passwd: s.Password(), Timeout: time.Second})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	// The original connection lost the session to the resumed one: expiring it does nothing.
	if err := s.Expire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Exists(ctx, &encoding.ExistsRequest{Path: "/p/e1"}); err != nil {
		t.Fatalf("ephemeral gone after a stale expiry: %v", err)
	}
	zClose, err := resumed.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := other.Exists(ctx, &encoding.ExistsRequest{Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Stat.NumChildren != 0 || p.Stat.Cversion != 4 || p.Stat.Pzxid != zClose {
		t.Errorf("/p after close: %+v, want 0 children, cversion 4, pzxid %v", p.Stat, zClose)
	}
	for _, path := range []string{"/p/e1", "/p/e2", "/e3"} {
		if _, _, err := other.Exists(ctx, &encoding.ExistsRequest{Path: path}); !errors.Is(err, encoding.ErrNoNode) {
			t.Errorf("%s after close: %v", path, err)
		}
	}
	if _, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.ID(), Passwd: s.Password(), Timeout: time.Second}); !errors.Is(err, zetcd.ErrSessionExpired) {
		t.Errorf("resume a closed session: %v, want ErrSessionExpired", err)
	}
	if _, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: time.Second, LastZxidSeen: zxidOf(revOf(zClose)+1000, 0)}); !errors.Is(err, zetcd.ErrZxidAhead) {
		t.Errorf("connect with lastZxidSeen ahead: %v, want ErrZxidAhead", err)
	}
}

// newHeldFeedBackend starts an etcd and a backend on it whose watch feed is held back: the test
// starts it with go b.runWatchFeed(start). Until then, requests that need the replica to reach
// their session fail at once (ErrNotServing).
func newHeldFeedBackend(t *testing.T) (b *Store, cli *clientv3.Client, start int64) {
	t.Helper()
	cli = startEtcd(t)
	b, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t), manualWatchFeed: true, treeWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	progress, _ := b.watches.Progress()
	return b, cli, revOf(progress)
}

// TestEtcdWatchFeedCompaction: a watch feed that falls behind an etcd compaction (its stream
// broke while it was behind) resynchronises every registered watch from etcd's state (the
// missed change fires with zxid -1), reloads the replica, and then carries on feeding live
// changes. A connection with a persistent watch, whose missed changes no state shows, is
// closed (the session lives on), so that its client learns of them as of any disconnection.
// The writes go through another zetcd process, so that only the feed brings them.
func TestEtcdWatchFeedCompaction(t *testing.T) {
	ctx := context.Background()
	b, _, gw, cli := newGatedBackend(t)
	wb, _, _ := newTestBackendOn(t, cli, Config{})

	sink := &zetcdtest.Events{}
	watching, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	writer := openTestSession(t, wb)
	if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", Data: []byte("1"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.Sync(ctx, &encoding.SyncRequest{Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.GetData(ctx, &encoding.GetDataRequest{Path: "/x", Watch: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: "/y", Watch: true}); !errors.Is(err, encoding.ErrNoNode) {
		t.Fatal(err)
	}
	recursive, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: &zetcdtest.Events{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recursive.AddWatch(ctx, &encoding.AddWatchRequest{Path: "/", Mode: encoding.AddWatchPersistentRecursive}); err != nil {
		t.Fatal(err)
	}
	// A change the feed will never see as an event: the feed is held, its history compacted
	// away, and its stream broken.
	gw.pause()
	_, zSet, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("2"), Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, zAfter, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/z", ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, revOf(zAfter)); err != nil {
		t.Fatal(err)
	}
	gw.interrupt()
	gw.resume()

	if err := watching.AwaitEvents(ctx, zSet); err != nil {
		t.Fatal(err)
	}
	if got, want := sink.Take(), []string{"NodeDataChanged /x @-1"}; !slices.Equal(got, want) {
		t.Errorf("after resync: %v, want %v", got, want)
	}
	select {
	case <-recursive.Done():
		if err := recursive.Err(); !errors.Is(err, zetcd.ErrNotServing) {
			t.Errorf("the connection with the recursive watch was closed with %v, want ErrNotServing (resume)", err)
		}
		recursive.Detach() // as the front does as it closes the connection
	case <-time.After(10 * time.Second):
		t.Error("the connection whose recursive watch missed changes is still open")
	}
	select {
	case <-watching.Done():
		t.Errorf("the connection whose one-shot watches were caught up was closed: %v", watching.Err())
	default:
	}
	// The feed carries on: a live change fires the exist watch with its own zxid.
	_, zCreate, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/y", ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	if err := watching.AwaitEvents(ctx, zCreate); err != nil {
		t.Fatal(err)
	}
	if got, want := sink.Take(), []string{fmt.Sprintf("NodeCreated /y @%d", zCreate)}; !slices.Equal(got, want) {
		t.Errorf("after resync, live: %v, want %v", got, want)
	}
	// The replica was reloaded at the resync: it has the change it never saw as an event.
	checkTreeMatchesEtcd(t, b)
	// A connection that goes away releases its watches.
	if _, _, err := watching.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/", Watch: true}); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.watches.Stats(); n != 1 {
		t.Errorf("%d watches registered, want 1", n)
	}
	watching.Detach()
	if n, _ := b.watches.Stats(); n != 0 {
		t.Errorf("%d watches left after the connection went away", n)
	}
}

// TestEtcdACLRoundTrips: ACL checks add no etcd round trip, for granted and for refused
// operations, on nodes with non-open ACLs (the ACL comes from the replica); a replica behind
// etcd costs one more.
func TestEtcdACLRoundTrips(t *testing.T) {
	b, kv, cli := newTestBackend(t)
	ctx := context.Background()
	alice := openTestSession(t, b)
	if _, err := alice.Auth(ctx, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("alice:pw")}); err != nil {
		t.Fatal(err)
	}
	anon := openTestSession(t, b)
	count := func(name string, want int64, wantErr encoding.ErrCode, f func() error) {
		t.Helper()
		before := kv.n.Load()
		err := f()
		var code encoding.ErrCode
		if err != nil && !errors.As(err, &code) {
			t.Fatalf("%s: %v", name, err)
		}
		if code != wantErr {
			t.Errorf("%s: %v, want %v", name, err, wantErr)
		}
		got := kv.n.Load() - before
		t.Logf("%-40s %d etcd round trip(s)", name, got)
		if got != want {
			t.Errorf("%s: %d etcd round trips, want %d", name, got, want)
		}
	}
	aliceAll := []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "digest", ID: znode.DigestID("alice", "pw")}}}
	readable := append([]encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}, aliceAll...)
	create := func(s zetcd.Session, path string, acl []encoding.ACL) func() error {
		return func() error { _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: path, ACL: acl}); return err }
	}
	setData := func(s zetcd.Session, path string) func() error {
		return func() error {
			_, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: path, Data: []byte("x"), Version: -1})
			return err
		}
	}
	del := func(s zetcd.Session, path string) func() error {
		return func() error { _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: path, Version: -1}); return err }
	}
	getData := func(s zetcd.Session, path string) func() error {
		return func() error { _, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: path}); return err }
	}
	noAuth := encoding.ErrNoAuth
	count("create (digest ACL)", 1, 0, create(alice, "/s", aliceAll))
	count("create under it (auth ACL)", 1, 0, create(alice, "/s/a", []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "auth"}}}))
	count("create under it, world-readable", 1, 0, create(alice, "/s/r", readable))
	count("create sequential under it", 1, 0, func() error {
		_, _, err := alice.Create(ctx, &encoding.CreateRequest{Path: "/s/q-", ACL: aliceAll, Flags: encoding.ModePersistentSequential})
		return err
	})
	count("setData", 1, 0, setData(alice, "/s/a"))
	count("getData", 0, 0, getData(alice, "/s/a"))
	count("exists", 0, 0, func() error { _, _, err := alice.Exists(ctx, &encoding.ExistsRequest{Path: "/s/a"}); return err })
	count("getChildren", 0, 0, func() error {
		_, _, err := alice.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/s"})
		return err
	})
	count("getChildren2", 0, 0, func() error {
		_, _, err := alice.GetChildren2(ctx, &encoding.GetChildren2Request{Path: "/s"})
		return err
	})
	count("getACL", 0, 0, func() error { _, _, err := alice.GetACL(ctx, &encoding.GetACLRequest{Path: "/s"}); return err })
	count("getAllChildrenNumber", 0, 0, func() error {
		_, _, err := alice.GetAllChildrenNumber(ctx, &encoding.GetAllChildrenNumberRequest{Path: "/s"})
		return err
	})
	count("multi (create, setData)", 1, 0, func() error {
		_, _, err := alice.Multi(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/s/m", ACL: aliceAll}},
			{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/s/m", Version: 0}},
		}})
		return err
	})
	count("multiRead", 0, 0, func() error {
		_, _, err := alice.MultiRead(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/s/a"}},
			{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/s"}},
		}})
		return err
	})
	count("delete", 1, 0, del(alice, "/s/m"))
	count("setACL", 1, 0, func() error {
		_, _, err := alice.SetACL(ctx, &encoding.SetACLRequest{Path: "/s/a", ACL: aliceAll, Version: -1})
		return err
	})

	// Refused: one round trip, which records the failure (a zxid).
	count("create (NoAuth)", 1, noAuth, create(anon, "/s/x", readable))
	count("setData (NoAuth)", 1, noAuth, setData(anon, "/s/r"))
	count("delete (NoAuth)", 1, noAuth, del(anon, "/s/r"))
	count("getData (NoAuth)", 0, noAuth, getData(anon, "/s/a"))
	count("getData (world-readable)", 0, 0, getData(anon, "/s/r"))
	count("getChildren (NoAuth)", 0, noAuth, func() error {
		_, _, err := anon.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/s"})
		return err
	})
	count("multi (NoAuth)", 1, 0, func() error {
		_, _, err := anon.Multi(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/s/r", Version: -1}},
		}})
		return err
	})

	// The super user: no ACL decision, no compare.
	sb, skv, _ := newTestBackendOn(t, cli, Config{SuperDigest: znode.DigestID("super", "secret")})
	super := openTestSession(t, sb)
	if _, err := super.Auth(ctx, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("super:secret")}); err != nil {
		t.Fatal(err)
	}
	kv = skv
	count("setData by super", 1, 0, setData(super, "/s/a"))

	// Another zetcd process, whose feed is held while the ACL changes behind its back: its
	// write is checked on its stale replica, the guard on the ACL fails (a round trip), the
	// write waits for the replica to bring the change (the feed is let go meanwhile) and is
	// decided on the new ACL (a second round trip).
	ob, okv, ogw := newGatedBackendOn(t, cli)
	other := openTestSession(t, ob)
	if _, err := other.Auth(ctx, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("alice:pw")}); err != nil {
		t.Fatal(err)
	}
	kv = okv
	count("setData (another process)", 1, 0, setData(other, "/s/a"))
	behindItsBack := func(acl []encoding.ACL) {
		t.Helper()
		ogw.pause()
		if _, _, err := alice.SetACL(ctx, &encoding.SetACLRequest{Path: "/s/a", ACL: acl, Version: -1}); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(100*time.Millisecond, ogw.resume)
	}
	behindItsBack(readable)
	count("setData (stale replica, still granted)", 2, 0, setData(other, "/s/a"))
	behindItsBack([]encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}})
	count("setData (stale replica, now refused)", 2, noAuth, setData(other, "/s/a"))
}

// newTestBackendOn starts another backend (another zetcd process) on cli's etcd.
func newTestBackendOn(t *testing.T, cli *clientv3.Client, cfg Config) (*Store, *countingKV, *clientv3.Client) {
	t.Helper()
	kv := &countingKV{KV: cli.KV}
	cfg.Client, cfg.KV, cfg.Logger, cfg.ReapInterval = cli, kv, zaptest.NewLogger(t), -1
	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, kv, cli
}

// TestEtcdPersistentWatchArmedNow: a persistent watch set by addWatch or re-armed by setWatches2
// fires for no change acknowledged before it was set, even while this process's watch feed is
// behind (here: not yet started) — as on ZooKeeper, where the watch is set after every write
// already answered. The writes go through another zetcd process on the same etcd.
func TestEtcdPersistentWatchArmedNow(t *testing.T) {
	ctx := context.Background()
	b, cli, start := newHeldFeedBackend(t)
	wb, _, _ := newTestBackendOn(t, cli, Config{})
	writer := openTestSession(t, wb)

	sink := &zetcdtest.Events{}
	watching, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/added", "/rearmed", "/rearmed-rec"} {
		if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := watching.AddWatch(ctx, &encoding.AddWatchRequest{Path: "/added", Mode: encoding.AddWatchPersistent}); err != nil {
		t.Fatal(err)
	}
	if _, err := watching.SetWatches2(ctx, &encoding.SetWatches2{
		DataWatches: []string{}, ExistWatches: []string{}, ChildWatches: []string{},
		PersistentWatches: []string{"/rearmed"}, PersistentRecursiveWatches: []string{"/rearmed-rec"},
	}); err != nil {
		t.Fatal(err)
	}
	go b.runWatchFeed(start)

	var want []string
	var last encoding.Zxid
	for _, p := range []string{"/added", "/rearmed", "/rearmed-rec"} {
		_, z, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: p, Data: []byte("x"), Version: -1})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("NodeDataChanged %s @%d", p, z))
		last = z
	}
	if err := watching.AwaitEvents(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := sink.Take(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v (no NodeCreated from before the watches were set)", got, want)
	}
}

// TestEtcdDeleteLeavesNoKeys deletes a node of every kind, and nodes that have had children and
// sequential children, and finds none of their keys left in etcd: a delete names the keys it
// read, so a key it does not name would stay behind for good.
func TestEtcdDeleteLeavesNoKeys(t *testing.T) {
	b, _, cli := newTestBackend(t)
	s := openTestSession(t, b)
	ctx := context.Background()
	must := func(_ any, _ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Create(ctx, &encoding.CreateRequest{Path: "/plain", Data: []byte("x"), ACL: openACL}))
	must(s.Create(ctx, &encoding.CreateRequest{Path: "/eph", ACL: openACL, Flags: encoding.ModeEphemeral}))
	must(s.CreateContainer(ctx, &encoding.CreateRequest{Path: "/box", ACL: openACL, Flags: encoding.ModeContainer}))
	must(s.CreateTTL(ctx, &encoding.CreateTTLRequest{Path: "/ttl", ACL: openACL, Flags: encoding.ModePersistentWithTTL, TTL: 60000}))
	must(s.Create(ctx, &encoding.CreateRequest{Path: "/dir", ACL: openACL}))
	must(s.Create(ctx, &encoding.CreateRequest{Path: "/seq", ACL: openACL}))
	for _, parent := range []string{"/box", "/ttl", "/dir"} {
		must(s.Create(ctx, &encoding.CreateRequest{Path: parent + "/child", ACL: openACL}))
		if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: parent + "/child", Version: -1}); err != nil {
			t.Fatal(err)
		}
	}
	must(s.Create(ctx, &encoding.CreateRequest{Path: "/seq/n-", ACL: openACL, Flags: encoding.ModePersistentSequential}))
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/seq/n-0000000000", Version: -1}); err != nil {
		t.Fatal(err)
	}
	paths := []string{"/plain", "/eph", "/box", "/ttl", "/dir", "/seq"}
	for _, p := range paths {
		if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: p, Version: -1}); err != nil {
			t.Fatalf("delete %s: %v", p, err)
		}
	}
	r, err := cli.Get(ctx, b.keys.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range r.Kvs {
		for _, p := range paths {
			if strings.Contains(string(kv.Key), p) {
				t.Errorf("key %q of the deleted node %s is still in etcd", kv.Key, p)
			}
		}
	}
}

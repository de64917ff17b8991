package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// gatedWatcher is the etcd client's Watcher with a gate on the responses it delivers: while
// paused, the watch feed receives nothing (etcd's events wait, in order, behind the gate).
type gatedWatcher struct {
	clientv3.Watcher
	open       chan struct{} // holds a token while the gate is open
	gen        atomic.Int64  // moved on by interrupt
	watches    atomic.Int64  // Watch calls
	reconnects chan struct{} // reconnect's
}

func newGatedWatcher(w clientv3.Watcher) *gatedWatcher {
	g := &gatedWatcher{Watcher: w, open: make(chan struct{}, 1), reconnects: make(chan struct{})}
	g.open <- struct{}{}
	return g
}

func (g *gatedWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	g.watches.Add(1)
	gen := g.gen.Load()
	next := clientv3.OpGet(key, opts...).Rev()
	ctx, cancel := context.WithCancel(ctx)
	innerCtx, innerCancel := context.WithCancel(ctx)
	in := g.Watcher.Watch(innerCtx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		defer cancel()
		for {
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-in:
			case <-g.reconnects:
				// As the etcd client resumes a watch on a new stream: from the revision
				// after the last one it delivered.
				innerCancel()
				innerCtx, innerCancel = context.WithCancel(ctx)
				in = g.Watcher.Watch(innerCtx, key, append(opts, clientv3.WithRev(next))...)
				continue
			}
			if !ok {
				return
			}
			g.open <- <-g.open // waits while paused
			if g.gen.Load() != gen {
				return // interrupted
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
			switch {
			case resp.IsProgressNotify():
				next = max(next, resp.Header.Revision+1)
			case len(resp.Events) > 0:
				next = max(next, resp.Events[len(resp.Events)-1].Kv.ModRevision+1)
			}
		}
	}()
	return out
}

// reconnect reopens the open watch on etcd from the revision after the last it delivered, as
// the etcd client resumes its watches when their stream breaks: the feed is not told.
func (g *gatedWatcher) reconnect() { g.reconnects <- struct{}{} }

func (g *gatedWatcher) pause()  { <-g.open }
func (g *gatedWatcher) resume() { g.open <- struct{}{} }

// interrupt breaks the watches open now as a broken stream would: what they hold behind the
// gate, or receive next, is never delivered, and the feed watches again from where it was.
func (g *gatedWatcher) interrupt() { g.gen.Add(1) }

// newGatedBackend starts a backend whose watch feed can be paused; reads wait at most 300 ms
// for the replica.
func newGatedBackend(t *testing.T) (*Store, *countingKV, *gatedWatcher, *clientv3.Client) {
	t.Helper()
	return newGatedBackendWith(t, Config{})
}

// newGatedBackendWith is newGatedBackend with cfg's Metrics.
func newGatedBackendWith(t *testing.T, cfg Config) (*Store, *countingKV, *gatedWatcher, *clientv3.Client) {
	t.Helper()
	cli := startEtcd(t)
	gw := newGatedWatcher(cli.Watcher)
	kv := &countingKV{KV: cli.KV}
	b, err := New(context.Background(), Config{Client: cli, KV: kv, Watcher: gw, Logger: zaptest.NewLogger(t), ReapInterval: -1, treeWait: 300 * time.Millisecond, Metrics: cfg.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, kv, gw, cli
}

// newGatedBackendOn starts another backend (another zetcd process) on cli's etcd whose watch
// feed can be paused.
func newGatedBackendOn(t *testing.T, cli *clientv3.Client) (*Store, *countingKV, *gatedWatcher) {
	t.Helper()
	gw := newGatedWatcher(cli.Watcher)
	b, kv, _ := newTestBackendOn(t, cli, Config{Watcher: gw})
	return b, kv, gw
}

// awaitTree waits until the replica has applied rev.
func awaitTree(t *testing.T, b *Store, rev encoding.Zxid) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); b.tree.revision() < revOf(rev); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not reach revision %d within 10s (at %d)", rev, b.tree.revision())
		}
	}
}

// TestTreeReadsNeverGoBack: reads are answered from the replica with no etcd round trip, never
// from a replica behind what a read must see (a write this process acknowledged, to any of its
// sessions; a sync). A write made through another zetcd may be missing from a read until the
// replica applies it or the session syncs, as on a ZooKeeper follower that has not applied the
// newest writes yet. While the replica cannot get where a request needs it (here the feed is
// held, as when etcd is out of reach), the request is not served (ErrNotServing: the connection
// closes, as a ZooKeeper follower without a leader closes its clients'), and it is served again
// once the feed comes back.
func TestTreeReadsNeverGoBack(t *testing.T) {
	ctx := context.Background()
	b, kv, gw, cli := newGatedBackend(t)
	other, _, _ := newTestBackendOn(t, cli, Config{})
	writer, reader, elsewhere := openTestSession(t, b), openTestSession(t, b), openTestSession(t, other)
	getData := func(s zetcd.Session) (string, int64) {
		t.Helper()
		before := kv.n.Load()
		resp, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/x"})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Data), kv.n.Load() - before
	}
	notServing := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, zetcd.ErrNotServing) {
			t.Errorf("%s with the feed held: %v, want ErrNotServing", what, err)
		}
	}
	_, z1, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", Data: []byte("1"), ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	awaitTree(t, b, z1)
	if got, trips := getData(reader); got != "1" || trips != 0 {
		t.Fatalf("read %q with %d etcd round trips; want \"1\" from the replica", got, trips)
	}

	gw.pause()
	if _, _, err := elsewhere.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("2"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	if got, trips := getData(reader); got != "1" || trips != 0 {
		t.Errorf("read %q with %d round trips after another zetcd wrote \"2\"; want \"1\" from the replica", got, trips)
	}
	_, _, err = reader.Sync(ctx, &encoding.SyncRequest{Path: "/x"})
	notServing("sync", err)
	// A write is checked on the replica; its guards meet the other zetcd's write, which the
	// replica cannot show.
	_, _, err = writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("3"), Version: 1})
	notServing("setData", err)
	// Nothing the failed requests saw moved the session's floor.
	if got, trips := getData(reader); got != "1" || trips != 0 {
		t.Errorf("read %q with %d round trips after a failed sync; want \"1\" from the replica", got, trips)
	}

	// The feed comes back while a sync waits for it.
	time.AfterFunc(100*time.Millisecond, gw.resume)
	if _, _, err := reader.Sync(ctx, &encoding.SyncRequest{Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	if got, trips := getData(reader); got != "2" || trips != 0 {
		t.Errorf("a read after sync: %q with %d round trips, want \"2\" from the replica", got, trips)
	}
	_, z3, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("3"), Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []zetcd.Session{writer, reader} {
		if got, trips := getData(s); got != "3" || trips != 0 {
			t.Errorf("read %q with %d round trips after this zetcd acknowledged \"3\" at %d; want \"3\" from the replica", got, trips, z3)
		}
	}
}

// TestLastZxidAfterWatchEvents: LastZxid, which the front puts in pings, is the newest zxid
// this process has answered, but for a session that holds a watch it goes no further than the
// feed has handed over events: a client takes the zxid as seen, and asks setWatches only for
// the changes after it when it reconnects (Session.LastZxid). Here the feed is held while
// another zetcd changes the watched node and this one answers a later write.
func TestLastZxidAfterWatchEvents(t *testing.T) {
	ctx := context.Background()
	b, _, gw, cli := newGatedBackend(t)
	other, _, _ := newTestBackendOn(t, cli, Config{})
	sink := &zetcdtest.Events{}
	watcher, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	writer, elsewhere := openTestSession(t, b), openTestSession(t, other)
	_, z1, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	awaitTree(t, b, z1)
	if _, _, err := watcher.GetData(ctx, &encoding.GetDataRequest{Path: "/x", Watch: true}); err != nil {
		t.Fatal(err)
	}

	gw.pause()
	st, _, err := elsewhere.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("2"), Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, z3, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/y", ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	if z := writer.LastZxid(); z < z3 {
		t.Errorf("LastZxid of a session without watches %v, want the newest answer %v", z, z3)
	}
	if z := watcher.LastZxid(); z >= st.Stat.Mzxid {
		t.Errorf("LastZxid of the watching session %v with its event at %v held back", z, st.Stat.Mzxid)
	}

	gw.resume()
	for deadline := time.Now().Add(10 * time.Second); watcher.LastZxid() < z3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("LastZxid of the watching session still %v after the feed resumed, want %v", watcher.LastZxid(), z3)
		}
	}
	want := fmt.Sprintf("%v /x @%d", encoding.EventNodeDataChanged, st.Stat.Mzxid)
	if got := sink.Take(); !slices.Equal(got, []string{want}) {
		t.Errorf("events once LastZxid reached %v: %q, want %q", z3, got, want)
	}
}

// TestWatchFeedStall: a feed that hears nothing from etcd, not even the progress notification
// its heartbeat asks for (its stream held, as on a member that stopped answering), watches
// again after feedStall, and again while it stays quiet; once etcd is heard, the replica
// catches up with what was written meanwhile, and an idle feed is not restarted (its heartbeat
// is answered).
func TestWatchFeedStall(t *testing.T) {
	b, _, gw, cli := newGatedBackend(t)
	awaitTreeCurrent(t, b)
	idle := gw.watches.Load()
	time.Sleep(feedStall + feedHeartbeat)
	if n := gw.watches.Load(); n != idle {
		t.Fatalf("an idle feed watched again (%d watches, %d before)", n, idle)
	}
	gw.pause()
	held := time.Now()
	if _, err := cli.Put(context.Background(), b.keys.data("/meanwhile"), ""); err != nil {
		t.Fatal(err)
	}
	var again []time.Time // when the feed was seen to have watched again, once and twice
	for len(again) < 2 {
		if time.Since(held) > 4*feedStall {
			t.Fatalf("%d watches %v into the silence; want the feed to have watched again twice", gw.watches.Load()-idle, 4*feedStall)
		}
		if gw.watches.Load() >= idle+int64(len(again))+1 {
			again = append(again, time.Now())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := again[1].Sub(again[0]); d < feedStall-200*time.Millisecond {
		t.Errorf("watched again %v after the last time; want no sooner than feedStall (%v)", d, feedStall)
	}
	// Cut off, the counts the four-letter words show may be stale by any amount.
	if _, err := b.Stats(context.Background()); !errors.Is(err, zetcd.ErrNotServing) {
		t.Errorf("stats of a feed that has heard nothing for %v: %v, want ErrNotServing", time.Since(held).Round(time.Millisecond), err)
	}
	gw.resume()
	awaitTreeCurrent(t, b)
	if _, err := b.Stats(context.Background()); err != nil {
		t.Errorf("stats once the feed hears etcd again: %v", err)
	}
}

// TestWatchFeedQuietAfterResume: a feed whose watch etcd's client resumed past etcd's newest
// revision (its stream broke, and nothing was written since), which etcd's progress requests
// go unanswered for, is not taken for stalled: it does not watch again, and the store serves.
func TestWatchFeedQuietAfterResume(t *testing.T) {
	b, kv, gw, cli := newGatedBackend(t)
	if _, err := cli.Put(context.Background(), b.keys.data("/before"), ""); err != nil {
		t.Fatal(err)
	}
	awaitTreeCurrent(t, b)
	watches := gw.watches.Load()
	gw.reconnect()
	trips := kv.n.Load()
	time.Sleep(feedStall + feedHeartbeat)
	if n := gw.watches.Load(); n != watches {
		t.Errorf("a current feed watched again %d times in %v of quiet", n-watches, feedStall+feedHeartbeat)
	}
	if _, err := b.Stats(context.Background()); err != nil {
		t.Errorf("stats of a current, quiet feed: %v", err)
	}
	// It learnt it had missed nothing by reading the current revision, once a heartbeat.
	if n := kv.n.Load() - trips; n < 1 || n > 2 {
		t.Errorf("%d etcd round trips in %v of quiet, want 1 or 2", n, feedStall+feedHeartbeat)
	}
	if _, err := cli.Put(context.Background(), b.keys.data("/after"), ""); err != nil {
		t.Fatal(err)
	}
	awaitTreeCurrent(t, b)
}

// TestTreeMatchesEtcd: after a random workload of every kind of write from two sessions (creates
// of every mode, setData, delete, setACL, multis that change a node twice), the replica holds
// exactly what a fresh load from etcd at its revision holds, and every node reads the same
// from the replica as from etcd.
func TestTreeMatchesEtcd(t *testing.T) {
	ctx := context.Background()
	b, _, gw, _ := newGatedBackend(t)
	sessions := []zetcd.Session{openTestSession(t, b), openTestSession(t, b)}
	rng := rand.New(rand.NewPCG(1, 2))
	// etcd's watch is held back but for the sessions' end and start, so that the replica
	// has every write's revision from the committer (own.go) and the feed checks them.
	awaitTreeCurrent(t, b)
	gw.pause()
	paths := []string{"/a", "/a/b", "/a/c", "/d", "/d/e", "/a/b/f"}
	modes := []encoding.CreateMode{encoding.ModePersistent, encoding.ModeEphemeral, encoding.ModePersistentSequential, encoding.ModeEphemeralSequential, encoding.ModeContainer}
	for i := range 600 {
		s := sessions[rng.IntN(len(sessions))]
		p := paths[rng.IntN(len(paths))]
		data := []byte(fmt.Sprint(i))
		switch rng.IntN(6) {
		case 0, 1:
			s.Create(ctx, &encoding.CreateRequest{Path: p, Data: data, ACL: openACL, Flags: modes[rng.IntN(len(modes))]})
		case 2:
			s.SetData(ctx, &encoding.SetDataRequest{Path: p, Data: data, Version: -1})
		case 3:
			s.Delete(ctx, &encoding.DeleteRequest{Path: p, Version: -1})
		case 4:
			s.SetACL(ctx, &encoding.SetACLRequest{Path: p, ACL: openACL, Version: -1})
		case 5:
			s.Multi(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
				{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: p + "/m", ACL: openACL}},
				{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: p + "/m", Data: data, Version: -1}},
				{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: p + "/m", Version: -1}},
				{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: p + "/m", Data: data, ACL: openACL}},
			}})
		}
		if i == 300 {
			// One session ends: its ephemerals go in one transaction.
			gw.resume()
			if _, err := sessions[1].Close(ctx); err != nil {
				t.Fatal(err)
			}
			sessions[1] = openTestSession(t, b)
			awaitTreeCurrent(t, b)
			gw.pause()
		}
	}
	gw.resume()
	awaitTreeCurrent(t, b)
	checkTreeMatchesEtcd(t, b)
	// The committer applied its own revisions (own.go), and etcd's events were the same.
	if own := awaitOwnChecked(t, b); own.applied < 500 || own.checked != own.applied || own.differed != 0 {
		t.Errorf("the committer applied %d revisions, the feed checked %d, %d differed; want 500 or more, all checked, none differing",
			own.applied, own.checked, own.differed)
	}
}

// awaitTreeCurrent waits for the replica to reach etcd's current revision.
func awaitTreeCurrent(t *testing.T, b *Store) {
	t.Helper()
	rev, err := b.currentRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	awaitTree(t, b, zxidAt(rev))
}

// checkTreeMatchesEtcd compares the replica with a fresh load from etcd at its revision: every
// entry's keys and children, and the counters; and every node's keys decode (a Stat derives
// from the keys and the number of children alone).
func checkTreeMatchesEtcd(t *testing.T, b *Store) {
	t.Helper()
	ctx := context.Background()
	b.tree.mu.RLock()
	rev, tr := b.tree.rev, b.tree.t
	b.tree.mu.RUnlock()
	nodes := tr.nodes
	fresh := newReplica(b.keys, zaptest.NewLogger(t))
	fresh.pageSize = 7 // many pages
	if err := fresh.load(ctx, b.kv, rev); err != nil {
		t.Fatal(err)
	}
	// Parent by parent reads what a plain read of every key does.
	byParent, err := fresh.loadByParent(ctx, b.kv, rev, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := fresh.loadAll(ctx, b.kv, rev, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The trees' ACL tables are what each load met first; the nodes' lists are compared.
	byParent.acls, all.acls = aclTable{}, aclTable{}
	if !reflect.DeepEqual(byParent, all) {
		t.Errorf("loading parent by parent gives %d nodes (%d entries), reading every key %d (%d)",
			byParent.count, len(byParent.nodes), all.count, len(all.nodes))
	}
	if len(fresh.t.nodes) != len(nodes) {
		t.Errorf("the replica has %d entries, a fresh load %d", len(nodes), len(fresh.t.nodes))
	}
	if tr.count != fresh.t.count || tr.dataSize != fresh.t.dataSize || tr.sessions != fresh.t.sessions || !reflect.DeepEqual(tr.ephemerals, fresh.t.ephemerals) {
		t.Errorf("the replica counts %d nodes, %d bytes, %d sessions, ephemerals %v; a fresh load %d, %d, %d, %v",
			tr.count, tr.dataSize, tr.sessions, tr.ephemerals, fresh.t.count, fresh.t.dataSize, fresh.t.sessions, fresh.t.ephemerals)
	}
	for path, want := range fresh.t.nodes {
		got := nodes[path]
		if got == nil || !reflect.DeepEqual(got.childNames(), want.childNames()) || !reflect.DeepEqual(got.keys(), want.keys()) {
			t.Errorf("%s: the replica's entry differs from a fresh load's:\n%+v\n%+v", path, got, want)
			continue
		}
		if !want.exists() {
			continue
		}
		keys := got.keys()
		if _, err := keys.node(path, int64(got.numChildren()), nil); err != nil {
			t.Errorf("%s: the replica's keys do not decode: %v", path, err)
		}
	}
}

// TestReplicaLoadFallsBack: a data key the parent-by-parent load cannot reach (its parent has no
// child-create key, which no zetcd write leaves) is still loaded, by reading every key.
func TestReplicaLoadFallsBack(t *testing.T) {
	ctx := context.Background()
	b, _, _ := newTestBackend(t)
	s := openTestSession(t, b)
	if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/a", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	r, err := b.kv.Txn(ctx).Then(
		clientv3.OpPut(b.keys.data("/a/b"), encodeDataValue([]byte("x"), 1, zxidIndexes{}, aclValue{ACL: openACL})),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	fresh := newReplica(b.keys, zaptest.NewLogger(t))
	if err := fresh.load(ctx, b.kv, r.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok, err := fresh.node("/a/b", false); !ok || err != nil {
		t.Errorf("/a/b after the load: exists %v, %v", ok, err)
	}
}

// TestReplicaLoadPastDeadline: a load is not bounded by its caller's deadline (a start's): one
// whose deadline passed before it began reads the whole tree all the same.
func TestReplicaLoadPastDeadline(t *testing.T) {
	b, _, _ := newTestBackend(t)
	s := openTestSession(t, b)
	if _, _, err := s.Create(context.Background(), &encoding.CreateRequest{Path: "/a", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	r, err := b.kv.Get(context.Background(), b.keys.data("/a"))
	if err != nil {
		t.Fatal(err)
	}
	rev := r.Header.Revision
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	fresh := newReplica(b.keys, zaptest.NewLogger(t))
	if err := fresh.load(ctx, b.kv, rev); err != nil {
		t.Fatalf("a load past its caller's deadline: %v", err)
	}
	if _, _, _, ok, err := fresh.node("/a", false); !ok || err != nil {
		t.Errorf("/a after the load: exists %v, %v", ok, err)
	}
}

// TestTreeLargeDirectory: a node with more children than childSetMax, and then fewer than a
// quarter of it, reads the same from the replica as from etcd.
func TestTreeLargeDirectory(t *testing.T) {
	ctx := context.Background()
	b, _, _ := newTestBackend(t)
	s := openTestSession(t, b)
	if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/big", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	const n = childSetMax + 200
	ops := func(i0, i1 int, op encoding.Op) []encoding.MultiOp {
		var out []encoding.MultiOp
		for i := i0; i < i1; i++ {
			p := fmt.Sprintf("/big/c%05d", i)
			if op == encoding.OpCreate {
				out = append(out, encoding.MultiOp{Op: op, Record: &encoding.CreateRequest{Path: p, ACL: openACL}})
			} else {
				out = append(out, encoding.MultiOp{Op: op, Record: &encoding.DeleteRequest{Path: p, Version: -1}})
			}
		}
		return out
	}
	run := func(o []encoding.MultiOp) {
		t.Helper()
		if _, _, err := s.Multi(ctx, &encoding.MultiRequest{Ops: o}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 300 {
		run(ops(i, min(i+300, n), encoding.OpCreate))
	}
	sync := func() { t.Helper(); awaitTreeCurrent(t, b) }
	sync()
	if rn := b.tree.t.nodes["/big"]; rn == nil || rn.children == nil || rn.children.set == nil {
		t.Fatal("/big's children are not a set")
	}
	checkTreeMatchesEtcd(t, b)
	for i := 0; i < n-100; i += 300 {
		run(ops(i, min(i+300, n-100), encoding.OpDelete))
	}
	sync()
	if rn := b.tree.t.nodes["/big"]; rn == nil || rn.children == nil || rn.children.set != nil || rn.numChildren() != 100 {
		t.Fatal("/big's 100 children are not a sorted slice")
	}
	checkTreeMatchesEtcd(t, b)
}

// TestReadWatchMatchesRead: the watch a read sets fires for exactly the changes after the state
// the read answered from, however the feed's applying of another zetcd's write races the read:
// if the read saw the write, the write fires nothing; if it did not, exactly one event. Rounds
// of a getData with a watch on one zetcd, at random moments while another zetcd sets the node.
func TestReadWatchMatchesRead(t *testing.T) {
	ctx := context.Background()
	b, _, cli := newTestBackend(t)
	other, _, _ := newTestBackendOn(t, cli, Config{})
	sink := &zetcdtest.Events{}
	reader, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	writer := openTestSession(t, other)
	if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reader.Sync(ctx, &encoding.SyncRequest{Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	// race runs write on the other zetcd while read reads with a watch on this one, waits
	// until the write's events are out, and checks them: saw reports whether the read saw it.
	race := func(round int, write func() encoding.Zxid, read func() (saw func(z encoding.Zxid) bool), event string) (sawIt bool) {
		t.Helper()
		written := make(chan encoding.Zxid, 1)
		go func() { written <- write() }()
		saw := read()
		z := <-written
		if err := reader.AwaitEvents(ctx, z); err != nil {
			t.Fatal(err)
		}
		var want []string
		if sawIt = saw(z); !sawIt {
			want = []string{fmt.Sprintf("%s @%d", event, z)}
		}
		if got := sink.Take(); !slices.Equal(got, want) {
			t.Fatalf("round %d: the read saw the write at %d: %v; events %v, want %v", round, z, sawIt, got, want)
		}
		return sawIt
	}
	counts := map[bool]int{}
	for i := 0; i < 150; i++ {
		sawIt := race(i, func() encoding.Zxid {
			_, z, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte{byte(i)}, Version: -1})
			if err != nil {
				t.Error(err)
			}
			return z
		}, func() func(encoding.Zxid) bool {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			resp, _, err := reader.GetData(ctx, &encoding.GetDataRequest{Path: "/x", Watch: true})
			if err != nil {
				t.Fatal(err)
			}
			return func(z encoding.Zxid) bool { return resp.Stat.Mzxid >= z }
		}, "NodeDataChanged /x")
		counts[sawIt]++
		if sawIt {
			// The watch is still armed: the next round's set would fire it for this read.
			if _, _, err := reader.Exists(ctx, &encoding.ExistsRequest{Path: "/x"}); err != nil {
				t.Fatal(err)
			}
			_, z, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Version: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := reader.AwaitEvents(ctx, z); err != nil {
				t.Fatal(err)
			}
			sink.Take()
		}
	}
	t.Logf("getData: the read saw the write in %d rounds, not in %d", counts[true], counts[false])
	if counts[false] == 0 {
		t.Error("no round had the read before the write: the race was never run")
	}
}

// TestReplicaLoadCountsResumedSessions: a replica loaded after a session was resumed (its key
// rewritten) counts it, and its end takes the count back to where it was.
func TestReplicaLoadCountsResumedSessions(t *testing.T) {
	ctx := context.Background()
	a, _, cli := newTestBackend(t)
	s := openTestSession(t, a)
	if _, err := a.Connect(ctx, zetcd.ConnectParams{SessionID: s.ID(), Passwd: s.Password(), Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	b, _, _ := newTestBackendOn(t, cli, Config{})
	awaitTreeCurrent(t, a)
	awaitTreeCurrent(t, b)
	before := b.tree.backendStats().Sessions
	if got := a.tree.backendStats().Sessions; got != before {
		t.Errorf("sessions: %d on the replica that saw them come, %d on the one loaded after", got, before)
	}
	closer, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.ID(), Passwd: s.Password(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closer.Close(ctx); err != nil {
		t.Fatal(err)
	}
	awaitTreeCurrent(t, b)
	if got := b.tree.backendStats().Sessions; got != before-1 {
		t.Errorf("sessions after one closed: %d, want %d", got, before-1)
	}
}

// TestAppliedRevisionIsWhatTheFeedReceived: the revision the compactor may compact up to is the
// newest the watch feed has received from etcd, not the replica's, which the committer moves on
// with its own writes first: compacting there and then breaking the feed's stream costs no
// resync (which would close the connection of a persistent watch).
func TestAppliedRevisionIsWhatTheFeedReceived(t *testing.T) {
	ctx := context.Background()
	b, _, gw, cli := newGatedBackend(t)
	watching, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: &zetcdtest.Events{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watching.AddWatch(ctx, &encoding.AddWatchRequest{Path: "/", Mode: encoding.AddWatchPersistentRecursive}); err != nil {
		t.Fatal(err)
	}
	s := openTestSession(t, b)
	awaitTreeCurrent(t, b)
	received := b.AppliedRevision()

	gw.pause()
	for i := range 5 {
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: fmt.Sprintf("/n%d", i), ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.AppliedRevision(); got != received {
		t.Errorf("AppliedRevision %d while the feed, held, received nothing after %d", got, received)
	}
	if _, err := cli.Compact(ctx, b.AppliedRevision()); err != nil {
		t.Fatal(err)
	}
	gw.interrupt()
	gw.resume()
	_, z, err := s.Create(ctx, &encoding.CreateRequest{Path: "/last", ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); b.AppliedRevision() < revOf(z); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the feed never received revision %d (at %d)", revOf(z), b.AppliedRevision())
		}
	}
	select {
	case <-watching.Done():
		t.Errorf("the feed resynchronised (the persistent watch's connection closed: %v)", watching.Err())
	default:
	}
}

// BenchmarkReplicaLoad times the replica's load at start (replica.load) on a tree of
// ZETCD_BENCH_ZNODES znodes (default 100,000) of 128 bytes, 1,000 per parent, written straight
// into an embedded etcd read through the in-process client, as zetcd reads its own etcd.
func BenchmarkReplicaLoad(b *testing.B) {
	znodes := 100000
	if v := os.Getenv("ZETCD_BENCH_ZNODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		znodes = n
	}
	e, err := embedetcd.Start(embedetcd.Config{Dir: b.TempDir(), QuotaBackendBytes: 8 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	cli, leases := e.InProcessClient()
	b.Cleanup(func() { cli.Close() })
	ctx := context.Background()
	s, err := New(ctx, Config{Client: cli, LeaseClient: leases, Logger: zap.NewNop(), ReapInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	k := s.keys
	data := bytes.Repeat([]byte{'a'}, 128)
	value := func() string { return encodeDataValue(data, 1, zxidIndexes{}, aclValue{ACL: openACL}) }
	var ops []clientv3.Op
	flush := func() {
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	ops = append(ops, clientv3.OpPut(k.data("/b"), value()), clientv3.OpPut(k.childCreates("/b"), ""))
	for i := range znodes {
		parent := fmt.Sprintf("/b/%04d", i/1000)
		if i%1000 == 0 {
			ops = append(ops, clientv3.OpPut(k.data(parent), value()), clientv3.OpPut(k.childCreates(parent), ""))
		}
		ops = append(ops, clientv3.OpPut(k.data(fmt.Sprintf("%s/%04d", parent, i%1000)), value()))
		if len(ops) >= 1000 {
			flush()
		}
	}
	flush()
	resp, err := cli.Get(ctx, k.errorKey())
	if err != nil {
		b.Fatal(err)
	}
	rev := resp.Header.Revision
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		r := newReplica(k, zap.NewNop())
		if err := r.load(ctx, cli, rev); err != nil {
			b.Fatal(err)
		}
		if got := r.t.count; got < int64(znodes) {
			b.Fatalf("loaded %d znodes, want at least %d", got, znodes)
		}
	}
	b.ReportMetric(float64(znodes)*float64(b.N)/b.Elapsed().Seconds(), "znodes/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(znodes)/float64(b.N), "cpu-ns/znode")
}

// cpuTime is the CPU time this process has used (etcd's included), which a machine shared with
// other work does not change as much as it changes wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

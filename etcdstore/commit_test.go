package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// TestCommitBatchesKeepZxids: writes of many sessions at once are committed in batches (several
// writes per etcd transaction), and each keeps ZooKeeper's semantics: its own zxid, distinct
// from every other write's and increasing per session, failed writes included; the Stat it
// answers carries that zxid; the watch event it fires carries it too, in zxid order; the
// replica and a fresh read of etcd agree on every Stat afterwards.
//
// Also with batches in flight behind each other (pipeline.go), and with some of their
// transactions delayed on their way to etcd, so that the ones behind overtake them, fail their
// guards, and are checked again.
func TestCommitBatchesKeepZxids(t *testing.T) {
	for _, c := range []struct {
		name     string
		pipeline bool
		delay    bool
	}{{"one at a time", false, false}, {"pipelined", true, false}, {"pipelined, overtaken", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			cli := startEtcd(t)
			kv := &delayKV{KV: cli.KV}
			if c.delay {
				kv.every = 3
			}
			cfg := Config{CommitDepth: 1}
			if c.pipeline {
				cfg = Config{FenceGuards: true, CommitDepth: 4}
			}
			b := testCommitBatchesKeepZxids(t, cli, kv, cfg)
			if c.delay && b != nil && b.commits.requeued.Load() == 0 {
				t.Error("no write was checked again after a transaction overtook another")
			}
			if !c.pipeline && b != nil && b.commits.requeued.Load() != 0 {
				t.Error("writes committed one batch at a time were checked again")
			}
		})
	}
}

// delayKV delays every every-th transaction by a millisecond before it goes to etcd.
type delayKV struct {
	clientv3.KV
	every int64
	n     atomic.Int64
}

func (k *delayKV) Txn(ctx context.Context) clientv3.Txn {
	return &delayTxn{Txn: k.KV.Txn(ctx), delay: k.every > 0 && k.n.Add(1)%k.every == 0}
}

type delayTxn struct {
	clientv3.Txn
	delay bool
}

func (t *delayTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *delayTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *delayTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *delayTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.delay {
		time.Sleep(time.Millisecond)
	}
	return t.Txn.Commit()
}

// testCommitBatchesKeepZxids is TestCommitBatchesKeepZxids on a store with cfg over kv; it
// returns the store, nil if it failed.
func testCommitBatchesKeepZxids(t *testing.T, cli *clientv3.Client, kv clientv3.KV, cfg Config) *Store {
	ctx := context.Background()
	metrics, reg := newTestMetrics(t)
	cfg.Client, cfg.KV, cfg.Logger, cfg.ReapInterval, cfg.Metrics = cli, kv, zaptest.NewLogger(t), -1, metrics
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	setup := openTestSession(t, b)
	for _, p := range []string{"/b", "/b/x"} {
		if _, _, err := setup.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	sink := &zetcdtest.Events{}
	watching, err := b.Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watching.AddWatch(ctx, &encoding.AddWatchRequest{Path: "/b", Mode: encoding.AddWatchPersistentRecursive}); err != nil {
		t.Fatal(err)
	}

	const sessions, rounds = 16, 25
	var (
		mu       sync.Mutex
		all      = map[encoding.Zxid]string{} // every reply's zxid, and what it answered
		setDataZ []encoding.Zxid              // zxids of the writes that changed /b/x's data
	)
	record := func(t *testing.T, what string, z encoding.Zxid, prev *encoding.Zxid) {
		mu.Lock()
		defer mu.Unlock()
		if other, ok := all[z]; ok {
			t.Errorf("zxid %v answered twice: %s and %s", z, other, what)
		}
		all[z] = what
		if z <= *prev {
			t.Errorf("%s: zxid %v not after the session's previous %v", what, z, *prev)
		}
		*prev = z
	}
	var wg sync.WaitGroup
	for i := range sessions {
		s := openTestSession(t, b)
		wg.Go(func() {
			var prev encoding.Zxid
			for r := range rounds {
				what := fmt.Sprintf("session %d round %d", i, r)
				switch r % 5 {
				case 0:
					resp, z, err := s.Create2(ctx, &encoding.CreateRequest{Path: "/b/s-", ACL: openACL, Flags: encoding.ModeEphemeralSequential})
					if err != nil {
						t.Errorf("%s: create: %v", what, err)
						return
					}
					if resp.Stat.Czxid != z || resp.Stat.Mzxid != z || resp.Stat.Pzxid != z {
						t.Errorf("%s: create at %v answered %+v", what, z, resp.Stat)
					}
					record(t, what+" create", z, &prev)
				case 1, 3:
					resp, z, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/b/x", Data: []byte(what), Version: -1})
					if err != nil {
						t.Errorf("%s: setData: %v", what, err)
						return
					}
					if resp.Stat.Mzxid != z {
						t.Errorf("%s: setData at %v answered mzxid %v", what, z, resp.Stat.Mzxid)
					}
					record(t, what+" setData", z, &prev)
					mu.Lock()
					setDataZ = append(setDataZ, z)
					mu.Unlock()
				case 2:
					// Fails alone, and consumes a zxid of its own.
					_, z, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/b/x", Data: []byte("no"), Version: 1 << 30})
					if !errors.Is(err, encoding.ErrBadVersion) {
						t.Errorf("%s: setData of a wrong version: %v, want BadVersion", what, err)
						return
					}
					record(t, what+" failed setData", z, &prev)
				case 4:
					resp, z, err := s.Multi(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
						{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: fmt.Sprintf("/b/m%d-%d", i, r), ACL: openACL}},
						{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/b/x", Data: []byte(what), Version: -1}},
					}})
					if err != nil || resp.Results[1].Err != 0 {
						t.Errorf("%s: multi: %v %+v", what, err, resp)
						return
					}
					if st := resp.Results[1].Record.(*encoding.SetDataResponse).Stat; st.Mzxid != z {
						t.Errorf("%s: multi at %v answered mzxid %v", what, z, st.Mzxid)
					}
					record(t, what+" multi", z, &prev)
					mu.Lock()
					setDataZ = append(setDataZ, z)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return nil
	}

	// Batched: fewer etcd transactions than writes.
	batches, writes := batchCounts(t, reg)
	t.Logf("%d writes in %d batches", int(writes), int(batches))
	if writes != sessions*rounds+2 || batches >= writes {
		t.Errorf("%v writes in %v batches, want %d writes in fewer batches", writes, batches, sessions*rounds+2)
	}
	// Every batch's transaction was timed (one more for each batch checked again after a
	// conflict).
	if txns, seconds := histogramOf(t, reg, "zetcd_write_batch_commit_seconds"); txns < batches || seconds <= 0 {
		t.Errorf("zetcd_write_batch_commit_seconds: %v transactions taking %vs, want at least %v batches' and some time", txns, seconds, batches)
	}

	// Events come in zxid order; each change of /b/x's data fired one at its write's zxid.
	slices.Sort(setDataZ)
	if err := watching.AwaitEvents(ctx, setDataZ[len(setDataZ)-1]); err != nil {
		t.Fatal(err)
	}
	var fired []encoding.Zxid
	var last encoding.Zxid
	for _, ev := range sink.Take() {
		at := strings.LastIndex(ev, " @")
		z, err := strconv.ParseInt(ev[at+2:], 10, 64)
		if err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if encoding.Zxid(z) < last {
			// (A multi's events share its zxid.)
			t.Errorf("event %q after one at %d", ev, int64(last))
		}
		last = encoding.Zxid(z)
		if strings.HasPrefix(ev, "NodeDataChanged /b/x ") {
			fired = append(fired, encoding.Zxid(z))
		}
	}
	if !slices.Equal(fired, setDataZ) {
		t.Errorf("data events of /b/x at %v, want the setData zxids %v", fired, setDataZ)
	}

	// /b/x's Stat counts every setData and names the last.
	got, z, err := setup.GetData(ctx, &encoding.GetDataRequest{Path: "/b/x"})
	if err != nil {
		t.Fatal(err)
	}
	// A read answers the zxid of the last write applied, as ZooKeeper's lastProcessedZxid.
	newest := slices.Max(slices.Collect(maps.Keys(all)))
	if z != newest {
		t.Errorf("a read after every write answered zxid %v, want the last write's %v", z, newest)
	}
	if got.Stat.Mzxid != setDataZ[len(setDataZ)-1] || int(got.Stat.Version) != len(setDataZ) {
		t.Errorf("/b/x: mzxid %v version %d, want %v and %d", got.Stat.Mzxid, got.Stat.Version, setDataZ[len(setDataZ)-1], len(setDataZ))
	}
	awaitTreeCurrent(t, b)
	checkTreeMatchesEtcd(t, b)
	if own := awaitOwnChecked(t, b); own.differed != 0 {
		t.Errorf("%d revisions the committer applied differed from etcd's events", own.differed)
	}
	return b
}

// batchCounts reads the batches and the writes they committed from zetcd_write_batch_size.
func batchCounts(t *testing.T, reg *prometheus.Registry) (batches, writes float64) {
	t.Helper()
	return histogramOf(t, reg, "zetcd_write_batch_size")
}

// histogramOf reads the sample count and sum of the histogram named name.
func histogramOf(t *testing.T, reg *prometheus.Registry, name string) (count, sum float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			return float64(h.GetSampleCount()), h.GetSampleSum()
		}
	}
	t.Fatalf("no %s metric", name)
	return 0, 0
}

// TestCommitBatchWithEndedSession: a batch that names the lease of a session etcd has already
// ended (an ephemeral create) is refused by etcd as a whole; the committer commits its writes
// one by one, so that only that write fails (SessionExpired) and the others succeed. Once the
// feed has seen the session key deleted, the check refuses that write before etcd does.
func TestCommitBatchWithEndedSession(t *testing.T) {
	ctx := context.Background()
	b, _, cli := newTestBackend(t)
	ended, alive := openTestSession(t, b).(*etcdSession), openTestSession(t, b).(*etcdSession)
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(ended.id)); err != nil {
		t.Fatal(err)
	}
	var outcomes []chan writeOutcome
	write := func(s *etcdSession, path string, mode encoding.CreateMode) *pendingWrite {
		done := make(chan writeOutcome, 1)
		outcomes = append(outcomes, done)
		s.writes.add() // as submit does
		return &pendingWrite{s: s, opName: "create", floor: s.lastRev, done: done,
			ops: []mop{{op: encoding.OpCreate2, path: path, acl: openACL, flags: mode, ttl: -1, version: -1}}}
	}
	batch := []*pendingWrite{write(alive, "/a", 0), write(ended, "/e", encoding.ModeEphemeral), write(alive, "/b", 0)}
	b.commits.commit(batch, 0)
	for i := range batch {
		o := <-outcomes[i]
		switch {
		case i == 1 && !isLeaseGone(o.err) && o.failed != encoding.ErrSessionExpired:
			t.Errorf("the ended session's create: %+v, want etcd's lease not found or SessionExpired", o)
		case i != 1 && (o.err != nil || o.failedAt >= 0):
			t.Errorf("write %d: %+v, want it committed", i, o)
		}
	}
	// The writes went to the committer directly, not through the session: the session's floor
	// did not move, so wait for the replica to apply them.
	awaitTreeCurrent(t, b)
	for _, p := range []string{"/a", "/b"} {
		if _, _, err := alive.Exists(ctx, &encoding.ExistsRequest{Path: p}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestInflightFailStuck: failStuck fails the transaction in flight only once it has been in flight
// for the given time, with errStuckWrite as the cause, and nothing once it has been answered.
func TestInflightFailStuck(t *testing.T) {
	var tx inflightTxn
	if _, failed := tx.failStuck(0); failed {
		t.Fatal("failStuck with nothing in flight failed something")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	sent := tx.send(cancel)
	if _, failed := tx.failStuck(time.Hour); failed || ctx.Err() != nil {
		t.Fatal("failStuck failed a transaction in flight for less than its time")
	}
	time.Sleep(5 * time.Millisecond)
	held, failed := tx.failStuck(time.Millisecond)
	if !failed || held < 5*time.Millisecond || !errors.Is(context.Cause(ctx), errStuckWrite) {
		t.Fatalf("failStuck: held %v, failed %v, cause %v; want it failed with errStuckWrite", held, failed, context.Cause(ctx))
	}
	tx.done(sent)
	if _, failed := tx.failStuck(0); failed {
		t.Fatal("failStuck failed a transaction already answered")
	}
}

// TestCommitSessionMoved: a session's write whose transaction is on its way to etcd when another
// zetcd takes the session over is refused with SessionMoved when it gets there, as ZooKeeper's
// leader refuses a write from the server a session left: the session has read the node since,
// where it moved, and a write sent before that read must not land after it. Nothing else guards
// it: the read leaves no trace in etcd. The resume puts the first zetcd's taken key, which its
// transactions compare; with and without fence guards, and with the taken key deleted before the
// write gets there (the leader collects it when the process has no process key left): the
// transaction fails on the key's CreateRevision, and the process puts it again and writes on.
// Also when the session moves to another connection of the same process, whose resume may reach
// etcd over another connection than the write.
func TestCommitSessionMoved(t *testing.T) {
	for _, c := range []struct{ fence, collected, same bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, false, true}} {
		t.Run(fmt.Sprintf("fence=%v,collected=%v,sameProcess=%v", c.fence, c.collected, c.same), func(t *testing.T) {
			ctx := context.Background()
			cli := startEtcd(t)
			held := &heldKV{KV: cli.KV, held: make(chan struct{}, 1)}
			a, err := New(ctx, Config{Client: cli, KV: held, Logger: zaptest.NewLogger(t), ReapInterval: -1, FenceGuards: c.fence})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Close)
			b := a // the session moves to another connection of a
			if !c.same {
				b, _, _ = newTestBackendOn(t, cli, Config{FenceGuards: c.fence})
			}
			s := openTestSession(t, a).(*etcdSession)
			other := openTestSession(t, a)
			if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/x", Data: []byte("0"), ACL: openACL}); err != nil {
				t.Fatal(err)
			}

			release, first := held.setData(s, "/x", "first") // its transaction, on its way
			moved, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.id, Passwd: s.passwd, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatalf("resume on b: %v", err)
			}
			read, _, err := moved.GetData(ctx, &encoding.GetDataRequest{Path: "/x"})
			if err != nil || string(read.Data) != "0" {
				t.Fatalf("getData on b: %v %v; want %q", read, err, "0")
			}
			if c.collected {
				// a puts its key again as its feed sees it deleted: not until its held
				// transaction has got to etcd, which then compares a key that is gone.
				a.process.recreating.Store(true)
				if _, err := cli.Delete(ctx, a.keys.taken(a.process.id)); err != nil {
					t.Fatal(err)
				}
				time.AfterFunc(300*time.Millisecond, func() {
					a.process.recreating.Store(false)
					a.observeTakenKey(nil)
				})
			}
			release()
			wantCode(t, <-first, encoding.ErrSessionMoved)

			awaitTreeCurrent(t, b)
			got, _, err := moved.GetData(ctx, &encoding.GetDataRequest{Path: "/x"})
			if err != nil || string(got.Data) != "0" {
				t.Errorf("/x: %v %v; want %q, as the session read it after it moved", got, err, "0")
			}
			// a's other session writes on.
			if _, _, err := other.Create(ctx, &encoding.CreateRequest{Path: "/y", ACL: openACL}); err != nil {
				t.Errorf("a write of a session that stayed on a: %v", err)
			}
		})
	}
}

// heldKV holds the Commit of the next transaction after hold is set until what hold points to
// is closed, and says so on held.
type heldKV struct {
	clientv3.KV
	hold atomic.Pointer[chan struct{}]
	held chan struct{}
}

// setData sends a setData of data to path on s and returns once its transaction is held: release
// lets it go to etcd, and the write's error comes on result.
func (k *heldKV) setData(s zetcd.Session, path, data string) (release func(), result <-chan error) {
	ch := make(chan struct{})
	k.hold.Store(&ch)
	errc := make(chan error, 1)
	go func() {
		_, _, err := s.SetData(context.Background(), &encoding.SetDataRequest{Path: path, Data: []byte(data), Version: -1})
		errc <- err
	}()
	<-k.held
	return func() { close(ch) }, errc
}

func (k *heldKV) Txn(ctx context.Context) clientv3.Txn { return &heldTxn{Txn: k.KV.Txn(ctx), k: k} }

type heldTxn struct {
	clientv3.Txn
	k *heldKV
}

func (t *heldTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *heldTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *heldTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *heldTxn) Commit() (*clientv3.TxnResponse, error) {
	if release := t.k.hold.Swap(nil); release != nil {
		t.k.held <- struct{}{}
		<-*release
	}
	return t.Txn.Commit()
}

// TestObserveSessionsAt: after a reload of the replica, the session keys read at its revision
// tell each local session whether it was ended meanwhile; a session taken after that revision
// is not told it ended because its key was not there yet.
func TestObserveSessionsAt(t *testing.T) {
	ctx := context.Background()
	b, _, cli := newTestBackend(t)
	s := openTestSession(t, b).(*etcdSession)
	if err := b.observeSessionsAt(ctx, s.ownerRev-1); err != nil {
		t.Fatal(err)
	}
	if code := s.keyCode(); code != 0 {
		t.Fatalf("a session taken after the revision read: %v, want none", code)
	}
	if err := b.observeSessionsAt(ctx, s.ownerRev); err != nil {
		t.Fatal(err)
	}
	if code := s.keyCode(); code != 0 {
		t.Fatalf("a live session: %v, want none", code)
	}
	r, err := cli.Revoke(ctx, clientv3.LeaseID(s.id))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.observeSessionsAt(ctx, r.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if code := s.keyCode(); code != encoding.ErrSessionExpired {
		t.Errorf("a session whose key etcd deleted: %v, want SessionExpired", code)
	}
}

// TestCommitResumeStorm: clients that resume their sessions on a zetcd again and again (each
// resume puts the process's taken key, which fails the transactions it overtakes) do not fail
// the writes of the process's other sessions: a batch whose processGuards failed is checked again
// and guarded session by session, which a move of another session cannot fail.
func TestCommitResumeStorm(t *testing.T) {
	ctx := context.Background()
	b, _, _ := newTestBackend(t)
	writer := openTestSession(t, b)
	if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	const flappers = 8
	var resumes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range flappers {
		s := openTestSession(t, b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.ID(), Passwd: s.Password(), Timeout: 10 * time.Second}); err != nil {
					t.Errorf("resume: %v", err)
					return
				}
				resumes.Add(1)
			}
		}()
	}
	for i := range 200 {
		if _, _, err := writer.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte(strconv.Itoa(i)), Version: -1}); err != nil {
			t.Errorf("setData %d with %d resumes so far: %v", i, resumes.Load(), err)
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d resumes during 200 writes", resumes.Load())
}

// newHeldBackend starts a backend whose transactions can be held (heldKV), with a session that
// created /x ("0").
func newHeldBackend(t *testing.T) (*Store, *clientv3.Client, *heldKV, *etcdSession) {
	t.Helper()
	cli := startEtcd(t)
	held := &heldKV{KV: cli.KV, held: make(chan struct{}, 1)}
	b, err := New(context.Background(), Config{Client: cli, KV: held, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s := openTestSession(t, b).(*etcdSession)
	if _, _, err := s.Create(context.Background(), &encoding.CreateRequest{Path: "/x", Data: []byte("0"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	return b, cli, held, s
}

// TestCommitAfterLeasesExpired: a write checked while its session was alive, and sent to etcd
// only after etcd expired the session's lease and this process's key (the process frozen
// longer than the session's timeout, no other zetcd to end its sessions), is refused as
// SessionExpired and changes nothing, as ZooKeeper's leader refuses a request of a session it
// expired, whenever the request was sent.
func TestCommitAfterLeasesExpired(t *testing.T) {
	ctx := context.Background()
	b, cli, held, s := newHeldBackend(t)
	pk, err := cli.Get(ctx, b.keys.process(b.process.id))
	if err != nil || len(pk.Kvs) != 1 {
		t.Fatalf("process key: %v %v", pk, err)
	}

	// Checked on a replica where the session lives; its transaction on its way.
	release, write := held.setData(s, "/x", "late")
	for _, lease := range []clientv3.LeaseID{clientv3.LeaseID(s.id), clientv3.LeaseID(pk.Kvs[0].Lease)} {
		if _, err := cli.Revoke(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	release()
	wantCode(t, <-write, encoding.ErrSessionExpired)
	awaitTreeCurrent(t, b)
	got, _, err := openTestSession(t, b).GetData(ctx, &encoding.GetDataRequest{Path: "/x"})
	if err != nil || string(got.Data) != "0" || got.Stat.Version != 0 {
		t.Errorf("/x after the refused write: %+v %v, want \"0\" at version 0", got, err)
	}
}

// TestEndWaitsForWriteInFlight: a session that ends (its timeout ran out) while a write of it
// is on its way to etcd ends after that write lands, as ZooKeeper's leader processes a
// session's requests before its closeSession: the write's revision comes before the end's.
func TestEndWaitsForWriteInFlight(t *testing.T) {
	ctx := context.Background()
	b, cli, held, s := newHeldBackend(t)
	release, write := held.setData(s, "/x", "last")
	expired := make(chan error, 1)
	go func() { expired <- s.Expire(ctx) }()
	select {
	case err := <-expired:
		t.Fatalf("the session ended (%v) while its write was on its way", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-write; err != nil {
		t.Fatalf("the write on its way as the session ended: %v", err)
	}
	if err := <-expired; err != nil {
		t.Fatal(err)
	}
	x, err := cli.Get(ctx, b.keys.data("/x"))
	if err != nil || len(x.Kvs) != 1 {
		t.Fatalf("/x: %v %v", x, err)
	}
	// Nothing else writes: the session's end is etcd's newest revision.
	if wrote, ended := x.Kvs[0].ModRevision, x.Header.Revision; wrote >= ended {
		t.Errorf("the write landed at revision %d, the session's end at %d or before", wrote, ended)
	}
}

// TestAbandonedWriteAfterMove: a write its connection gave up on (the connection dropped while
// the write waited behind another in the committer) does not land after the session was
// resumed on another zetcd and wrote there: ZooKeeper's leader refuses a request from the
// server a session left (SessionMoved), so the newer write stays.
func TestAbandonedWriteAfterMove(t *testing.T) {
	ctx := context.Background()
	a, cli, held, s := newHeldBackend(t)
	other := openTestSession(t, a).(*etcdSession)
	if _, _, err := other.Create(ctx, &encoding.CreateRequest{Path: "/y", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	release, otherDone := held.setData(other, "/y", "other")

	// s's write waits behind other's; its connection drops: the call is abandoned and the
	// front detaches the session (a dropped connection).
	wctx, abandon := context.WithCancel(ctx)
	stale := make(chan error, 1)
	go func() {
		_, _, err := s.SetData(wctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("stale"), Version: -1})
		stale <- err
	}()
	awaitWritesInFlight(t, s)
	abandon()
	if err := <-stale; err == nil {
		t.Fatal("the abandoned write was answered without an error")
	}
	s.Detach()

	// The client resumes the session on another zetcd and writes there.
	b, _, _ := newTestBackendOn(t, cli, Config{})
	moved, err := b.Connect(ctx, zetcd.ConnectParams{SessionID: s.id, Passwd: s.passwd, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("resume on the other zetcd: %v", err)
	}
	if _, _, err := moved.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte("new"), Version: -1}); err != nil {
		t.Fatalf("setData where the session moved: %v", err)
	}
	awaitTreeCurrent(t, a) // a's replica has seen the move before it checks the abandoned write

	release()
	if err := <-otherDone; err != nil {
		t.Fatalf("the write ahead of it: %v", err)
	}
	if err := s.writes.wait(ctx); err != nil {
		t.Fatal(err)
	}
	awaitTreeCurrent(t, b)
	got, _, err := moved.GetData(ctx, &encoding.GetDataRequest{Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != "new" {
		t.Errorf("/x = %q (version %d): the abandoned write landed after the session moved and wrote \"new\"", got.Data, got.Stat.Version)
	}
}

// awaitWritesInFlight waits until a write of s is in the committer.
func awaitWritesInFlight(t *testing.T, s *etcdSession) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.writes.mu.Lock()
		n := s.writes.n
		s.writes.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never reached the committer")
		}
	}
}

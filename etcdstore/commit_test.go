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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// TestCommitBatchesKeepZxids: writes of many sessions at once are committed in batches (several
// writes per etcd transaction), and each keeps ZooKeeper's semantics: its own zxid, distinct
// from every other write's and increasing per session, failed writes included; the Stat it
// answers carries that zxid; the watch event it fires carries it too, in zxid order; the
// replica and a fresh read of etcd agree on every Stat afterwards.
func TestCommitBatchesKeepZxids(t *testing.T) {
	ctx := context.Background()
	metrics, reg := newTestMetrics(t)
	b, _, _ := newTestBackendOn(t, startEtcd(t), Config{Metrics: metrics})
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
		return
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
// one by one, so that only that write fails (SessionExpired) and the others succeed.
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
		return &pendingWrite{s: s, opName: "create", floor: s.lastRev, done: done,
			ops: []mop{{op: encoding.OpCreate2, path: path, acl: openACL, flags: mode, ttl: -1, version: -1}}}
	}
	batch := []*pendingWrite{write(alive, "/a", 0), write(ended, "/e", encoding.ModeEphemeral), write(alive, "/b", 0)}
	b.commits.commit(batch)
	for i := range batch {
		o := <-outcomes[i]
		switch {
		case i == 1 && !isLeaseGone(o.err):
			t.Errorf("the ended session's create: %+v, want etcd's lease not found", o)
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

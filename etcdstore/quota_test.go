package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

func TestStatsTrack(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"", "count=-1,bytes=-1"},
		{"count=0,bytes=0", "count=0,bytes=0"},
		{"count=-1,bytes=-1=;countHardLimit=3", "count=-1,bytes=-1=;countHardLimit=3"},
		{"byteHardLimit=10;count=2;countHardLimit=3", "count=2,bytes=-1=;byteHardLimit=10;countHardLimit=3"},
		{"count==5,bytes=5", "count=-1,bytes=5"},
	} {
		st, err := parseStatsTrack([]byte(c.in))
		if err != nil || st.String() != c.out {
			t.Errorf("%q: %q, %v; want %q", c.in, st.String(), err, c.out)
		}
	}
	for _, bad := range []string{"count", "count=", ",count=1", "count=x"} {
		if _, err := parseStatsTrack([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestQuotaSetMaxPrefix(t *testing.T) {
	s := quotaSet(nil).with("/a").with("/a/b/c").with("/x")
	for path, want := range map[string]string{
		"/a": "/a", "/a/b": "/a", "/a/b/c": "/a/b/c", "/a/b/c/d": "/a/b/c", "/ab": "", "/": "", "/x/y": "/x", "/y": "",
	} {
		if got := s.maxPrefix(path); got != want {
			t.Errorf("maxPrefix(%s) = %q, want %q", path, got, want)
		}
	}
	if got := s.without("/a/b/c").maxPrefix("/a/b/c/d"); got != "/a" {
		t.Errorf("after without: %q", got)
	}
	if _, ok := s["/a/b/c"]; !ok {
		t.Error("without changed the set in place")
	}
}

// quotaEnv is two zetcd processes on one etcd without fence guards, one enforcing quotas.
type quotaEnv struct {
	t        *testing.T
	ctx      context.Context
	enforced zetcd.Session
	other    zetcd.Session
	etcd     *clientv3.Client
	logs     *observer.ObservedLogs
}

func newQuotaEnv(t *testing.T) *quotaEnv {
	cli := startEtcd(t)
	core, logs := observer.New(zap.WarnLevel)
	a, err := New(context.Background(), Config{Client: cli, Logger: zap.New(core), ReapInterval: -1, EnforceQuota: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &quotaEnv{t: t, ctx: context.Background(), enforced: openTestSession(t, a), other: openTestSession(t, b), etcd: cli, logs: logs}
}

func (e *quotaEnv) create(s zetcd.Session, path, data string, want encoding.ErrCode) {
	e.t.Helper()
	var d []byte
	if data != "" {
		d = []byte(data)
	}
	_, _, err := s.Create(e.ctx, &encoding.CreateRequest{Path: path, Data: d, ACL: openACL})
	if want != 0 {
		wantCode(e.t, err, want)
	} else if err != nil {
		e.t.Fatalf("create %s: %v", path, err)
	}
}

// get reads path on s after a sync, so that s sees every write of either process.
func (e *quotaEnv) get(s zetcd.Session, path string) (string, encoding.Stat) {
	e.t.Helper()
	if _, _, err := s.Sync(e.ctx, &encoding.SyncRequest{Path: "/"}); err != nil {
		e.t.Fatal(err)
	}
	r, _, err := s.GetData(e.ctx, &encoding.GetDataRequest{Path: path})
	if err != nil {
		e.t.Fatalf("getData %s: %v", path, err)
	}
	return string(r.Data), r.Stat
}

func (e *quotaEnv) wantStats(want string) encoding.Stat {
	e.t.Helper()
	var st encoding.Stat
	for _, s := range []zetcd.Session{e.enforced, e.other} {
		var got string
		if got, st = e.get(s, quotaStatPath("/q")); got != want {
			e.t.Fatalf("stats %q, want %q", got, want)
		}
		if int(st.DataLength) != len(want) {
			e.t.Fatalf("stats dataLength %d, want %d", st.DataLength, len(want))
		}
	}
	return st
}

// TestQuotaStats follows a quota's statistics through writes of two processes: set from the
// subtree when the stats node is created, then counted by every create, delete and setData
// below the quota'd path without moving the stats node's version or mzxid; a hard limit
// enforced as ZooKeeper's checkQuota does, against the tree before a multi.
func TestQuotaStats(t *testing.T) {
	e := newQuotaEnv(t)
	e.create(e.other, "/q", "ab", 0)
	e.create(e.other, "/q/a", "x", 0)
	e.create(e.other, "/zookeeper/quota/q", "", 0)
	e.create(e.other, quotaLimitPath("/q"), "count=-1,bytes=-1=;countHardLimit=4", 0)
	e.create(e.other, quotaStatPath("/q"), "count=0,bytes=0", 0)
	st0 := e.wantStats("count=2,bytes=3")
	if st0.Version != 0 || st0.Mzxid != st0.Czxid {
		t.Fatalf("stats node Stat %+v", st0)
	}

	e.create(e.enforced, "/q/b", "yy", 0)
	if _, _, err := e.other.SetData(e.ctx, &encoding.SetDataRequest{Path: "/q/a", Data: []byte("xyz"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	st := e.wantStats("count=3,bytes=7")
	if st.Version != 0 || st.Mzxid != st0.Mzxid || st.Mtime != st0.Mtime {
		t.Fatalf("stats node Stat moved: %+v, was %+v", st, st0)
	}

	// Both creates of the multi are checked against count 3: both pass the limit of 4.
	multi := &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/q/c", ACL: openACL}},
		{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/q/d", Data: []byte("d"), ACL: openACL}},
	}}
	if r, _, err := e.enforced.Multi(e.ctx, multi); err != nil || r.Results[1].Err != 0 {
		t.Fatalf("multi: %+v, %v", r, err)
	}
	e.wantStats("count=5,bytes=8")
	e.create(e.enforced, "/q/e", "", encoding.ErrQuotaExceeded)
	// The process that does not enforce counts past the limit.
	e.create(e.other, "/q/e", "", 0)
	e.wantStats("count=6,bytes=8")
	if _, err := e.enforced.Delete(e.ctx, &encoding.DeleteRequest{Path: "/q/e", Version: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.enforced.Delete(e.ctx, &encoding.DeleteRequest{Path: "/q/d", Version: -1}); err != nil {
		t.Fatal(err)
	}
	e.wantStats("count=4,bytes=7")
	if e.logs.FilterMessage("Quota exceeded").Len() == 0 {
		t.Error("the refused create was not logged")
	}

	// A setData past a soft bytes limit is logged, not refused.
	if _, _, err := e.other.SetData(e.ctx, &encoding.SetDataRequest{Path: quotaLimitPath("/q"), Data: []byte("count=-1,bytes=8=;countHardLimit=4"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	e.get(e.enforced, "/q")
	before := e.logs.Len()
	if _, _, err := e.enforced.SetData(e.ctx, &encoding.SetDataRequest{Path: "/q/a", Data: []byte("wxyz00"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	if e.logs.Len() != before+1 || e.logs.All()[before].Level != zap.WarnLevel {
		t.Errorf("soft limit logs: %v", e.logs.All()[before:])
	}
	e.wantStats("count=4,bytes=10")

	// A client's setData of the stats node moves its version; counting goes on from its data.
	if _, _, err := e.other.SetData(e.ctx, &encoding.SetDataRequest{Path: quotaStatPath("/q"), Data: []byte("count=0,bytes=0"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	e.create(e.enforced, "/q/f", "", 0)
	if st := e.wantStats("count=1,bytes=0"); st.Version != 1 {
		t.Errorf("stats node version %d after a setData", st.Version)
	}

	// The replica loaded afresh holds the same.
	fresh, err := New(context.Background(), Config{Client: e.etcd, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, _ := e.get(openTestSession(t, fresh), quotaStatPath("/q")); got != "count=1,bytes=0" {
		t.Errorf("reloaded stats %q", got)
	}

	// Without its limits node the path is no longer counted.
	if _, err := e.other.Delete(e.ctx, &encoding.DeleteRequest{Path: quotaLimitPath("/q"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	e.get(e.enforced, "/")
	e.create(e.enforced, "/q/g", "", 0)
	e.wantStats("count=1,bytes=0")
	if errs := e.logs.FilterLevelExact(zap.ErrorLevel); errs.Len() > 0 {
		t.Errorf("errors logged (a replica divergence?): %v", errs.All())
	}
}

// TestQuotaNested: a write counts in the deepest quota above it only; a stats node created
// counts its whole subtree, nested quotas included (DataTree.getCounts).
func TestQuotaNested(t *testing.T) {
	e := newQuotaEnv(t)
	for _, p := range []string{"/q", "/q/in", "/q/in/x", "/zookeeper/quota/q", "/zookeeper/quota/q/in"} {
		e.create(e.enforced, p, "", 0)
	}
	e.create(e.enforced, quotaLimitPath("/q/in"), "count=10,bytes=-1", 0)
	e.create(e.enforced, quotaStatPath("/q/in"), "count=0,bytes=0", 0)
	e.create(e.enforced, quotaLimitPath("/q"), "count=10,bytes=-1", 0)
	e.create(e.enforced, quotaStatPath("/q"), "", 0)
	e.wantStats("count=3,bytes=0")
	e.create(e.enforced, "/q/in/y", "abc", 0)
	e.create(e.other, "/q/z", "", 0)
	e.wantStats("count=4,bytes=0")
	if got, _ := e.get(e.other, quotaStatPath("/q/in")); got != "count=3,bytes=3" {
		t.Errorf("inner stats %q", got)
	}
}

// TestQuotaMultiLimitsLookedUp: a multi's second op is checked against the limits and stats
// nodes its first op brought into the overlay, as they were before the multi.
func TestQuotaMultiLimitsLookedUp(t *testing.T) {
	e := newQuotaEnv(t)
	e.create(e.enforced, "/q", "", 0)
	e.create(e.enforced, "/q/a", "xyz", 0)
	e.create(e.enforced, "/zookeeper/quota/q", "", 0)
	e.create(e.enforced, quotaLimitPath("/q"), "count=-1,bytes=-1=;byteHardLimit=12;countHardLimit=10", 0)
	e.create(e.enforced, quotaStatPath("/q"), "", 0)
	e.wantStats("count=2,bytes=3")
	multi := &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/q/a", Data: []byte("0123"), Version: -1}},
		{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/q/f", Data: []byte("0123456789"), ACL: openACL}},
	}}
	r, _, err := e.enforced.Multi(e.ctx, multi)
	if err != nil || len(r.Results) != 2 || r.Results[1].Err != encoding.ErrQuotaExceeded {
		t.Fatalf("multi: %+v, %v", r, err)
	}
	e.wantStats("count=2,bytes=3")
}

// TestQuotaConcurrentWrites: writes of many sessions of two processes, group-committed in
// batches and conflicting across processes (one with fence guards), ended sessions'
// ephemerals and a reaped container all leave the statistics equal to the subtree.
func TestQuotaConcurrentWrites(t *testing.T) {
	cli := startEtcd(t)
	var stores []*Store
	for _, cfg := range []Config{
		{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: 50 * time.Millisecond, FenceGuards: true},
		{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1},
	} {
		b, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		stores = append(stores, b)
	}
	ctx := context.Background()
	s := openTestSession(t, stores[1])
	for _, p := range []string{"/q", "/zookeeper/quota/q"} {
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{quotaLimitPath("/q"), quotaStatPath("/q")} {
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: p, Data: []byte("count=-1,bytes=-1"), ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}

	const workers, each = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := stores[w%2].Connect(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			for i := range each {
				p := fmt.Sprintf("/q/w%d-%d", w, i)
				flags := encoding.CreateMode(0)
				if i%3 == 0 {
					flags = encoding.ModeEphemeral
				}
				if _, _, err := ws.Create(ctx, &encoding.CreateRequest{Path: p, Data: []byte(p), ACL: openACL, Flags: flags}); err != nil {
					errs <- err
					return
				}
				if i%4 == 1 {
					if _, _, err := ws.SetData(ctx, &encoding.SetDataRequest{Path: p, Data: []byte("x"), Version: -1}); err != nil {
						errs <- err
						return
					}
				}
				if i%4 == 2 {
					if _, err := ws.Delete(ctx, &encoding.DeleteRequest{Path: p, Version: -1}); err != nil {
						errs <- err
						return
					}
				}
			}
			if _, err := ws.Close(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A container reaped once its child is gone.
	if _, _, err := s.CreateContainer(ctx, &encoding.CreateRequest{Path: "/q/cont", Data: []byte("cc"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/q/cont/x", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, &encoding.DeleteRequest{Path: "/q/cont/x", Version: -1}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "container reaped", func() bool {
		if _, _, err := s.Sync(ctx, &encoding.SyncRequest{Path: "/"}); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: "/q/cont"})
		return err != nil
	})

	var count, bytes int64
	stores[1].tree.read(func(v replicaView) { st := v.subtree("/q"); count, bytes = st.count, st.bytes })
	want := fmt.Sprintf("count=%d,bytes=%d", count, bytes)
	for _, b := range stores {
		ss := openTestSession(t, b)
		if _, _, err := ss.Sync(ctx, &encoding.SyncRequest{Path: "/"}); err != nil {
			t.Fatal(err)
		}
		r, _, err := ss.GetData(ctx, &encoding.GetDataRequest{Path: quotaStatPath("/q")})
		if err != nil || string(r.Data) != want {
			t.Errorf("stats %q, %v; want %q", r.Data, err, want)
		}
	}
	if count != 1+workers*each/2 {
		t.Errorf("the subtree holds %d nodes", count)
	}
}

// TestQuotaEnforcedBatch: creates racing past a hard count limit, group-committed in batches,
// are checked in turn: exactly as many succeed as the limit leaves room for.
func TestQuotaEnforcedBatch(t *testing.T) {
	cli := startEtcd(t)
	b, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), ReapInterval: -1, FenceGuards: true, EnforceQuota: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := context.Background()
	s := openTestSession(t, b)
	for _, c := range []struct{ path, data string }{
		{"/q", ""}, {"/zookeeper/quota/q", ""},
		{quotaLimitPath("/q"), "count=-1,bytes=-1=;countHardLimit=10"}, {quotaStatPath("/q"), ""},
	} {
		if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: c.path, Data: []byte(c.data), ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	const workers, each = 8, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[encoding.ErrCode]int{}
	batched := false
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := openTestSession(t, b)
			for i := range each {
				_, z, err := ws.Create(ctx, &encoding.CreateRequest{Path: fmt.Sprintf("/q/w%d-%d", w, i), ACL: openACL})
				var code encoding.ErrCode
				if err != nil && !errors.As(err, &code) {
					t.Error(err)
				}
				mu.Lock()
				codes[code]++
				batched = batched || z&0xffff != 0 // not the first write of its batch (zxid.go)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !batched {
		t.Error("no two creates shared a batch")
	}
	if codes[0] != 9 || codes[encoding.ErrQuotaExceeded] != workers*each-9 {
		t.Errorf("codes %v, want 9 created and the rest QuotaExceeded", codes)
	}
	r, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: quotaStatPath("/q")})
	if err != nil || string(r.Data) != "count=10,bytes=0" {
		t.Errorf("stats %q, %v", r.Data, err)
	}
}

func TestQuotaOf(t *testing.T) {
	for path, want := range map[string]string{
		"/zookeeper/quota/q/zookeeper_limits":    "/q",
		"/zookeeper/quota/a/b/zookeeper_limits":  "/a/b",
		"/zookeeper/quota/zookeeper_limits":      "",
		"/zookeeper/quotax/q/zookeeper_limits":   "",
		"/zookeeper/quota/q/xzookeeper_limits":   "",
		"/zookeeper/quota/q/zookeeper_stats":     "",
		"/q/zookeeper_limits":                    "",
		"/zookeeper/quota/q/zookeeper_limits/no": "",
	} {
		if got, ok := quotaOf(path, quotaLimitNode); got != want || ok != (want != "") {
			t.Errorf("quotaOf(%s) = %q, %v; want %q", path, got, ok, want)
		}
	}
}

// TestQuotaStatsCreateGuarded: the count a stats node's create takes from the subtree is
// guarded: writes another process makes in the subtree while the create is on its way to etcd
// (below the deepest node too) make it count again.
func TestQuotaStatsCreateGuarded(t *testing.T) {
	cli := startEtcd(t)
	held := &heldKV{KV: cli.KV, held: make(chan struct{}, 1)}
	a, err := New(context.Background(), Config{Client: cli, KV: held, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := context.Background()
	sa, sb := openTestSession(t, a), openTestSession(t, b)
	for _, p := range []string{"/q", "/q/a", "/q/a/b", "/zookeeper/quota/q", quotaLimitPath("/q")} {
		if _, _, err := sa.Create(ctx, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := sb.Sync(ctx, &encoding.SyncRequest{Path: "/"}); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	held.hold.Store(&release)
	created := make(chan error, 1)
	go func() {
		_, _, err := sa.Create(ctx, &encoding.CreateRequest{Path: quotaStatPath("/q"), ACL: openACL})
		created <- err
	}()
	<-held.held
	if _, _, err := sb.Create(ctx, &encoding.CreateRequest{Path: "/q/a/b/c", Data: []byte("cc"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	r, _, err := sa.GetData(ctx, &encoding.GetDataRequest{Path: quotaStatPath("/q")})
	if err != nil || string(r.Data) != "count=4,bytes=2" {
		t.Errorf("stats %q, %v; want count=4,bytes=2", r.Data, err)
	}
}

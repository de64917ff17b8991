package etcdstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// laggingKV plays an etcd member that has applied only up to revision at (0: no lag): it
// answers a read-only Txn whose ranges are all serializable from that revision, with that
// revision in its header, as such a member would. Everything else goes to etcd unchanged.
type laggingKV struct {
	clientv3.KV
	at         atomic.Int64
	stale      atomic.Int64 // serializable reads answered from the past
	serialized atomic.Int64 // serializable reads answered
}

func (l *laggingKV) Txn(ctx context.Context) clientv3.Txn {
	return &laggingTxn{ctx: ctx, kv: l}
}

type laggingTxn struct {
	ctx  context.Context
	kv   *laggingKV
	cmps []clientv3.Cmp
	then []clientv3.Op
	els  []clientv3.Op
}

func (t *laggingTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.cmps = append(t.cmps, cs...); return t }
func (t *laggingTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.then = append(t.then, ops...); return t }
func (t *laggingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.els = append(t.els, ops...); return t }

func (t *laggingTxn) Commit() (*clientv3.TxnResponse, error) {
	serializable := len(t.cmps) == 0 && len(t.els) == 0 && len(t.then) > 0
	for _, op := range t.then {
		serializable = serializable && op.IsGet() && op.IsSerializable()
	}
	at := t.kv.at.Load()
	if !serializable {
		return t.kv.KV.Txn(t.ctx).If(t.cmps...).Then(t.then...).Else(t.els...).Commit()
	}
	t.kv.serialized.Add(1)
	if at == 0 {
		return t.kv.KV.Txn(t.ctx).Then(t.then...).Commit()
	}
	past := make([]clientv3.Op, len(t.then))
	for i, op := range t.then {
		opts := []clientv3.OpOption{clientv3.WithRev(at)}
		if end := op.RangeBytes(); len(end) > 0 {
			opts = append(opts, clientv3.WithRange(string(end)))
		}
		if op.IsKeysOnly() {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if op.IsCountOnly() {
			opts = append(opts, clientv3.WithCountOnly())
		}
		past[i] = clientv3.OpGet(string(op.KeyBytes()), opts...)
	}
	r, err := t.kv.KV.Txn(t.ctx).Then(past...).Commit()
	if err == nil {
		t.kv.stale.Add(1)
		r.Header.Revision = at
	}
	return r, err
}

// TestEtcdSerializableReads: reads that go to etcd (those the replica cannot serve, and the
// replica's fallback) are served serializably, but never from a member behind what the session
// must see — its own writes, a sync, an event already delivered — in which case they are read
// again linearizably; a read that only others' writes are missing from may be answered from
// the past, as a ZooKeeper follower that has not applied them yet would.
func TestEtcdSerializableReads(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	kv := &laggingKV{KV: cli.KV}
	b, err := New(ctx, Config{Client: cli, KV: kv, Logger: zaptest.NewLogger(t), ReapInterval: -1, manualWatchFeed: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	start, _ := b.watches.Progress()
	writer := openTestSession(t, b)
	reader := openTestSession(t, b)
	getData := func(s zetcd.Session, path string) string {
		t.Helper()
		n, _, _, err := s.(*etcdSession).readNodeEtcd(ctx, "getData", path, false)
		if err != nil {
			t.Fatal(err)
		}
		return string(n.Data)
	}
	set := func(s zetcd.Session, data string) encoding.Zxid {
		t.Helper()
		_, z, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/x", Data: []byte(data), Version: -1})
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	if _, _, err := writer.Create(ctx, &encoding.CreateRequest{Path: "/x", Data: []byte("1"), ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	// Served serializably when the member is current.
	if got := getData(reader, "/x"); got != "1" || kv.serialized.Load() != 1 {
		t.Fatalf("read %q after %d serializable reads; want \"1\" after 1", got, kv.serialized.Load())
	}

	// The member stops at the current revision; the writer writes again.
	_, _, z1, err := reader.(*etcdSession).readNodeEtcd(ctx, "exists", "/x", false)
	if err != nil {
		t.Fatal(err)
	}
	kv.at.Store(revOf(z1))
	z2 := set(writer, "2")
	// The writer reads its own write: the stale answer is refused and read again.
	if got := getData(writer, "/x"); got != "2" {
		t.Errorf("the writer read %q after writing \"2\" at %d", got, z2)
	}
	if kv.stale.Load() != 1 {
		t.Errorf("%d stale answers, want 1 (refused)", kv.stale.Load())
	}

	// Another session, which has seen nothing as new, may be answered from the past.
	if got := getData(reader, "/x"); got != "1" || kv.stale.Load() != 2 {
		t.Errorf("the reader read %q (%d stale answers); want \"1\", served by the lagging member", got, kv.stale.Load())
	}

	// Once the watch feed has delivered the write, no session reads behind it.
	go b.runWatchFeed(revOf(start))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, _ := b.watches.Progress(); p >= z2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch feed did not reach the write within 10s")
		}
	}
	if got := getData(reader, "/x"); got != "2" {
		t.Errorf("a read after the feed passed %d: %q, want \"2\"", z2, got)
	}

	// A sync raises the floor the same way, whatever the feed has seen.
	kv.at.Store(revOf(z2))
	set(writer, "3")
	if _, _, err := reader.Sync(ctx, &encoding.SyncRequest{Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	if got := getData(reader, "/x"); got != "3" {
		t.Errorf("a read after sync: %q, want \"3\"", got)
	}
	if got := kv.stale.Load(); got != 4 {
		t.Errorf("%d stale answers, want 4", got)
	}
}

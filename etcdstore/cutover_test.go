package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// TestCutover turns a Mirror's copy into a store New serves: the sessions taken over are
// written as Import writes imported ones (the mirror's lease reused), a negative id is skipped,
// etcd's revision goes past a ZooKeeper zxid, and New serves once the marker is gone.
func TestCutover(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	m := NewMirror(MirrorConfig{Client: cli, Logger: zaptest.NewLogger(t), Source: "test"})
	st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{7: {ID: 7, Timeout: 5000}}, LastZxid: 4}
	for _, n := range []*zkdata.Node{
		zkNode("/", "", importACL, 0, 0, 4, 0, 2, 0, 2, 0),
		zkNode("/zookeeper", "", importACL, 0, 0, 0, 0, 0, 0, 0, 0),
		zkNode("/e", "", importACL, 4, 4, 4, 0, 0, 0, 0, 7),
	} {
		st.Nodes[n.Path] = n
	}
	if _, err := m.Load(ctx, st, 4); err != nil {
		t.Fatal(err)
	}
	// The copy numbers ZooKeeper's zxids 0 and 4: a client that saw 3 saw what 0 was written at.
	tr := m.Translate([]int64{4, 3, 0, 9, 4})
	if len(tr) != 4 || tr[0] != tr[3] || tr[4] <= tr[3] || tr[9] != tr[4] {
		t.Errorf("Translate: %v", tr)
	}
	cc := CutoverConfig{Client: cli, Logger: zaptest.NewLogger(t)}
	p7, p9 := bytes.Repeat([]byte{7}, 16), bytes.Repeat([]byte{9}, 16)
	skipped, _, err := TakeOver(ctx, cc, []MigratedSession{{ID: 7, Passwd: p7, TimeoutMs: 5000}, {ID: 9, Passwd: p9, TimeoutMs: 4000}, {ID: -3, TimeoutMs: 4000}})
	if err != nil || len(skipped) != 1 || skipped[0] != -3 {
		t.Fatalf("TakeOver: skipped %v, %v", skipped, err)
	}
	keys := keySchema{prefix: "/zk/"}
	for _, s := range []struct {
		id     int64
		passwd []byte
		to     int32
	}{{7, p7, 5000}, {9, p9, 4000}} {
		r, err := cli.Get(ctx, keys.session(encoding.SessionID(s.id)))
		if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != s.id {
			t.Fatalf("session key of %d: %v %v", s.id, r, err)
		}
		v, err := decodeSessionValue(r.Kvs[0].Value)
		if err != nil || !bytes.Equal(v.passwd, s.passwd) || v.timeoutMs != s.to || v.owner != 0 {
			t.Errorf("session value of %d: %+v %v", s.id, v, err)
		}
	}

	r, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	zxid := (r.Header.Revision+300)<<16 | 5
	if err := PadPast(ctx, cc, zxid); err != nil {
		t.Fatal(err)
	}
	r, err = cli.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil || r.Header.Revision != zxid>>16+1 {
		t.Fatalf("revision %d after padding past %#x, want %d (%v)", r.Header.Revision, zxid, zxid>>16+1, err)
	}
	if err := PadPast(ctx, cc, zxid); err != nil {
		t.Fatal(err)
	}

	m.Close()
	if _, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1}); err == nil {
		t.Fatal("New served a prefix holding the migration's marker")
	}
	table := ZxidTable{Last: 0x500, Zxids: map[int64]encoding.Zxid{0x100: 0x30001, 0x400: 0x50002}}
	if err := EndMigration(ctx, cc, table); err != nil {
		t.Fatal(err)
	}
	if err := EndMigration(ctx, cc, ZxidTable{}); !errors.Is(err, ErrNoMarker) {
		t.Errorf("EndMigration again: %v", err)
	}
	if err := PadPast(ctx, cc, zxid); !errors.Is(err, ErrNoMarker) {
		t.Errorf("PadPast without the marker: %v", err)
	}
	b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A setWatches' relativeZxid up to ZooKeeper's last is ZooKeeper's: the newest zetcd zxid
	// at or below it; above, zetcd's own.
	for rel, want := range map[encoding.Zxid]encoding.Zxid{0x50: 0, 0x100: 0x30001, 0x3ff: 0x30001, 0x400: 0x50002, 0x500: 0x50002, 0x501: 0x501, 0x70003: 0x70003} {
		if got := b.migrated.translate(rel); got != want {
			t.Errorf("translate(%#x) = %#x, want %#x", rel, got, want)
		}
	}
}

// TestCutoverAgreement: a copy loads into a prefix that holds only a migration's agreement
// keys; TakeOver tells the leases it granted, which RevokeTakenOver revokes with their session
// keys while the mirror's stays; EndMigrationIf leaves the marker when a guard fails.
func TestCutoverAgreement(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	agreed := MigrationKeys("/zk/") + "p/1"
	if _, err := cli.Put(ctx, agreed, ""); err != nil {
		t.Fatal(err)
	}
	m := NewMirror(MirrorConfig{Client: cli, Logger: zaptest.NewLogger(t), Source: "test"})
	defer m.Close()
	st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{7: {ID: 7, Timeout: 5000}}, LastZxid: 4}
	for _, n := range []*zkdata.Node{
		zkNode("/", "", importACL, 0, 0, 4, 0, 2, 0, 2, 0),
		zkNode("/zookeeper", "", importACL, 0, 0, 0, 0, 0, 0, 0, 0),
		zkNode("/e", "", importACL, 4, 4, 4, 0, 0, 0, 0, 7),
	} {
		st.Nodes[n.Path] = n
	}
	if _, err := m.Load(ctx, st, 4); err != nil {
		t.Fatalf("load beside the agreement's keys: %v", err)
	}
	cc := CutoverConfig{Client: cli, Logger: zaptest.NewLogger(t)}
	_, granted, err := TakeOver(ctx, cc, []MigratedSession{{ID: 7, TimeoutMs: 5000}, {ID: 9, TimeoutMs: 4000}})
	if err != nil || len(granted) != 1 || granted[0] != 9 {
		t.Fatalf("TakeOver: granted %v, %v; want [9]", granted, err)
	}
	if err := RevokeTakenOver(ctx, cc, granted); err != nil {
		t.Fatal(err)
	}
	keys := keySchema{prefix: "/zk/"}
	for id, want := range map[int64]int{7: 1, 9: 0} {
		r, err := cli.Get(ctx, keys.session(encoding.SessionID(id)))
		if err != nil || len(r.Kvs) != want {
			t.Errorf("session key of %d after the revocation: %v %v, want %d", id, r, err, want)
		}
	}
	guard := clientv3.Compare(clientv3.Value(agreed), "=", "other")
	if err := EndMigrationIf(ctx, cc, ZxidTable{}, []clientv3.Cmp{guard}); !errors.Is(err, ErrNoMarker) {
		t.Errorf("EndMigrationIf with a failing guard: %v", err)
	}
	if v, ok, err := ImportMarker(ctx, cli, "/zk/"); err != nil || !ok || !IsMirrorOf(v, "test") || IsMirrorOf(v, "tes") {
		t.Errorf("the marker after a failed guard: %q %v %v", v, ok, err)
	}
}

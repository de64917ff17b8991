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
// etcd's revision goes past a ZooKeeper zxid, and New serves once the marker is gone, every
// Stat showing ZooKeeper's zxids for what the copy wrote and zetcd's own, above them, after.
func TestCutover(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	m := NewMirror(MirrorConfig{Client: cli, Logger: zaptest.NewLogger(t), Source: "test"})
	st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{7: {ID: 7, Timeout: 5000}}, LastZxid: 0x14}
	for _, n := range []*zkdata.Node{
		zkNode("/", "", importACL, 0, 0, 0x11, 0, 2, 0, 2, 0),
		zkNode("/zookeeper", "", importACL, 0, 0, 0, 0, 0, 0, 0, 0),
		zkNode("/a", "x", importACL, 0x11, 0x13, 0x14, 1, 1, 0, 1, 0),
		zkNode("/a/e", "", importACL, 0x14, 0x14, 0x14, 0, 0, 0, 0, 7),
	} {
		st.Nodes[n.Path] = n
	}
	if _, err := m.Load(ctx, st, 0x14); err != nil {
		t.Fatal(err)
	}
	mapped := m.Mapped()
	if len(mapped) != 4 || mapped[0x11] >= mapped[0x13] || mapped[0x13] >= mapped[0x14] || mapped[0x11] == 0x11 {
		t.Errorf("Mapped: %v", mapped)
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
	table := ZxidTable{Last: st.LastZxid, Zxids: mapped}
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
	s := openTestSession(t, b)
	want := map[string][3]encoding.Zxid{"/": {0, 0, 0x11}, "/zookeeper": {0, 0, 0}, "/a": {0x11, 0x13, 0x14}, "/a/e": {0x14, 0x14, 0x14}}
	for p, w := range want {
		r, _, err := s.Exists(ctx, &encoding.ExistsRequest{Path: p})
		if err != nil || [3]encoding.Zxid{r.Stat.Czxid, r.Stat.Mzxid, r.Stat.Pzxid} != w {
			t.Errorf("%s after the cutover: %+v %v, want czxid, mzxid, pzxid %#x", p, r, err, w)
		}
	}
	states, _ := b.tree.watchedStates([]string{"/a", "/a/e"})
	if a := states["/a"]; a.Czxid != 0x11 || a.Mzxid != 0x13 || a.Pzxid != 0x14 {
		t.Errorf("/a's state for a catch-up: %+v", a)
	}

	// zetcd's own zxids, above ZooKeeper's, beside the copy's.
	c, _, err := s.Create2(ctx, &encoding.CreateRequest{Path: "/a/f", ACL: openACL})
	if err != nil || int64(c.Stat.Czxid) <= zxid {
		t.Fatalf("a create after the cutover: %+v %v, want a czxid above %#x", c, err, zxid)
	}
	sd, _, err := s.SetData(ctx, &encoding.SetDataRequest{Path: "/a", Data: []byte("y"), Version: -1})
	if err != nil || sd.Stat.Czxid != 0x11 || sd.Stat.Mzxid <= c.Stat.Czxid || sd.Stat.Pzxid != c.Stat.Czxid {
		t.Errorf("setData after the cutover: %+v %v", sd, err)
	}
}

// TestZxidTableChunks: a table too large for one etcd request goes in chunks, and New's load
// reads it back whole; a chunk missing is a corrupt table, said so.
func TestZxidTableChunks(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	keys := keySchema{prefix: "/zk/"}
	table := ZxidTable{Last: 0x7_0000_0000, Zxids: map[int64]encoding.Zxid{}}
	const pairs = 200_000
	for i := range int64(pairs) {
		table.Zxids[0x5_0000_0000+i*0x1_0003] = zxidOf(10+i*3, int(i%7))
	}
	if _, err := cli.Put(ctx, keys.importMarker(), "test"); err != nil {
		t.Fatal(err)
	}
	if err := EndMigration(ctx, CutoverConfig{Client: cli}, table); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Get(ctx, keys.prefix+"z/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) < 2 {
		t.Fatalf("chunks: %d, %v; want several", len(r.Kvs), err)
	}
	for _, kv := range r.Kvs {
		if len(kv.Value) > zxidChunkBytes {
			t.Errorf("chunk %s: %d bytes", kv.Key, len(kv.Value))
		}
	}
	b := &Store{kv: cli, keys: keys}
	if err := b.loadMigratedZxids(ctx); err != nil {
		t.Fatal(err)
	}
	if len(b.migrated.zk) != pairs || b.migrated.last != 0x7_0000_0000 || b.migrated.copyLast != zxidOf(10+(pairs-1)*3, (pairs-1)%7) {
		t.Fatalf("loaded %d pairs, last %#x, copy's last %#x", len(b.migrated.zk), b.migrated.last, b.migrated.copyLast)
	}
	for zk, z := range table.Zxids {
		if got, ok := b.migrated.zooKeeper(z); !ok || int64(got) != zk {
			t.Fatalf("zooKeeper(%#x) = %#x %v, want %#x", z, got, ok, zk)
		}
	}
	for _, z := range []encoding.Zxid{0, b.migrated.copyLast + 1, 1 << 48} {
		if got, ok := b.migrated.zooKeeper(z); !ok || got != z {
			t.Errorf("zooKeeper(%#x) = %#x %v: not the copy's, shown as it is", z, got, ok)
		}
	}
	if _, ok := b.migrated.zooKeeper(zxidOf(11, 0)); ok {
		t.Error("a zxid of the copy the table lacks is taken")
	}
	if _, err := cli.Delete(ctx, keys.migratedZxidsChunk(1)); err != nil {
		t.Fatal(err)
	}
	if err := b.loadMigratedZxids(ctx); !errors.Is(err, errCorruptZxidTable) {
		t.Errorf("a table with a chunk missing: %v", err)
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

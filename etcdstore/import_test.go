package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/zkdata"
)

var importACL = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

// synthState is a small State in epoch 1: system nodes, a node changed in another revision
// than the one that created it, one with children created and deleted, a container, a TTL
// node, an ephemeral and its session, and a session whose id cannot be a lease's.
func synthState() *zkdata.State {
	const e1 = 1 << 32
	st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{7: {ID: 7, Timeout: 10000}, -5: {ID: -5, Timeout: 4000}}, LastZxid: e1 | 0x30005}
	add := func(path string, data []byte, s encoding.Stat) {
		s.DataLength = int32(len(data))
		st.Nodes[path] = &zkdata.Node{Path: path, Data: data, ACL: importACL, Stat: s}
	}
	add("/", []byte{}, encoding.Stat{Pzxid: e1 | 0x30001, Cversion: 4, NumChildren: 4})
	add("/zookeeper", []byte{}, encoding.Stat{Cversion: -2, NumChildren: 2})
	add("/zookeeper/quota", []byte{}, encoding.Stat{})
	add("/zookeeper/config", []byte{}, encoding.Stat{Aversion: -1})
	add("/a", []byte("x"), encoding.Stat{Czxid: e1 | 1, Mzxid: e1 | 0x20003, Pzxid: e1 | 0x30004, Ctime: 5, Mtime: 9,
		Version: 41, Aversion: 3, Cversion: 9, NumChildren: 1})
	add("/a/b", nil, encoding.Stat{Czxid: e1 | 0x30004, Mzxid: e1 | 0x30004, Pzxid: e1 | 0x30004, Ctime: 7, Mtime: 7})
	add("/c", []byte("c"), encoding.Stat{Czxid: e1 | 0x30001, Mzxid: e1 | 0x30001, Pzxid: e1 | 0x30001, EphemeralOwner: encoding.SessionID(zkdata.ContainerOwner)})
	ttl, _ := zkdata.TTLOwner(3600_000)
	add("/t", []byte("t"), encoding.Stat{Czxid: e1 | 2, Mzxid: e1 | 2, Pzxid: e1 | 2, EphemeralOwner: encoding.SessionID(ttl)})
	add("/a/eph", nil, encoding.Stat{Czxid: e1 | 0x30005, Mzxid: e1 | 0x30005, Pzxid: e1 | 0x30005, EphemeralOwner: 7})
	add("/a/eph-neg", nil, encoding.Stat{Czxid: e1 | 0x30005, Mzxid: e1 | 0x30005, Pzxid: e1 | 0x30005, EphemeralOwner: -5})
	st.Nodes["/a"].Stat.NumChildren = 3 // the ephemerals too
	st.Nodes["/a"].Stat.Cversion = 7
	return st
}

// TestImportSynthetic imports synthState with exact zxids, and renumbered: zetcd shows
// ZooKeeper's Stats either way, the renumbered zxids through the table of zxids.
func TestImportSynthetic(t *testing.T) {
	for _, mode := range []ImportZxids{ImportExact, ImportRenumber} {
		t.Run(string(mode), func(t *testing.T) { testImportSynthetic(t, mode) })
	}
}

func testImportSynthetic(t *testing.T, mode ImportZxids) {
	cli := startEtcd(t)
	st := synthState()
	res, err := Import(context.Background(), ImportConfig{Client: cli, Zxids: mode, Logger: zaptest.NewLogger(t)}, st)
	if err != nil {
		t.Fatal(err)
	}
	if res.Zxids != mode || res.Ephemerals != 1 || res.Sessions != 1 || res.Nodes != 9 || !res.ResumeOK || res.ZxidTable != (mode == ImportRenumber) {
		t.Fatalf("result %+v", res)
	}
	if want := int64(0x10003) + 2; mode == ImportExact && res.FinalRev != want { // the session key's transaction, then the last
		t.Errorf("final revision %d, want %d", res.FinalRev, want)
	}
	b, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if res.SkippedSessions != 1 || res.SkippedEphemerals != 1 {
		t.Errorf("skipped: %+v", res)
	}
	if _, _, _, ok, _ := b.tree.node("/a/eph-neg", false); ok {
		t.Errorf("the ephemeral of session -5 was imported")
	}
	for path, zn := range st.Nodes {
		if path == "/a/eph-neg" {
			continue
		}
		n, _, _, ok, err := b.tree.node(path, false)
		if !ok || err != nil {
			t.Fatalf("%s: not imported: %v", path, err)
		}
		want := zn.ClientStat()
		if path == "/a" {
			want.NumChildren, want.Cversion = 2, 8 // without the ephemeral of session -5
		}
		if n.Stat != want || string(n.Data) != string(zn.Data) || (n.Data == nil) != (zn.Data == nil) {
			t.Errorf("%s: Stat %+v data %q, want %+v %q", path, n.Stat, n.Data, want, zn.Data)
		}
	}
	if n, _, _, _, _ := b.tree.node("/t", false); n.Meta.Mode != encoding.ModePersistentWithTTL || n.Meta.TTL != 3600_000 {
		t.Errorf("/t: meta %+v", n.Meta)
	}
	r, err := cli.Get(context.Background(), "/zk/r", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(r.Kvs) != 2 {
		t.Errorf("reap index keys: %v %v", r, err)
	}
	r, err = cli.Get(context.Background(), "/zk/s/0000000000000007")
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != 7 {
		t.Fatalf("session key: %v %v", r, err)
	}
	if sv, err := decodeSessionValue(r.Kvs[0].Value); err != nil || sv.timeoutMs != 10000 || sv.owner != 0 || string(sv.passwd) != string(zkSessionPasswd(7)) {
		t.Errorf("session value %+v %v", sv, err)
	}
}

// TestZkSessionPasswd: java.util.Random's sequence (new Random(42).nextInt() is -1170105035)
// drawn as Random.nextBytes draws it.
func TestZkSessionPasswd(t *testing.T) {
	p := zkSessionPasswd(42 ^ 0xB3415C00)
	if got := int32(uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24); got != -1170105035 {
		t.Errorf("first int %d, want -1170105035", got)
	}
}

// TestImportRefuses: a prefix that holds a key is not imported into, a zxid etcd has passed
// cannot be exact, and a store does not start on a prefix whose import did not finish.
func TestImportRefuses(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/used/n/1/x", ""); err != nil {
		t.Fatal(err)
	}
	_, err := Import(ctx, ImportConfig{Client: cli, Prefix: "/used/"}, synthState())
	if err == nil || !strings.Contains(err.Error(), `prefix "/used/" is not empty (it holds "/used/n/1/x")`) {
		t.Errorf("import into a used prefix: %v", err)
	}

	st := synthState()
	st.Sessions = nil                                                                               // lease ids are etcd's, not a prefix's: one import may hold them
	st.Nodes["/a/b"].Stat.Czxid, st.Nodes["/a/b"].Stat.Mzxid, st.Nodes["/a/b"].Stat.Pzxid = 5, 5, 5 // epoch 0
	_, err = Import(ctx, ImportConfig{Client: cli, Prefix: "/exact/", Zxids: ImportExact}, st)
	if err == nil || !strings.Contains(err.Error(), "exact zxids impossible") || !strings.Contains(err.Error(), `import marker "/exact/i"`) {
		t.Errorf("exact import of epoch 0: %v", err)
	}
	_, err = New(ctx, Config{Client: cli, Prefix: "/exact/", ReapInterval: -1})
	if !errors.Is(err, errImportUnfinished) || !strings.Contains(err.Error(), `an import into prefix "/exact/" did not finish`) {
		t.Errorf("New on an unfinished import: %v", err)
	}

	res, err := Import(ctx, ImportConfig{Client: cli, Prefix: "/auto/"}, st)
	if err != nil || res.Zxids != ImportRenumber || !strings.Contains(res.Why, "already passed") {
		t.Errorf("auto import of epoch 0: %+v %v", res, err)
	}
}

// TestImportLayouts: an exact revision over etcd's limits fails naming the limit; renumbered
// revisions are packed within them, in order.
func TestImportLayouts(t *testing.T) {
	p, err := planImport(keySchema{prefix: "/zk/"}, synthState())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.exactLayout(2, 3, 1<<20); err == nil || !strings.Contains(err.Error(), "--max-txn-ops 3") {
		t.Errorf("exact layout over 3 ops: %v", err)
	}
	l, err := p.renumberedLayout(10, 3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var prev encoding.Zxid
	for _, z := range p.zxids {
		if l.mapped[z] <= prev {
			t.Errorf("zxid %#x renumbered %#x, not after %#x", z, l.mapped[z], prev)
		}
		prev = l.mapped[z]
	}
	for _, r := range l.revs {
		if r.ops > 3 {
			t.Errorf("revision %d has %d ops", r.rev, r.ops)
		}
	}
}

// bulkState is a tree as a bulk load leaves it in ZooKeeper: parents of 500 children of 128
// bytes each, each parent's children created by one multi (one zxid), in epoch 0.
func bulkState(nodes int) *zkdata.State {
	const perParent = 500
	st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{}}
	add := func(path string, data []byte, s encoding.Stat) {
		s.DataLength = int32(len(data))
		st.Nodes[path] = &zkdata.Node{Path: path, Data: data, ACL: importACL, Stat: s}
	}
	parents := (nodes + perParent - 1) / perParent
	add("/", []byte{}, encoding.Stat{Pzxid: encoding.Zxid(parents), Cversion: int32(parents + 1), NumChildren: int32(parents + 1)})
	add("/zookeeper", []byte{}, encoding.Stat{Cversion: -2, NumChildren: 2})
	add("/zookeeper/quota", []byte{}, encoding.Stat{})
	add("/zookeeper/config", []byte{}, encoding.Stat{Aversion: -1})
	data := []byte(strings.Repeat("x", 128))
	for p := range parents {
		z := encoding.Zxid(p + 1)
		kids := min(perParent, nodes-p*perParent)
		parent := fmt.Sprintf("/p%04d", p)
		add(parent, []byte{}, encoding.Stat{Czxid: z, Mzxid: z, Pzxid: z, Cversion: int32(kids), NumChildren: int32(kids)})
		for i := range kids {
			add(fmt.Sprintf("%s/%04d", parent, i), data, encoding.Stat{Czxid: z, Mzxid: z, Pzxid: z})
		}
		st.LastZxid = int64(z)
	}
	return st
}

// BenchmarkImport imports a bulk-loaded tree of $ZETCD_IMPORT_NODES nodes (default 100,000)
// into a fresh embedded etcd, as `zetcd import` does: the write side of an import.
func BenchmarkImport(b *testing.B) {
	nodes := 100_000
	if v, err := strconv.Atoi(os.Getenv("ZETCD_IMPORT_NODES")); err == nil && v > 0 {
		nodes = v
	}
	st := bulkState(nodes)
	for b.Loop() {
		b.StopTimer()
		e, err := embedetcd.Start(embedetcd.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		cli, leases := e.InProcessClient()
		b.StartTimer()
		res, err := Import(context.Background(), ImportConfig{Client: cli, LeaseClient: leases,
			MaxTxnOps: embedetcd.MaxTxnOps, MaxRequestBytes: embedetcd.MaxRequestBytes}, st)
		if err != nil || res.Nodes != len(st.Nodes) {
			b.Fatalf("import: %+v %v", res, err)
		}
		b.StopTimer()
		e.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(nodes)*float64(b.N)/b.Elapsed().Seconds(), "znodes/s")
}

// TestImportKeys: the keys an import builds are keySchema's.
func TestImportKeys(t *testing.T) {
	k := keySchema{prefix: "/zk/"}
	for _, path := range []string{"/", "/a", "/a/b/c", "/\x00x"} {
		n := &zkdata.Node{Path: path}
		for kind, want := range map[byte]string{'n': k.data(path), 'c': k.childCreates(path), 'd': k.childDeletes(path), 'o': k.offsets(path), 'r': k.reapIndex(path)} {
			if got := string(k.appendImportKey([]byte("x"), importOp{kind: kind, node: n})); got != "x"+want {
				t.Errorf("%s, kind %c: %q, want %q", path, kind, got, "x"+want)
			}
		}
	}
}

package etcdstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// mirrorHistory is a ZooKeeper's tree as a follower reports it: states read after their events,
// some holding zxids whose other nodes come later.
type mirrorHistory struct {
	t     *testing.T
	m     *Mirror
	nodes map[string]*zkdata.Node // ZooKeeper's tree as last reported
}

func zkNode(p string, data string, acl []encoding.ACL, cz, mz, pz int64, version, cversion, aversion, kids int32, owner int64) *zkdata.Node {
	return &zkdata.Node{Path: p, Data: []byte(data), ACL: acl, Stat: encoding.Stat{
		Czxid: encoding.Zxid(cz), Mzxid: encoding.Zxid(mz), Pzxid: encoding.Zxid(pz), Ctime: cz * 10, Mtime: mz * 10,
		Version: version, Cversion: cversion, Aversion: aversion, NumChildren: kids, DataLength: int32(len(data)),
		EphemeralOwner: encoding.SessionID(owner)}}
}

func (h *mirrorHistory) report(n *zkdata.Node) {
	h.nodes[n.Path] = n
	h.m.Change(n.Path, n)
}

func (h *mirrorHistory) delete(p string) {
	delete(h.nodes, p)
	h.m.Change(p, nil)
}

func (h *mirrorHistory) flush(settled int64) {
	h.t.Helper()
	if _, err := h.m.Flush(context.Background(), settled); err != nil {
		h.t.Fatal(err)
	}
}

// TestMirror writes a tree whose states run ahead of the settled zxid, then changes (setData,
// setACL, deletes, a node created again, ephemerals of a session that ends and of a new one),
// and checks the copy a store serves: every Stat field, zxids by their order.
func TestMirror(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	open := importACL
	other := []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}
	m := NewMirror(MirrorConfig{Client: cli, Logger: zaptest.NewLogger(t), Source: "test", MaxTxnOps: 20,
		Timeouts: func(ids []int64) map[int64]int32 { return map[int64]int32{8: 6000} }})
	defer m.Close()
	h := &mirrorHistory{t: t, m: m, nodes: map[string]*zkdata.Node{}}

	// Read after zxid 12, settled at 10: /a's setData (11) and /b's create (12) are ahead.
	st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{7: {ID: 7, Timeout: 5000}}, LastZxid: 12}
	for _, n := range []*zkdata.Node{
		zkNode("/", "", open, 0, 0, 12, 0, 3, 0, 5, 0),
		zkNode("/zookeeper", "", open, 0, 0, 0, 0, -2, 0, 2, 0),
		zkNode("/zookeeper/quota", "", open, 0, 0, 0, 0, 0, 0, 0, 0),
		zkNode("/zookeeper/config", "", open, 0, 0, 0, 0, 0, -1, 0, 0),
		zkNode("/a", "a1", open, 2, 11, 6, 1, 2, 0, 0, 0),
		zkNode("/b", "b", open, 12, 12, 12, 0, 0, 0, 0, 0),
		zkNode("/c", "c", open, 3, 3, 3, 0, 0, 0, 0, 0),
		zkNode("/e", "", open, 4, 4, 4, 0, 0, 0, 0, 7),
	} {
		st.Nodes[n.Path] = n
		h.nodes[n.Path] = n
	}
	if _, err := m.Load(ctx, st, 10); err != nil {
		t.Fatal(err)
	}
	if p := m.Progress(); p.Written != 10 || p.Pending != 3 {
		t.Errorf("after the load: %+v, want written 0xa and /, /a, /b pending", p)
	}
	h.flush(12)
	h.report(zkNode("/a", "a1", other, 2, 11, 6, 1, 2, 1, 0, 0)) // setACL
	h.delete("/c")
	h.report(zkNode("/", "", open, 0, 0, 13, 0, 5, 0, 4, 0))
	h.report(zkNode("/c", "again", open, 14, 14, 14, 0, 0, 0, 0, 0)) // created again
	h.report(zkNode("/", "", open, 0, 0, 14, 0, 5, 0, 5, 0))
	h.report(zkNode("/b", "b2", open, 12, 17, 12, 1, 0, 0, 0, 0)) // read after its setData (17)
	h.delete("/e")                                                // session 7 ends
	h.report(zkNode("/", "", open, 0, 0, 15, 0, 7, 0, 4, 0))
	h.report(zkNode("/f", "", open, 16, 16, 16, 0, 0, 0, 0, 8)) // session 8's
	h.report(zkNode("/", "", open, 0, 0, 16, 0, 7, 0, 5, 0))
	// An etcd that fails a batch: it is written again.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Flush(gone, 16); err == nil || errors.Is(err, ErrCopyImpossible) {
		t.Errorf("Flush on a canceled context: %v", err)
	}
	h.flush(16)
	if p := m.Progress(); p.Written != 16 || p.Pending != 1 {
		t.Errorf("at 16: %+v, want /b pending", p)
	}
	h.flush(17)
	if p := m.Progress(); p.Written != 17 || p.Pending != 0 {
		t.Errorf("at 17: %+v", p)
	}
	m.Close()

	if ttl, err := cli.TimeToLive(ctx, 7); err != nil || ttl.TTL != -1 {
		t.Errorf("session 7's lease: %+v %v, want revoked", ttl, err)
	}
	r, err := cli.Get(ctx, "/zk/s/0000000000000008")
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != 8 {
		t.Fatalf("session 8's key: %v %v", r, err)
	}
	if sv, err := decodeSessionValue(r.Kvs[0].Value); err != nil || sv.timeoutMs != 6000 || string(sv.passwd) != string(zkSessionPasswd(8)) {
		t.Errorf("session 8's value %+v %v", sv, err)
	}
	if _, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1}); !errors.Is(err, errImportUnfinished) || !strings.Contains(err.Error(), "holds a copy of a running ZooKeeper") {
		t.Fatalf("a store on the copy: %v", err)
	}
	if _, err := cli.Delete(ctx, "/zk/i"); err != nil {
		t.Fatal(err)
	}
	b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	checkCopy(t, b, h.nodes)
}

// checkCopy compares the store's tree with want: every field, zxids by their rank among each
// side's zxids.
func checkCopy(t *testing.T, b *Store, want map[string]*zkdata.Node) {
	t.Helper()
	got := map[string]node{}
	for p := range want {
		n, _, _, ok, err := b.tree.node(p, false)
		if !ok || err != nil {
			t.Fatalf("%s: not in the copy: %v", p, err)
		}
		got[p] = n
	}
	rank := func(zs map[encoding.Zxid]bool) map[encoding.Zxid]int {
		sorted := slices.Sorted(maps.Keys(zs))
		out := map[encoding.Zxid]int{}
		for i, z := range sorted {
			out[z] = i
		}
		return out
	}
	zw, zg := map[encoding.Zxid]bool{}, map[encoding.Zxid]bool{}
	for p, n := range want {
		for _, z := range []encoding.Zxid{n.Stat.Czxid, n.Stat.Mzxid, n.Stat.Pzxid} {
			zw[z] = true
		}
		s := got[p].Stat
		for _, z := range []encoding.Zxid{s.Czxid, s.Mzxid, s.Pzxid} {
			zg[z] = true
		}
	}
	rw, rg := rank(zw), rank(zg)
	for p, n := range want {
		g, w := got[p].Stat, n.Stat
		for _, s := range []*encoding.Stat{&g, &w} {
			r := rg
			if s == &w {
				r = rw
			}
			s.Czxid, s.Mzxid, s.Pzxid = encoding.Zxid(r[s.Czxid]), encoding.Zxid(r[s.Mzxid]), encoding.Zxid(r[s.Pzxid])
		}
		if g != w || string(got[p].Data) != string(n.Data) || !slices.Equal(got[p].Meta.ACL, n.ACL) {
			t.Errorf("%s: %+v %q %v, want %+v %q %v (zxids as ranks)", p, g, got[p].Data, got[p].Meta.ACL, w, n.Data, n.ACL)
		}
	}
}

// TestMirrorEpochs: the load numbers ZooKeeper's zxids above themselves; a zxid of ZooKeeper's
// next epoch (a leader election) is numbered above
// itself, etcd's revision padded past it first (at most an epoch's 65,536 revisions), and the
// store serves the node at that zxid; within the epoch no padding follows. Past MaxPadding
// the copy goes on unpadded and says which zxid it numbered below itself.
func TestMirrorEpochs(t *testing.T) {
	ctx := context.Background()
	open := importACL
	epoch := func(e, counter int64) int64 { return e<<32 | counter }
	tree := func(last int64) *zkdata.State {
		st := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{}, LastZxid: last}
		for _, n := range []*zkdata.Node{
			zkNode("/", "", open, 0, 0, epoch(1, 1), 0, 0, 0, 2, 0),
			zkNode("/zookeeper", "", open, 0, 0, 0, 0, -2, 0, 2, 0),
			zkNode("/zookeeper/quota", "", open, 0, 0, 0, 0, 0, 0, 0, 0),
			zkNode("/zookeeper/config", "", open, 0, 0, 0, 0, 0, -1, 0, 0),
			zkNode("/a", "a1", open, epoch(1, 1), epoch(1, 1), epoch(1, 1), 0, 0, 0, 0, 0),
		} {
			st.Nodes[n.Path] = n
		}
		return st
	}

	cli := startEtcd(t)
	m := NewMirror(MirrorConfig{Client: cli, Logger: zaptest.NewLogger(t), Source: "test"})
	defer m.Close()
	if _, err := m.Load(ctx, tree(epoch(1, 1)), epoch(1, 1)); err != nil {
		t.Fatal(err)
	}
	loaded := m.Progress().Padding
	if got := m.Mapped()[epoch(1, 1)]; int64(got) <= epoch(1, 1) {
		t.Errorf("the load numbered ZooKeeper's zxid %#x %#x, not above it", epoch(1, 1), int64(got))
	}
	set := func(mz int64, version int32) {
		t.Helper()
		m.Change("/a", zkNode("/a", "a", open, epoch(1, 1), mz, epoch(1, 1), version, 0, 0, 0, 0))
		if _, err := m.Flush(ctx, mz); err != nil {
			t.Fatal(err)
		}
		if got := m.Mapped()[mz]; int64(got) <= mz {
			t.Errorf("ZooKeeper's zxid %#x is the copy's %#x, not above it", mz, got)
		}
	}
	set(epoch(1, 2), 1)
	if p := m.Progress(); p.Padding != loaded {
		t.Errorf("padding within the load's epoch: %d, the load's %d", p.Padding, loaded)
	}
	set(epoch(2, 1), 2)
	if p := m.Progress(); p.Padding-loaded <= 0 || p.Padding-loaded > 1<<16 || p.Unpadded != 0 {
		t.Errorf("into the next epoch: %+v after the load's %d", p, loaded)
	}
	set(epoch(2, 2), 3)
	m.Close()
	if _, err := cli.Delete(ctx, "/zk/i"); err != nil {
		t.Fatal(err)
	}
	b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n, _, _, ok, err := b.tree.node("/a", false); !ok || err != nil || int64(n.Stat.Mzxid) <= epoch(2, 2) || n.Stat.Version != 3 {
		t.Errorf("/a served: %+v %v, want version 3 at an mzxid above %#x", n.Stat, err, epoch(2, 2))
	}

	bounded := NewMirror(MirrorConfig{Client: startEtcd(t), Logger: zaptest.NewLogger(t), Source: "test", MaxPadding: 100_000})
	defer bounded.Close()
	if _, err := bounded.Load(ctx, tree(epoch(1, 1)), epoch(1, 1)); err != nil {
		t.Fatal(err)
	}
	bounded.Change("/a", zkNode("/a", "a", open, epoch(1, 1), epoch(3, 1), epoch(1, 1), 1, 0, 0, 0, 0))
	p, err := bounded.Flush(ctx, epoch(3, 1))
	if err != nil || p.Unpadded != epoch(3, 1) || p.Padding >= 100_000+1<<16 || p.Written != epoch(3, 1) {
		t.Errorf("two epochs ahead, past the bound: %+v %v, want written unpadded", p, err)
	}
}

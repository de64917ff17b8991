package zkdata_test

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// This file writes data directories as ZooKeeper writes them, to test what a standalone server
// does not write (reconfig, logs of older versions) and to time large loads.

// synthNode is a node of a written snapshot.
type synthNode struct {
	path     string
	data     []byte
	acl      int64
	zxid     int64 // czxid, mzxid and pzxid
	cversion int32 // stored: the count of creates of children
	owner    int64
}

// snapWriter writes a snapshot's uncompressed stream and keeps its Adler32.
type snapWriter struct {
	w   io.Writer
	sum hash.Hash32
	e   encoding.Encoder
}

func (s *snapWriter) flush() {
	b := s.e.Bytes()
	s.sum.Write(b)
	if _, err := s.w.Write(b); err != nil {
		panic(err)
	}
	s.e = encoding.Encoder{}
}

func (s *snapWriter) seal() {
	s.flush()
	s.e.Int64(int64(s.sum.Sum32()))
	s.e.String("/")
	s.flush()
}

// writeSnapshot writes version-2/snapshot.<zxid>[.ext] in dir as FileSnap.serialize does in
// 3.9, the nodes given by next in order until it returns false.
func writeSnapshot(t testing.TB, dir string, zxid int64, ext string, sessions map[int64]int32, acls map[int64][]encoding.ACL, next func() (synthNode, bool)) {
	t.Helper()
	v := filepath.Join(dir, "version-2")
	testenv.Must(t, os.MkdirAll(v, 0o755))
	name := fmt.Sprintf("snapshot.%x", zxid)
	if ext != "" {
		name += "." + ext
	}
	f, err := os.Create(filepath.Join(v, name))
	testenv.Must(t, err)
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	var out io.Writer = bw
	var closer io.Closer
	switch ext {
	case "gz":
		gz := gzip.NewWriter(bw)
		out, closer = gz, gz
	case "snappy":
		sw := &snappyWriter{w: bw}
		out, closer = sw, sw
	}
	s := &snapWriter{w: out, sum: adler32.New()}
	s.e.Int32(0x5a4b534e)
	s.e.Int32(2)
	s.e.Int64(-1)
	s.e.Int32(int32(len(sessions)))
	for _, id := range slices.Sorted(mapsKeys(sessions)) {
		s.e.Int64(id)
		s.e.Int32(sessions[id])
	}
	s.e.Int32(int32(len(acls)))
	for id, list := range acls {
		s.e.Int64(id)
		s.e.Int32(int32(len(list)))
		for _, a := range list {
			a.Encode(&s.e)
		}
	}
	for {
		n, ok := next()
		if !ok {
			break
		}
		s.e.String(n.path)
		s.e.Buffer(n.data)
		s.e.Int64(n.acl)
		s.e.Int64(n.zxid)
		s.e.Int64(n.zxid)
		s.e.Int64(n.zxid * 1000)
		s.e.Int64(n.zxid * 1000)
		s.e.Int32(0)
		s.e.Int32(n.cversion)
		s.e.Int32(0)
		s.e.Int64(n.owner)
		s.e.Int64(n.zxid)
		if len(s.e.Bytes()) > 64<<10 {
			s.flush()
		}
	}
	s.e.String("/")
	s.seal()
	s.e.Int64(zxid) // DataTree.ZxidDigest
	s.e.Int32(2)
	s.e.Int64(12345)
	s.seal()
	s.e.Int64(zxid) // last processed zxid
	s.seal()
	if closer != nil {
		testenv.Must(t, closer.Close())
	}
	testenv.Must(t, bw.Flush())
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// snappyWriter is snappy-java's SnappyOutputStream: its header, then blocks of at most 32 KiB,
// each an int length and a raw snappy block. It writes the header again after the first
// block, as streams written one after the other do, which readers must accept.
type snappyWriter struct {
	w      io.Writer
	buf    []byte
	blocks int
}

var snappyHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

func (z *snappyWriter) Write(p []byte) (int, error) {
	z.buf = append(z.buf, p...)
	for len(z.buf) >= 32<<10 {
		z.block(z.buf[:32<<10])
		z.buf = z.buf[32<<10:]
	}
	return len(p), nil
}

func (z *snappyWriter) block(b []byte) {
	if z.blocks <= 1 {
		z.w.Write(snappyHeader)
	}
	z.blocks++
	c := snappy.Encode(nil, b)
	z.w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(c))))
	z.w.Write(c)
}

func (z *snappyWriter) Close() error {
	if len(z.buf) > 0 || z.blocks == 0 {
		z.block(z.buf)
	}
	return nil
}

// systemNodes are the nodes every snapshot starts with.
func systemNodes() []synthNode {
	return []synthNode{
		{path: "", data: []byte{}, acl: -1, cversion: 0},
		{path: "/zookeeper", data: []byte{}, acl: -1},
		{path: "/zookeeper/config", data: []byte{}, acl: 1},
		{path: "/zookeeper/quota", data: []byte{}, acl: -1},
	}
}

var readOnly = []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

// txnWriter writes a transaction log as FileTxnLog does.
type txnWriter struct {
	f *os.File
	w *bufio.Writer
}

func newLog(t testing.TB, dir string, zxid int64) *txnWriter {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "version-2", fmt.Sprintf("log.%x", zxid)))
	testenv.Must(t, err)
	l := &txnWriter{f: f, w: bufio.NewWriter(f)}
	var e encoding.Encoder
	e.Int32(0x5a4b4c47)
	e.Int32(2)
	e.Int64(0)
	l.w.Write(e.Bytes())
	return l
}

// txn appends an entry: the TxnHeader, the record body writes, and a TxnDigest when digest.
func (l *txnWriter) txn(session int64, zxid int64, typ encoding.Op, digest bool, body func(e *encoding.Encoder)) {
	var e encoding.Encoder
	e.Int64(session)
	e.Int32(1)
	e.Int64(zxid)
	e.Int64(zxid * 1000)
	e.Int32(int32(typ))
	if body != nil {
		body(&e)
	}
	if digest {
		e.Int32(2)
		e.Int64(99)
	}
	b := e.Bytes()
	var h encoding.Encoder
	h.Int64(int64(adler32.Checksum(b)))
	h.Int32(int32(len(b)))
	l.w.Write(h.Bytes())
	l.w.Write(b)
	l.w.WriteByte('B')
}

// close pads the log with zeros, as its preallocation does.
func (l *txnWriter) close(t testing.TB) {
	l.w.Write(make([]byte, 4096))
	testenv.Must(t, l.w.Flush())
	testenv.Must(t, l.f.Close())
}

func create(path string, data []byte, ephemeral bool, parentCVersion int32) func(e *encoding.Encoder) {
	return func(e *encoding.Encoder) {
		e.String(path)
		e.Buffer(data)
		e.Int32(-1) // null ACL: the open ACL
		e.Bool(ephemeral)
		e.Int32(parentCVersion)
	}
}

func sub(typ encoding.Op, body func(e *encoding.Encoder)) func(e *encoding.Encoder) {
	return func(e *encoding.Encoder) {
		var s encoding.Encoder
		body(&s)
		e.Int32(int32(typ))
		e.Buffer(s.Bytes())
	}
}

func multi(subs ...func(e *encoding.Encoder)) func(e *encoding.Encoder) {
	return func(e *encoding.Encoder) {
		e.Int32(int32(len(subs)))
		for _, s := range subs {
			s(e)
		}
	}
}

// TestSyntheticHistory replays by hand-written logs every txn type, in the formats of 3.4 to
// 3.9, over a snapshot of each compression.
func TestSyntheticHistory(t *testing.T) {
	for _, ext := range []string{"", "gz", "snappy"} {
		t.Run("snapshot."+ext, func(t *testing.T) {
			dir := t.TempDir()
			nodes := append(systemNodes(), synthNode{path: "/a", data: []byte("a"), acl: -1, zxid: 2})
			writeSnapshot(t, dir, 0x10, ext, map[int64]int32{7: 3000}, map[int64][]encoding.ACL{1: readOnly}, eachNode(nodes))
			writeHistory(t, dir)
			checkHistory(t, dir)
		})
	}
}

const (
	s1, s2, s3 = int64(0x101), int64(0x102), int64(0x103)
)

func writeHistory(t *testing.T, dir string) {
	l := newLog(t, dir, 0x11)
	l.txn(s1, 0x11, encoding.OpCreateSession, true, func(e *encoding.Encoder) { e.Int32(5000) })
	l.txn(s1, 0x12, encoding.OpCreate2, true, create("/a/e", []byte("e"), true, 1))
	l.txn(s1, 0x13, encoding.OpCreateContainer, true, func(e *encoding.Encoder) {
		e.String("/c")
		e.Buffer(nil)
		e.Int32(-1)
		e.Int32(2)
	})
	l.txn(s1, 0x14, encoding.OpCreateTTL, false, func(e *encoding.Encoder) {
		e.String("/t")
		e.Buffer([]byte{})
		e.Int32(-1)
		e.Int32(3)
		e.Int64(60000)
	})
	l.txn(s1, 0x15, encoding.OpMulti, true, multi(
		sub(encoding.OpCreate, create("/a/m1", []byte("m"), false, 2)),
		sub(encoding.OpSetData, func(e *encoding.Encoder) { e.String("/a"); e.Buffer([]byte("x")); e.Int32(1) }),
		sub(encoding.OpCheck, func(e *encoding.Encoder) { e.String("/a"); e.Int32(1) }),
	))
	l.close(t)

	// A failed multi, an error txn, a 3.4 create (CreateTxnV0), reconfig, setACL, delete.
	l = newLog(t, dir, 0x16)
	l.txn(s1, 0x16, encoding.OpMulti, true, multi(
		sub(encoding.OpError, func(e *encoding.Encoder) { e.Int32(0) }),
		sub(encoding.OpError, func(e *encoding.Encoder) { e.Int32(-101) }),
	))
	l.txn(s1, 0x17, encoding.OpError, true, func(e *encoding.Encoder) { e.Int32(-110) })
	l.txn(s1, 0x18, encoding.OpCreate, false, func(e *encoding.Encoder) {
		e.String("/v0")
		e.Buffer([]byte("old"))
		e.Int32(-1)
		e.Bool(false)
	})
	l.txn(s1, 0x19, encoding.OpReconfig, true, func(e *encoding.Encoder) {
		e.String("/zookeeper/config")
		e.Buffer([]byte("server.1=127.0.0.1:2888:3888:participant;2181\nversion=19"))
		e.Int32(1)
	})
	l.txn(s1, 0x1a, encoding.OpSetACL, true, func(e *encoding.Encoder) {
		e.String("/a")
		e.Int32(1)
		a := encoding.ACL{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "digest", ID: "u:hash"}}
		a.Encode(e)
		e.Int32(1)
	})
	l.txn(s1, 0x1b, encoding.OpDelete, true, func(e *encoding.Encoder) { e.String("/a/m1") })
	// closeSession naming its ephemerals (3.6+), and one without CloseSessionTxn (3.5).
	l.txn(s1, 0x1c, encoding.OpCloseSession, true, func(e *encoding.Encoder) { e.Strings([]string{"/a/e"}) })
	l.txn(s2, 0x1d, encoding.OpCreateSession, false, func(e *encoding.Encoder) { e.Int32(6000) })
	l.txn(s2, 0x1e, encoding.OpCreate, false, create("/a/e2", nil, true, 3))
	l.txn(s2, 0x1f, encoding.OpCloseSession, false, nil)
	l.txn(s3, 0x20, encoding.OpCreateSession, true, func(e *encoding.Encoder) { e.Int32(7000) })
	l.txn(s3, 0x21, encoding.OpCreate, true, create("/x3", []byte{}, true, -1))
	l.txn(s3, 0x22, encoding.OpDeleteContainer, true, func(e *encoding.Encoder) { e.String("/c") })
	l.close(t)
}

func checkHistory(t *testing.T, dir string) {
	st, err := zkdata.Load(dir, zkdata.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if st.LastZxid != 0x22 {
		t.Errorf("LastZxid = %#x, want 0x22", st.LastZxid)
	}
	if len(st.Sessions) != 2 || st.Sessions[7].Timeout != 3000 || st.Sessions[s3].Timeout != 7000 {
		t.Errorf("Sessions = %v, want 7 (3000 ms) and %#x (7000 ms)", st.Sessions, s3)
	}
	var paths []string
	for p := range st.Nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	if want := []string{"/", "/a", "/t", "/v0", "/x3", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"}; !slices.Equal(paths, want) {
		t.Errorf("nodes %v, want %v", paths, want)
	}
	a := st.Nodes["/a"]
	wantA := encoding.Stat{Czxid: 2, Mzxid: 0x15, Ctime: 2000, Mtime: 0x15 * 1000, Version: 1, Cversion: 6, Aversion: 1, DataLength: 1, Pzxid: 0x1f}
	if a.Stat != wantA || string(a.Data) != "x" || a.ACL[0].ID.Scheme != "digest" {
		t.Errorf("/a: %+v %q %v, want %+v", a.Stat, a.Data, a.ACL, wantA)
	}
	// The root: /c (parentCVersion 2), /t (3), /v0 and /x3 (-1: one more each) created, /c
	// deleted; it has /zookeeper, /a, /t, /v0 and /x3, so its cversion is 2*5-5.
	root := st.Nodes["/"]
	if root.Stat.Cversion != 5 || root.Stat.NumChildren != 5 || root.Stat.Pzxid != 0x22 {
		t.Errorf("/: %+v, want cversion 5, 5 children, pzxid 0x22", root.Stat)
	}
	if n := st.Nodes["/t"]; n.Type() != zkdata.TTL || n.TTL() != 60000 || n.ClientStat().EphemeralOwner != 0 {
		t.Errorf("/t: %v, TTL %d, owner %#x", n.Type(), n.TTL(), n.Stat.EphemeralOwner)
	}
	if n := st.Nodes["/x3"]; n.Type() != zkdata.Ephemeral || int64(n.Stat.EphemeralOwner) != s3 || n.Data == nil {
		t.Errorf("/x3: %v, owner %#x, data %v", n.Type(), n.Stat.EphemeralOwner, n.Data)
	}
	if n := st.Nodes["/v0"]; string(n.Data) != "old" || n.Stat.Czxid != 0x18 {
		t.Errorf("/v0: %q %+v", n.Data, n.Stat)
	}
	cfg := st.Nodes["/zookeeper/config"]
	if cfg.Stat.Version != 1 || cfg.Stat.Mzxid != 0x19 || len(cfg.Data) == 0 || cfg.ACL[0].Perms != encoding.PermRead {
		t.Errorf("/zookeeper/config: %+v %q %v", cfg.Stat, cfg.Data, cfg.ACL)
	}
	if len(st.Skipped) != 0 {
		t.Errorf("Skipped = %q", st.Skipped)
	}
}

// eachNode returns a writeSnapshot source that gives nodes in turn.
func eachNode(nodes []synthNode) func() (synthNode, bool) {
	i := 0
	return func() (synthNode, bool) {
		if i == len(nodes) {
			return synthNode{}, false
		}
		i++
		return nodes[i-1], true
	}
}

// TestFuzzyReplay replays over a fuzzy snapshot: one taken at 0x10 that holds what 0x11 to
// 0x14 made, as a snapshot written while the tree changes can.
func TestFuzzyReplay(t *testing.T) {
	dir := t.TempDir()
	nodes := append(systemNodes(),
		synthNode{path: "/p", data: []byte("new"), acl: -1, zxid: 0x12, cversion: 1},
		synthNode{path: "/p/c", data: []byte("c"), acl: -1, zxid: 0x13},
		synthNode{path: "/q", data: []byte("q"), acl: 9, zxid: 3}, // ACL 9 set at 0x14, after the cache was written
	)
	writeSnapshot(t, dir, 0x10, "", nil, map[int64][]encoding.ACL{1: readOnly}, eachNode(nodes))
	l := newLog(t, dir, 0x11)
	// /p had no children when 0x11 deleted it; here it has /p/c, which the delete leaves
	// behind, and the create of 0x13 must make again under the new /p.
	l.txn(1, 0x11, encoding.OpDelete, true, func(e *encoding.Encoder) { e.String("/p") })
	l.txn(1, 0x12, encoding.OpCreate, true, create("/p", []byte("new"), false, 5))
	l.txn(1, 0x13, encoding.OpCreate, true, create("/p/c", []byte("c"), false, 1))
	l.txn(1, 0x14, encoding.OpSetACL, true, func(e *encoding.Encoder) {
		e.String("/q")
		e.Int32(1)
		readOnly[0].Encode(e)
		e.Int32(1)
	})
	l.close(t)
	st, err := zkdata.Load(dir, zkdata.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	checkAll(t, st)
	p, c := st.Nodes["/p"], st.Nodes["/p/c"]
	if p == nil || c == nil || !slices.Equal(p.Children, []string{"c"}) || p.Stat.NumChildren != 1 || p.Stat.Cversion != 1 || p.Stat.Pzxid != 0x13 {
		t.Fatalf("/p %+v, /p/c %+v; want /p with its child c", p, c)
	}
	if q := st.Nodes["/q"]; !slices.Equal(q.ACL, readOnly) || q.Stat.Aversion != 1 {
		t.Errorf("/q: ACL %v, aversion %d", q.ACL, q.Stat.Aversion)
	}
	if len(st.Skipped) != 0 {
		t.Errorf("Skipped = %q", st.Skipped)
	}
}

// tornTxn appends an entry whose write stopped halfway through its bytes: the rest, and the
// end-of-record byte, are the zeros of the preallocated file.
func (l *txnWriter) tornTxn(session, zxid int64, typ encoding.Op, body func(e *encoding.Encoder)) {
	var e encoding.Encoder
	e.Int64(session)
	e.Int32(1)
	e.Int64(zxid)
	e.Int64(zxid * 1000)
	e.Int32(int32(typ))
	body(&e)
	b := e.Bytes()
	var h encoding.Encoder
	h.Int64(int64(adler32.Checksum(b)))
	h.Int32(int32(len(b)))
	l.w.Write(h.Bytes())
	l.w.Write(b[:len(b)/2])
	l.w.Write(make([]byte, len(b)-len(b)/2+1))
}

// TestRestartAfterTornWrite loads what a crash mid-write and a restart leave: a log whose last
// entry is torn, and a newer log that starts at that entry's zxid.
func TestRestartAfterTornWrite(t *testing.T) {
	dir := t.TempDir()
	nodes := systemNodes()
	writeSnapshot(t, dir, 0x10, "", nil, map[int64][]encoding.ACL{1: readOnly}, eachNode(nodes))
	l := newLog(t, dir, 0x11)
	l.txn(1, 0x11, encoding.OpCreate, true, create("/a", []byte("a"), false, -1))
	l.tornTxn(1, 0x12, encoding.OpCreate, create("/lost", []byte("never acknowledged"), false, -1))
	l.close(t)
	l = newLog(t, dir, 0x12)
	l.txn(1, 0x12, encoding.OpCreate, true, create("/b", []byte("b"), false, -1))
	l.close(t)

	st, err := zkdata.Load(dir, zkdata.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if st.LastZxid != 0x12 || st.Nodes["/a"] == nil || st.Nodes["/b"] == nil || st.Nodes["/lost"] != nil {
		t.Errorf("LastZxid %#x, nodes %v; want /a and /b at 0x12", st.LastZxid, slices.Sorted(mapsKeys(st.Nodes)))
	}
	if len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0], "log.11") {
		t.Errorf("Skipped = %q, want log.11's torn entry", st.Skipped)
	}

	// Without the restart's log, the torn entry ends the history.
	testenv.Must(t, os.Remove(filepath.Join(dir, "version-2", "log.12")))
	if st, err = zkdata.Load(dir, zkdata.Options{}); err != nil || st.LastZxid != 0x11 {
		t.Errorf("Load without log.12: LastZxid %#x, %v; want 0x11", st.LastZxid, err)
	}
}

// TestSnapshotPathTwice: a snapshot that holds a path twice loads as DataTree.deserialize
// loads it: the second node takes the path, the parent counts the name once.
func TestSnapshotPathTwice(t *testing.T) {
	dir := t.TempDir()
	nodes := append(systemNodes(),
		synthNode{path: "/a", data: []byte("first"), acl: -1, zxid: 2},
		synthNode{path: "/a", data: []byte("second"), acl: -1, zxid: 3},
	)
	nodes[0].cversion = 1
	writeSnapshot(t, dir, 3, "", nil, nil, eachNode(nodes))
	st, err := zkdata.Load(dir, zkdata.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	checkAll(t, st)
	a, root := st.Nodes["/a"], st.Nodes["/"]
	if a == nil || string(a.Data) != "second" || a.Stat.Czxid != 3 {
		t.Fatalf("/a %+v, want the second node", a)
	}
	if root.Stat.NumChildren != 2 || !slices.Equal(root.Children, []string{"a", "zookeeper"}) {
		t.Errorf("/ has %d children %q, want a and zookeeper", root.Stat.NumChildren, root.Children)
	}
}

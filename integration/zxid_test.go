package integration

import (
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// ZooKeeper's zxid semantics, which group commit (many sessions' writes in one etcd transaction,
// each numbered inside it: docs/design.md, "Group commit") must keep, read from raw frames on zetcd and on a real
// ZooKeeper:
//
//   - every write has a zxid of its own, across all sessions: a failed write consumes one too,
//     and the ops of a multi share one;
//   - per session, each write's zxid is newer than every zxid the session saw before, and no
//     reply's zxid goes back;
//   - the Stat a write's reply carries, and the Stat later reads show, hold the zxids of the
//     writes that made them, and the zxid order is the order the writes took effect in;
//   - a session's watch events come in zxid order, each at the zxid of the write that fired it,
//     and before any reply that reflects that write.
//
// Not through xchk: concurrent sessions' writes are numbered in a different order on each
// server.

const (
	zxSessions   = 16
	zxRunTime    = 3 * time.Second
	zxMaxOps     = 300 // per session: bounds the final check on a fast machine
	zxShared     = 4   // nodes every session writes
	zxBadVersion = 1 << 30
	zxTimeoutMs  = 30000 // raw sessions do not ping: long enough to outlive the test
)

// zxKind is what a write did to one node.
type zxKind int

const (
	zxCreate zxKind = iota
	zxSet
	zxDelete
)

func (k zxKind) String() string { return [...]string{"create", "setData", "delete"}[k] }

// zxEffect is one change a successful write made, with the Stat its reply carries for the
// node, if any.
type zxEffect struct {
	kind zxKind
	path string
	stat *encoding.Stat
}

// zxReply is one reply a session read.
type zxReply struct {
	session int    // the worker; -1 for the setup session
	what    string // the request, for messages
	write   bool
	zxid    encoding.Zxid    // the reply header's
	code    encoding.ErrCode // the header's code; for a failed multi, its failing op's
	effects []zxEffect       // a successful write's changes, in the order of its ops
}

func (r zxReply) String() string {
	s := fmt.Sprintf("session %d's %s at %v", r.session, r.what, r.zxid)
	if r.code != 0 {
		s += " (" + r.code.String() + ")"
	}
	return s
}

// zxWorker is one session's client: it sends one request at a time and records every reply.
// Only its goroutine uses it until run returns.
type zxWorker struct {
	id         int
	c          *itest.RawClient
	rng        *rand.Rand
	own        string // a node only this session writes
	ownVersion int32
	mine       []string // live nodes this session created, which it may delete
	names      int
	replies    []zxReply
}

func (w *zxWorker) name(prefix string) string {
	w.names++
	return fmt.Sprintf("%s-%d-%d", prefix, w.id, w.names)
}

// takeMine removes a random node from mine and returns it.
func (w *zxWorker) takeMine() string {
	i := w.rng.IntN(len(w.mine))
	p := w.mine[i]
	w.mine = slices.Delete(w.mine, i, i+1)
	return p
}

// run does requests until d has passed or zxMaxOps were sent.
func (w *zxWorker) run(d time.Duration) error {
	deadline := time.Now().Add(d)
	for i := 0; i < zxMaxOps && time.Now().Before(deadline); i++ {
		if err := w.step(); err != nil {
			return fmt.Errorf("session %d: %w", w.id, err)
		}
	}
	return nil
}

// step sends one request of the mix: creates (plain, sequential, ephemeral), setData on
// shared and own nodes, deletes, multis that succeed and fail, single writes that fail, reads.
func (w *zxWorker) step() error {
	shared := fmt.Sprintf("/zx/shared-%d", w.rng.IntN(zxShared))
	switch r := w.rng.IntN(100); {
	case r < 8:
		return w.create(encoding.OpCreate2, w.name("/zx/w"), 0, 0)
	case r < 12:
		return w.create(encoding.OpCreate, w.name("/zx/w"), 0, 0)
	case r < 20:
		return w.create(encoding.OpCreate2, "/zx/seq/s-", encoding.ModePersistentSequential, 0)
	case r < 24:
		return w.create(encoding.OpCreate, "/zx/seq/e-", encoding.ModeEphemeralSequential, 0)
	case r < 28:
		return w.create(encoding.OpCreate2, w.name("/zx/e"), encoding.ModeEphemeral, 0)
	case r < 40:
		return w.setData(shared, -1, 0)
	case r < 46:
		return w.setData(w.own, w.ownVersion, 0)
	case r < 54:
		if len(w.mine) == 0 {
			return w.create(encoding.OpCreate2, "/zx/seq/s-", encoding.ModePersistentSequential, 0)
		}
		return w.delete(w.takeMine(), -1, 0)
	case r < 60:
		ops := []encoding.MultiOp{
			opCreate2("/zx/seq/m-", []byte("m"), encoding.ModePersistentSequential),
			opSetData(w.own, []byte("m"), -1),
		}
		if len(w.mine) > 0 && w.rng.IntN(2) == 0 {
			ops = append(ops, opDelete(w.takeMine(), -1))
		}
		return w.multi(ops, -1, 0)
	case r < 64:
		if w.rng.IntN(2) == 0 {
			return w.multi([]encoding.MultiOp{opCreate("/zx/seq/m-", nil, encoding.ModePersistentSequential), opCheck(shared, zxBadVersion)}, 1, encoding.ErrBadVersion)
		}
		return w.multi([]encoding.MultiOp{opSetData(w.own, nil, -1), opCreate("/zx/seq/fixed", nil, 0), opSetData(shared, nil, -1)}, 1, encoding.ErrNodeExists)
	case r < 67:
		return w.create(encoding.OpCreate2, w.own, 0, encoding.ErrNodeExists)
	case r < 70:
		return w.create(encoding.OpCreate, "/zx/seq/fixed", 0, encoding.ErrNodeExists)
	case r < 74:
		return w.setData(shared, zxBadVersion, encoding.ErrBadVersion)
	case r < 76:
		return w.delete(shared, zxBadVersion, encoding.ErrBadVersion)
	case r < 78:
		return w.delete("/zx/seq/none", -1, encoding.ErrNoNode)
	case r < 90:
		return w.read(encoding.OpGetData, shared, &encoding.GetDataRequest{Path: shared}, &encoding.GetDataResponse{})
	default:
		return w.read(encoding.OpExists, "/zx/seq", &encoding.ExistsRequest{Path: "/zx/seq"}, &encoding.ExistsResponse{})
	}
}

// do sends one request, records its reply and checks its code.
func (w *zxWorker) do(write bool, op encoding.Op, what string, req, resp encoding.Record, want encoding.ErrCode) (*zxReply, error) {
	hdr, err := w.c.Call(op, req, resp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	w.replies = append(w.replies, zxReply{session: w.id, what: what, write: write, zxid: hdr.Zxid, code: hdr.Err})
	if hdr.Err != want {
		return nil, fmt.Errorf("%s: %v, want %v", what, hdr.Err, want)
	}
	return &w.replies[len(w.replies)-1], nil
}

func (w *zxWorker) read(op encoding.Op, p string, req, resp encoding.Record) error {
	_, err := w.do(false, op, fmt.Sprintf("%v %s", op, p), req, resp, 0)
	return err
}

func (w *zxWorker) create(op encoding.Op, p string, mode encoding.CreateMode, want encoding.ErrCode) error {
	var c1 encoding.CreateResponse
	var c2 encoding.Create2Response
	var resp encoding.Record = &c1
	if op == encoding.OpCreate2 {
		resp = &c2
	}
	req := &encoding.CreateRequest{Path: p, Data: []byte("c"), ACL: itest.RawOpenACL, Flags: mode}
	r, err := w.do(true, op, fmt.Sprintf("%v %s", op, p), req, resp, want)
	if err != nil || want != 0 {
		return err
	}
	e := zxEffect{kind: zxCreate, path: c1.Path}
	if op == encoding.OpCreate2 {
		e.path, e.stat = c2.Path, &c2.Stat
	}
	r.what += " -> " + e.path
	r.effects = []zxEffect{e}
	w.mine = append(w.mine, e.path)
	return nil
}

func (w *zxWorker) setData(p string, version int32, want encoding.ErrCode) error {
	var resp encoding.SetDataResponse
	req := &encoding.SetDataRequest{Path: p, Data: []byte("d"), Version: version}
	r, err := w.do(true, encoding.OpSetData, fmt.Sprintf("setData %s v%d", p, version), req, &resp, want)
	if err != nil || want != 0 {
		return err
	}
	r.effects = []zxEffect{{kind: zxSet, path: p, stat: &resp.Stat}}
	if p == w.own {
		w.ownVersion = resp.Stat.Version
	}
	return nil
}

func (w *zxWorker) delete(p string, version int32, want encoding.ErrCode) error {
	req := &encoding.DeleteRequest{Path: p, Version: version}
	r, err := w.do(true, encoding.OpDelete, fmt.Sprintf("delete %s v%d", p, version), req, nil, want)
	if err != nil || want != 0 {
		return err
	}
	r.effects = []zxEffect{{kind: zxDelete, path: p}}
	return nil
}

// multi sends ops as one multi; failing is the index of the op that must fail with code, or -1
// if the multi must succeed.
func (w *zxWorker) multi(ops []encoding.MultiOp, failing int, code encoding.ErrCode) error {
	var resp encoding.MultiResponse
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = fmt.Sprintf("%v %s", o.Op, zxOpPath(o))
	}
	what := fmt.Sprintf("multi[%s]", names)
	r, err := w.do(true, encoding.OpMulti, what, &encoding.MultiRequest{Ops: ops}, &resp, 0)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(ops) {
		return fmt.Errorf("%s: %d results", what, len(resp.Results))
	}
	if failing >= 0 {
		if res := resp.Results[failing]; res.Op != encoding.OpError || res.Err != code {
			return fmt.Errorf("%s: op %d answered %v %v, want error %v", what, failing, res.Op, res.Err, code)
		}
		r.code = code
		return nil
	}
	for i, res := range resp.Results {
		e := zxEffect{path: zxOpPath(ops[i])}
		switch rec := res.Record.(type) {
		case *encoding.CreateResponse:
			e.kind, e.path = zxCreate, rec.Path
		case *encoding.Create2Response:
			e.kind, e.path, e.stat = zxCreate, rec.Path, &rec.Stat
		case *encoding.SetDataResponse:
			e.kind, e.stat = zxSet, &rec.Stat
			if e.path == w.own {
				w.ownVersion = rec.Stat.Version
			}
		default:
			if res.Op != encoding.OpDelete {
				return fmt.Errorf("%s: op %d answered %v %v", what, i, res.Op, res.Err)
			}
			e.kind = zxDelete
		}
		if e.kind == zxCreate {
			w.mine = append(w.mine, e.path)
		}
		r.effects = append(r.effects, e)
	}
	return nil
}

// zxOpPath is the path a multi op names.
func zxOpPath(o encoding.MultiOp) string {
	switch r := o.Record.(type) {
	case *encoding.CreateRequest:
		return r.Path
	case *encoding.SetDataRequest:
		return r.Path
	case *encoding.DeleteRequest:
		return r.Path
	case *encoding.CheckVersionRequest:
		return r.Path
	}
	return "?"
}

// TestZxidsDistinctAcrossSessions: 16 sessions write at once (creates plain, sequential under
// one parent and ephemeral; setData on shared and own nodes; deletes; multis of 2-3 ops that
// succeed and that fail; creates, setData and deletes that fail) and read. Then:
//
//   - the zxids in the headers of all write replies are pairwise distinct across sessions, a
//     failed write's and a multi's included (a multi counts once);
//   - per session, each write's zxid is above every zxid the session saw before, and reply
//     zxids never decrease;
//   - the Stat of every create2 and setData reply, single or in a multi, has mzxid (and for a
//     create czxid and pzxid) equal to the header's zxid, and its version is what the writes
//     to that node, taken in zxid order, give;
//   - replaying every successful write in zxid order gives the Stat exists shows afterwards
//     for every node touched: czxid, mzxid and version of each, and for the parents, pzxid (the
//     zxid of the last child create or delete, e.g. of the sequential creates' parent),
//     cversion and the number of children.
func TestZxidsDistinctAcrossSessions(t *testing.T) {
	forServers(t, directServers, func(t *testing.T, addr string) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		setup := &zxWorker{id: -1, c: itest.ConnectRawTimeout(t, addr, zxTimeoutMs)}
		for _, p := range []string{"/zx", "/zx/seq", "/zx/seq/fixed"} {
			if err := setup.create(encoding.OpCreate2, p, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		for i := range zxShared {
			if err := setup.create(encoding.OpCreate2, fmt.Sprintf("/zx/shared-%d", i), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		workers := make([]*zxWorker, zxSessions)
		for i := range workers {
			own := fmt.Sprintf("/zx/own-%d", i)
			if err := setup.create(encoding.OpCreate2, own, 0, 0); err != nil {
				t.Fatal(err)
			}
			workers[i] = &zxWorker{id: i, c: itest.ConnectRawTimeout(t, addr, zxTimeoutMs), rng: rand.New(rand.NewPCG(seed, uint64(i))), own: own}
		}

		start := time.Now()
		errs := make(chan error, len(workers))
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(func() {
				if err := w.run(zxRunTime); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Error(err)
		}

		all := slices.Clone(setup.replies)
		for _, w := range workers {
			all = append(all, w.replies...)
		}
		logZxidWorkload(t, all, elapsed)
		itest.ReportViolations(t, "distinct write zxids", zxDuplicates(all))
		for _, w := range append([]*zxWorker{setup}, workers...) {
			itest.ReportViolations(t, "per-session zxid order", zxSessionOrder(w.replies))
		}
		itest.ReportViolations(t, "reply Stats", zxReplyStats(all))
		model, bad := zxReplay(all)
		itest.ReportViolations(t, "replies in zxid order", bad)
		setup.c.Conn.SetDeadline(time.Now().Add(30 * time.Second))
		itest.ReportViolations(t, "Stats read afterwards", zxCompareTree(setup.c, model))
	})
}

// logZxidWorkload logs what the sessions did, and fails the test if the mix missed a kind of
// write the checks are about.
func logZxidWorkload(t *testing.T, all []zxReply, elapsed time.Duration) {
	t.Helper()
	counts := map[string]int{}
	for _, r := range all {
		if r.session < 0 {
			continue
		}
		kind := "read"
		switch {
		case r.write && r.code != 0:
			kind = "failed write"
		case r.write && len(r.effects) > 1:
			kind = "multi"
		case r.write:
			kind = "write"
		}
		counts[kind]++
		if len(r.effects) == 1 && r.effects[0].kind == zxCreate && path.Dir(r.effects[0].path) == "/zx/seq" {
			counts["sequential create"]++
		}
	}
	t.Logf("%d sessions, %d replies in %v: %v", zxSessions, len(all), elapsed.Round(time.Millisecond), counts)
	for _, k := range []string{"write", "multi", "failed write", "sequential create", "read"} {
		if counts[k] == 0 {
			t.Errorf("no %s in the history: it checks less than it should", k)
		}
	}
}

// zxDuplicates returns the write replies whose header zxid another write reply carries too.
func zxDuplicates(all []zxReply) []string {
	first := map[encoding.Zxid]zxReply{}
	var bad []string
	for _, r := range all {
		if !r.write {
			continue
		}
		if o, ok := first[r.zxid]; ok {
			bad = append(bad, fmt.Sprintf("%v and %v share a zxid", o, r))
			continue
		}
		first[r.zxid] = r
	}
	return bad
}

// zxSessionOrder returns where one session's replies (in the order it read them) break the
// order: each write's zxid must be above every zxid the session saw before, and no reply's
// zxid may be below the previous one's.
func zxSessionOrder(replies []zxReply) []string {
	var bad []string
	for i := 1; i < len(replies); i++ {
		prev, r := replies[i-1], replies[i]
		switch {
		case r.write && r.zxid <= prev.zxid:
			bad = append(bad, fmt.Sprintf("%v is not above the zxid of the reply before it, %v", r, prev))
		case r.zxid < prev.zxid:
			bad = append(bad, fmt.Sprintf("%v went back from the reply before it, %v", r, prev))
		}
	}
	return bad
}

// zxReplyStats returns the successful writes whose reply Stats do not carry the header's zxid:
// mzxid for every Stat, and czxid and pzxid too for a create.
func zxReplyStats(all []zxReply) []string {
	var bad []string
	for _, r := range all {
		for _, e := range r.effects {
			st := e.stat
			if st == nil {
				continue
			}
			if st.Mzxid != r.zxid || (e.kind == zxCreate && (st.Czxid != r.zxid || st.Pzxid != r.zxid)) {
				bad = append(bad, fmt.Sprintf("%v: Stat of %s has czxid %v mzxid %v pzxid %v", r, e.path, st.Czxid, st.Mzxid, st.Pzxid))
			}
		}
	}
	return bad
}

// zxNode is a node as replaying the writes in zxid order leaves it.
type zxNode struct {
	exists       bool
	czxid, mzxid encoding.Zxid
	version      int32
	pzxid        encoding.Zxid
	cversion     int32
	children     int32
	childChanges int // creates and deletes of children, for messages
}

// zxReplay applies every successful write in zxid order to a model of the nodes the test
// created; it returns the model and the replies whose Stat version disagrees with it (a node's
// writes took effect in another order than their zxids say).
func zxReplay(all []zxReply) (map[string]*zxNode, []string) {
	var writes []zxReply
	for _, r := range all {
		if len(r.effects) > 0 {
			writes = append(writes, r)
		}
	}
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].zxid < writes[j].zxid })
	model := map[string]*zxNode{}
	var bad []string
	for _, r := range writes {
		z := r.zxid
		for _, e := range r.effects {
			n := model[e.path]
			if n == nil {
				n = &zxNode{}
				model[e.path] = n
			}
			parent := model[path.Dir(e.path)]
			switch e.kind {
			case zxCreate:
				*n = zxNode{exists: true, czxid: z, mzxid: z, pzxid: z}
			case zxSet:
				n.mzxid = z
				n.version++
			case zxDelete:
				n.exists = false
			}
			if e.kind != zxSet && parent != nil {
				parent.pzxid = z
				parent.cversion++
				parent.childChanges++
				if e.kind == zxCreate {
					parent.children++
				} else {
					parent.children--
				}
			}
			if e.stat != nil && e.stat.Version != n.version {
				bad = append(bad, fmt.Sprintf("%v: Stat of %s has version %d, but in zxid order it is version %d", r, e.path, e.stat.Version, n.version))
			}
		}
	}
	return model, bad
}

// zxCompareTree reads the Stat of every node of model with exists and returns where it differs
// from the model.
func zxCompareTree(c *itest.RawClient, model map[string]*zxNode) []string {
	paths := make([]string, 0, len(model))
	for p := range model {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var bad []string
	for _, p := range paths {
		want := model[p]
		var resp encoding.ExistsResponse
		code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: p}, &resp)
		switch {
		case !want.exists && code == encoding.ErrNoNode:
			continue
		case !want.exists || code != 0:
			bad = append(bad, fmt.Sprintf("exists %s: %v, want it to exist: %v", p, code, want.exists))
			continue
		}
		st := resp.Stat
		if st.Czxid != want.czxid || st.Mzxid != want.mzxid || st.Version != want.version {
			bad = append(bad, fmt.Sprintf("%s: czxid %v mzxid %v version %d, want %v %v %d (its create and its last setData)",
				p, st.Czxid, st.Mzxid, st.Version, want.czxid, want.mzxid, want.version))
		}
		if st.Pzxid != want.pzxid || st.Cversion != want.cversion || st.NumChildren != want.children {
			bad = append(bad, fmt.Sprintf("%s: pzxid %v cversion %d numChildren %d, want %v %d %d (the last of %d child creates and deletes)",
				p, st.Pzxid, st.Cversion, st.NumChildren, want.pzxid, want.cversion, want.children, want.childChanges))
		}
	}
	return bad
}

const (
	zwNodes   = 8
	zwWriters = 4
	zwWrites  = 200 // per writer
	zwEnd     = "/zw/end"
)

// zwFrame is one frame the watcher read, in the order it read them.
type zwFrame struct {
	event   bool
	path    string
	zxid    encoding.Zxid // the header's
	mzxid   encoding.Zxid // a getData reply's
	armedAt encoding.Zxid // an event's: the mzxid of the getData that set the watch it fired
}

func (f zwFrame) String() string {
	if f.event {
		return fmt.Sprintf("event on %s at %v (watch set at mzxid %v)", f.path, f.zxid, f.armedAt)
	}
	return fmt.Sprintf("getData %s reply at %v (mzxid %v)", f.path, f.zxid, f.mzxid)
}

// zwWatcher keeps a data watch on each node: getData with a watch, and again after each event.
// Only the test's goroutine uses it.
type zwWatcher struct {
	c      *itest.RawClient
	armed  map[string]encoding.Zxid // path -> mzxid of the getData that set its watch
	live   map[string]bool          // path -> its watch is set and has not fired
	frames []zwFrame
	queue  []zwFrame // events read while waiting for a reply, not handled yet
	bad    []string
}

// arm reads path with a watch, logging the frames it reads on the way.
func (w *zwWatcher) arm(p string) (encoding.Zxid, error) {
	xid, err := w.c.TrySend(encoding.OpGetData, &encoding.GetDataRequest{Path: p, Watch: true})
	if err != nil {
		return 0, err
	}
	for {
		hdr, body, err := w.c.ReadReply()
		if err != nil {
			return 0, fmt.Errorf("getData %s: %w", p, err)
		}
		if hdr.Xid == encoding.XidNotification {
			if err := w.event(hdr, body); err != nil {
				return 0, err
			}
			continue
		}
		if hdr.Xid != xid || hdr.Err != 0 {
			return 0, fmt.Errorf("getData %s: reply %+v", p, hdr)
		}
		var gd encoding.GetDataResponse
		if err := encoding.DecodeRecord(body, &gd); err != nil {
			return 0, err
		}
		w.frames = append(w.frames, zwFrame{path: p, zxid: hdr.Zxid, mzxid: gd.Stat.Mzxid})
		w.armed[p], w.live[p] = gd.Stat.Mzxid, true
		return gd.Stat.Mzxid, nil
	}
}

// event logs and queues a notification.
func (w *zwWatcher) event(hdr encoding.ReplyHeader, body []byte) error {
	var ev encoding.WatcherEvent
	if err := encoding.DecodeRecord(body, &ev); err != nil {
		return err
	}
	if ev.Type != encoding.EventNodeDataChanged {
		return fmt.Errorf("event %v on %s, want %v", ev.Type, ev.Path, encoding.EventNodeDataChanged)
	}
	f := zwFrame{event: true, path: ev.Path, zxid: hdr.Zxid, armedAt: w.armed[ev.Path]}
	if !w.live[ev.Path] {
		w.bad = append(w.bad, fmt.Sprintf("%v: no watch on %s was set", f, ev.Path))
	}
	w.live[ev.Path] = false
	w.frames = append(w.frames, f)
	w.queue = append(w.queue, f)
	return nil
}

// next returns the oldest event not handled yet, reading one if none is queued.
func (w *zwWatcher) next() (zwFrame, error) {
	for len(w.queue) == 0 {
		w.c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		hdr, body, err := w.c.ReadReply()
		if err != nil {
			return zwFrame{}, fmt.Errorf("waiting for a watch event: %w", err)
		}
		if hdr.Xid != encoding.XidNotification {
			return zwFrame{}, fmt.Errorf("waiting for a watch event: unexpected reply %+v", hdr)
		}
		if err := w.event(hdr, body); err != nil {
			return zwFrame{}, err
		}
	}
	f := w.queue[0]
	w.queue = w.queue[1:]
	return f, nil
}

// run handles events until the one on zwEnd has come and every node's watch was set at (or
// after) its last write: after each event it reads the node again, setting the watch anew.
// done is closed before zwEnd is written; final, called after that, gives each node's last
// write.
func (w *zwWatcher) run(done <-chan struct{}, final func() map[string]encoding.Zxid) error {
	var last map[string]encoding.Zxid
	for {
		ev, err := w.next()
		if err != nil {
			if last != nil {
				return fmt.Errorf("%w; writes whose events never came: %s", err, w.pending(last))
			}
			return err
		}
		if ev.path == zwEnd {
			<-done
			last = final()
		} else {
			mzxid, err := w.arm(ev.path)
			if err != nil {
				return err
			}
			if mzxid < ev.zxid {
				w.bad = append(w.bad, fmt.Sprintf("getData %s after its event at %v: mzxid %v", ev.path, ev.zxid, mzxid))
			}
		}
		if last != nil && w.setAfter(last) {
			return nil
		}
	}
}

// pending describes the nodes whose watch was set before their last write.
func (w *zwWatcher) pending(last map[string]encoding.Zxid) string {
	var out []string
	for p, z := range last {
		if w.armed[p] < z {
			out = append(out, fmt.Sprintf("%s (watch set at mzxid %v, last write at %v)", p, w.armed[p], z))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// setAfter says whether every node's watch was set at or after its last write: no more events
// are due.
func (w *zwWatcher) setAfter(last map[string]encoding.Zxid) bool {
	for p, z := range last {
		if w.armed[p] < z {
			return false
		}
	}
	return true
}

// TestZxidOrderOfEventsAndReplies: one session keeps a data watch on each of 8 nodes (getData
// with a watch, and again after each event) while 4 other sessions setData them at once. On the
// watcher's frames:
//
//   - events come in increasing zxid order, each above the zxid of every reply before it (an
//     event comes before any reply that reflects its write), and reply zxids never decrease;
//   - each event carries the zxid of the write that fired it: the first write to its node after
//     the mzxid of the getData that set the watch, as the writers' replies number them;
//   - the getData after an event shows an mzxid at or above the event's zxid, which is one of
//     that node's writes and not above the reply's own zxid.
func TestZxidOrderOfEventsAndReplies(t *testing.T) {
	forServers(t, directServers, func(t *testing.T, addr string) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		setup := itest.ConnectRawTimeout(t, addr, zxTimeoutMs)
		setup.Create("/zw", nil, 0)
		nodes := make([]string, zwNodes)
		writes := map[string][]encoding.Zxid{} // per node, the zxids of its writes, its create first
		for i := range nodes {
			nodes[i] = fmt.Sprintf("/zw/n%d", i)
			writes[nodes[i]] = []encoding.Zxid{setup.Create(nodes[i], nil, 0)}
		}
		writes[zwEnd] = []encoding.Zxid{setup.Create(zwEnd, nil, 0)}

		w := &zwWatcher{c: itest.ConnectRawTimeout(t, addr, zxTimeoutMs), armed: map[string]encoding.Zxid{}, live: map[string]bool{}}
		for _, p := range append(slices.Clone(nodes), zwEnd) {
			if _, err := w.arm(p); err != nil {
				t.Fatal(err)
			}
		}
		writers := make([]*itest.RawClient, zwWriters)
		for i := range writers {
			writers[i] = itest.ConnectRawTimeout(t, addr, zxTimeoutMs)
		}
		ender := itest.ConnectRawTimeout(t, addr, zxTimeoutMs)

		// Each writer's goroutine owns its map until done is closed.
		wrote := make([]map[string][]encoding.Zxid, zwWriters)
		errs := make(chan error, zwWriters+1)
		done := make(chan struct{})  // every writer has finished
		ended := make(chan struct{}) // zwEnd is written (endZxid set) or could not be
		var endZxid encoding.Zxid
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range writers {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			wrote[i] = map[string][]encoding.Zxid{}
			wg.Go(func() {
				for n := range zwWrites {
					p := nodes[rng.IntN(len(nodes))]
					hdr, err := c.Call(encoding.OpSetData, &encoding.SetDataRequest{Path: p, Data: []byte(fmt.Sprint(n)), Version: -1}, &encoding.SetDataResponse{})
					if err != nil || hdr.Err != 0 {
						errs <- fmt.Errorf("writer %d: setData %s: %v %v", i, p, hdr.Err, err)
						return
					}
					wrote[i][p] = append(wrote[i][p], hdr.Zxid)
				}
			})
		}
		go func() {
			defer close(ended)
			wg.Wait()
			close(done)
			hdr, err := ender.Call(encoding.OpSetData, &encoding.SetDataRequest{Path: zwEnd, Version: -1}, &encoding.SetDataResponse{})
			if err != nil || hdr.Err != 0 {
				errs <- fmt.Errorf("setData %s: %v %v", zwEnd, hdr.Err, err)
				return
			}
			endZxid = hdr.Zxid
		}()
		last := func() map[string]encoding.Zxid {
			last := map[string]encoding.Zxid{}
			for _, p := range nodes {
				last[p] = writes[p][0]
				for _, m := range wrote {
					if zs := m[p]; len(zs) > 0 {
						last[p] = max(last[p], zs[len(zs)-1])
					}
				}
			}
			return last
		}
		err := w.run(done, last)
		<-ended
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if err != nil {
			t.Errorf("watcher: %v", err) // and check the frames it read
		}

		for _, m := range wrote {
			for p, zs := range m {
				writes[p] = append(writes[p], zs...)
			}
		}
		writes[zwEnd] = append(writes[zwEnd], endZxid)
		events := 0
		for p, zs := range writes {
			slices.Sort(zs)
			writes[p] = zs
		}
		for _, f := range w.frames {
			if f.event {
				events++
			}
		}
		t.Logf("%d writes, %d events, %d frames on the watcher in %v", zwWriters*zwWrites+1, events, len(w.frames), elapsed.Round(time.Millisecond))
		if events <= zwNodes {
			t.Errorf("only %d events: the test checks less than it should", events)
		}
		itest.ReportViolations(t, "watch events and replies", append(w.bad, zwCheckFrames(w.frames, writes)...))
	})
}

// zwCheckFrames returns where the watcher's frames break zxid order, where an event's zxid is
// not that of the write that fired it, and where a reply's mzxid is not one of its node's
// writes or is above the reply's zxid. writes holds each node's write zxids in order.
func zwCheckFrames(frames []zwFrame, writes map[string][]encoding.Zxid) []string {
	var bad []string
	for i, f := range frames {
		if i > 0 {
			switch prev := frames[i-1]; {
			case f.event && f.zxid <= prev.zxid:
				bad = append(bad, fmt.Sprintf("%v came after %v: not in zxid order, or after a reply that reflects its write", f, prev))
			case !f.event && f.zxid < prev.zxid:
				bad = append(bad, fmt.Sprintf("%v went back from %v", f, prev))
			}
		}
		ws := writes[f.path]
		if !f.event {
			if _, ok := slices.BinarySearch(ws, f.mzxid); !ok || f.mzxid > f.zxid {
				bad = append(bad, fmt.Sprintf("%v: the mzxid is not a write to %s at or below the reply's zxid", f, f.path))
			}
			continue
		}
		j := sort.Search(len(ws), func(j int) bool { return ws[j] > f.armedAt })
		switch {
		case j == len(ws):
			bad = append(bad, fmt.Sprintf("%v: no write to %s came after the watch was set", f, f.path))
		case ws[j] != f.zxid:
			bad = append(bad, fmt.Sprintf("%v: want the zxid of the first write to %s after the watch was set, %v", f, f.path, ws[j]))
		}
	}
	return bad
}

// TestZxidChecks shows that the checks of TestZxidsDistinctAcrossSessions and
// TestZxidOrderOfEventsAndReplies can fail: each is fed small histories, some allowed and some
// not.
func TestZxidChecks(t *testing.T) {
	stat := func(czxid, mzxid, pzxid encoding.Zxid, version int32) *encoding.Stat {
		return &encoding.Stat{Czxid: czxid, Mzxid: mzxid, Pzxid: pzxid, Version: version}
	}
	create := func(session int, z encoding.Zxid, p string) zxReply {
		return zxReply{session: session, what: "create " + p, write: true, zxid: z, effects: []zxEffect{{zxCreate, p, stat(z, z, z, 0)}}}
	}
	set := func(session int, z encoding.Zxid, p string, st *encoding.Stat) zxReply {
		return zxReply{session: session, what: "setData " + p, write: true, zxid: z, effects: []zxEffect{{zxSet, p, st}}}
	}
	del := func(session int, z encoding.Zxid, p string) zxReply {
		return zxReply{session: session, what: "delete " + p, write: true, zxid: z, effects: []zxEffect{{zxDelete, p, nil}}}
	}
	failed := func(session int, z encoding.Zxid) zxReply {
		return zxReply{session: session, what: "setData /a", write: true, zxid: z, code: encoding.ErrBadVersion}
	}
	read := func(session int, z encoding.Zxid) zxReply {
		return zxReply{session: session, what: "getData /a", zxid: z}
	}
	for _, tc := range []struct {
		name                    string
		replies                 []zxReply // one session's, in order, for the per-session check
		dups, order, stats, rep int       // violations expected
	}{
		{"writes and reads in order", []zxReply{create(0, 3, "/a"), read(0, 3), set(0, 4, "/a", stat(3, 4, 3, 1)), failed(0, 5), read(0, 7)}, 0, 0, 0, 0},
		{"two writes share a zxid", []zxReply{create(0, 3, "/a"), set(1, 4, "/a", stat(3, 4, 3, 1)), failed(2, 4)}, 1, 1, 0, 0},
		{"a write not above a read before it", []zxReply{create(0, 3, "/a"), read(0, 5), set(0, 5, "/a", stat(3, 5, 3, 1))}, 0, 1, 0, 0},
		{"a read goes back", []zxReply{create(0, 3, "/a"), read(0, 2)}, 0, 1, 0, 0},
		{"setData Stat without the reply's zxid", []zxReply{create(0, 3, "/a"), set(0, 4, "/a", stat(3, 3, 3, 1))}, 0, 0, 1, 0},
		{"create Stat without the reply's zxid", []zxReply{{write: true, zxid: 3, effects: []zxEffect{{zxCreate, "/a", stat(3, 3, 2, 0)}}}}, 0, 0, 1, 0},
		{"versions against zxid order", []zxReply{create(0, 3, "/a"), set(0, 5, "/a", stat(3, 5, 3, 1)), set(1, 4, "/a", stat(3, 4, 3, 2))}, 0, 1, 0, 2},
	} {
		if got := len(zxDuplicates(tc.replies)); got != tc.dups {
			t.Errorf("%s: %d duplicate zxids, want %d", tc.name, got, tc.dups)
		}
		if got := len(zxSessionOrder(tc.replies)); got != tc.order {
			t.Errorf("%s: %d per-session order violations, want %d", tc.name, got, tc.order)
		}
		if got := len(zxReplyStats(tc.replies)); got != tc.stats {
			t.Errorf("%s: %d reply Stat violations, want %d", tc.name, got, tc.stats)
		}
		if _, bad := zxReplay(tc.replies); len(bad) != tc.rep {
			t.Errorf("%s: %d replay violations, want %d: %v", tc.name, len(bad), tc.rep, bad)
		}
	}

	// The model a replay leaves: a parent's pzxid is its last child change, whatever the order
	// the replies were read in.
	model, _ := zxReplay([]zxReply{create(0, 2, "/p"), del(1, 6, "/p/b"), create(0, 4, "/p/b"), create(1, 5, "/p/c"), set(0, 7, "/p", nil)})
	if p := model["/p"]; *p != (zxNode{exists: true, czxid: 2, mzxid: 7, version: 1, pzxid: 6, cversion: 3, children: 1, childChanges: 3}) {
		t.Errorf("replayed /p: %+v", *p)
	}
	if b := model["/p/b"]; b.exists || b.czxid != 4 {
		t.Errorf("replayed /p/b: %+v", *b)
	}

	writes := map[string][]encoding.Zxid{"/a": {2, 5, 7}, "/b": {3, 6}}
	reply := func(p string, z, mzxid encoding.Zxid) zwFrame { return zwFrame{path: p, zxid: z, mzxid: mzxid} }
	event := func(p string, z, armedAt encoding.Zxid) zwFrame {
		return zwFrame{event: true, path: p, zxid: z, armedAt: armedAt}
	}
	for _, tc := range []struct {
		name   string
		frames []zwFrame
		bad    int
	}{
		{"in order", []zwFrame{reply("/a", 4, 2), reply("/b", 4, 3), event("/a", 5, 2), reply("/a", 5, 5), event("/b", 6, 3), reply("/b", 6, 6), event("/a", 7, 5)}, 0},
		{"events out of order", []zwFrame{reply("/a", 4, 2), reply("/b", 4, 3), event("/b", 6, 3), event("/a", 5, 2)}, 1},
		{"event after a reply that reflects it", []zwFrame{reply("/a", 4, 2), reply("/b", 6, 6), event("/a", 5, 2)}, 1},
		{"event at a later write than the one that fired it", []zwFrame{reply("/a", 2, 2), event("/a", 7, 2)}, 1},
		{"event with no write after its watch", []zwFrame{reply("/a", 7, 7), event("/a", 8, 7)}, 1},
		{"reply goes back", []zwFrame{reply("/a", 5, 5), reply("/b", 4, 3)}, 1},
		{"reply mzxid not a write", []zwFrame{reply("/a", 5, 4)}, 1},
		{"reply mzxid above its zxid", []zwFrame{reply("/a", 4, 5)}, 1},
	} {
		if got := zwCheckFrames(tc.frames, writes); len(got) != tc.bad {
			t.Errorf("%s: %d violations, want %d: %v", tc.name, len(got), tc.bad, got)
		}
	}
}

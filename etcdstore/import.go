package etcdstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// Import writes the tree of a ZooKeeper data directory (zkdata.State) into an empty prefix, in
// the key layout of keys.go, so that zetcd started on it serves every znode with the data, ACL
// and Stat ZooKeeper had.
//
// Each key is put once; the offsets key corrects etcd's counters to ZooKeeper's version,
// aversion and create counter, and holds czxid where it lies in another revision than mzxid.
// A node's Stat zxids become etcd revisions (zxid.go): in ImportExact mode a ZooKeeper zxid Z
// is the write numbered Z&0xffff in revision Z>>16, so zetcd reports the very zxids ZooKeeper
// did. The writes of one revision go in one transaction, and etcd's revision is moved to the
// one before it by putting the import marker (padding). In ImportRenumber mode the distinct
// zxids are numbered again in order, from the revision past ZooKeeper's last zxid (padded to)
// if MaxPadding allows, else from the first free revision: every comparison between zxids
// holds, and from past ZooKeeper's last zxid each is above the ZooKeeper zxid it stands for;
// there the table of zxids the import leaves (addZxidTable) makes zetcd show ZooKeeper's
// values.
//
// The import marker (keys.go) is put first, in the transaction that checks the prefix is
// empty, and deleted last, with the fence: New refuses a prefix that holds it, so a half
// written import is never served.
//
// Each open session becomes a zetcd session with the same id: an etcd lease of that id, the
// session key with ZooKeeper's password for it (zkSessionPasswd) and its timeout, and its
// ephemerals attached to the lease. Its owner is process 0, which names no process: the session
// is an orphan (orphans.go), which a client resuming it takes over, and which the elected zetcd
// ends at its timeout, as ZooKeeper expires a session whose client does not come back after a
// restart. A session id that is not a positive int64 cannot be an etcd lease id: that session
// and its ephemerals are left out, and ImportResult says how many.

// ImportZxids is how an import places ZooKeeper's zxids.
type ImportZxids string

const (
	// ImportAuto is ImportExact where it is possible, else ImportRenumber.
	ImportAuto ImportZxids = "auto"
	// ImportExact keeps every zxid, or fails.
	ImportExact ImportZxids = "exact"
	// ImportRenumber numbers the zxids again, in order.
	ImportRenumber ImportZxids = "renumber"
)

// ImportConfig configures Import.
type ImportConfig struct {
	Client *clientv3.Client
	// LeaseClient grants the sessions' leases with their ids (default: one on Client's
	// connection; an in-process client, embedetcd.Etcd.InProcessClient, has none).
	LeaseClient pb.LeaseClient
	// Prefix is the store's prefix (default "/zk/"); it must hold no key.
	Prefix string
	Logger *zap.Logger
	// Zxids is the zxid rule (default ImportAuto).
	Zxids ImportZxids
	// MaxPadding bounds the revisions an exact import may spend on padding (default
	// DefaultMaxPadding).
	MaxPadding int64
	// MaxTxnOps and MaxRequestBytes are etcd's --max-txn-ops and --max-request-bytes (defaults
	// 128 and 1.5 MiB, etcd's): one revision's writes must fit one transaction.
	MaxTxnOps       int
	MaxRequestBytes int
	// PaddingInFlight is how many padding puts are in flight at once (default 256).
	PaddingInFlight int
	// Backend, if set, is an etcd that has never started, written directly (importBackend);
	// Client and LeaseClient are then unset.
	Backend *ImportBackend
	// Marker, if set, is left as the import marker's value in the last transaction instead of
	// deleting it: a mirror (mirror.go) goes on writing the prefix, which no zetcd may serve
	// meanwhile. Not with Backend.
	Marker string
}

// ImportBackend is an etcd that has never started, whose database an import writes directly:
// every key at its revision, any number of keys in one revision, and no padding, as etcd's
// revision simply jumps from one to the next. The import ends with the database complete and
// synced; etcd starts on it later, as zetcd's.
type ImportBackend struct {
	// Path is where etcd keeps its database (member/snap/db); nothing may be there.
	Path string
}

// DefaultMaxPadding is ImportConfig.MaxPadding's default.
const DefaultMaxPadding = 50_000_000

// ImportResult says what an import wrote.
type ImportResult struct {
	Nodes      int         // znodes written
	Zxids      ImportZxids // ImportExact or ImportRenumber: what was done
	Why        string      // why zxids were renumbered, "" if they were not
	Revisions  int         // transactions holding znodes
	Padding    int64       // padding puts
	FirstRev   int64       // the revision of the marker's transaction
	FinalRev   int64       // the revision of the last transaction, which deleted the marker
	Sessions   int         // open sessions imported
	Ephemerals int         // ephemeral nodes imported
	// SkippedSessions and SkippedEphemerals were left out: sessions whose id cannot be an
	// etcd lease id, and their ephemerals.
	SkippedSessions, SkippedEphemerals int
	// ResumeOK says that clients of ZooKeeper may reconnect with the zxid they last saw:
	// FinalRev's zxids are past ZooKeeper's LastZxid.
	ResumeOK bool
	// Mapped is the zetcd zxid of each ZooKeeper zxid of the Stats written.
	Mapped map[int64]encoding.Zxid
	// ZxidTable says that the import wrote Mapped as the table of zxids (addZxidTable): zetcd
	// shows ZooKeeper's zxids in every Stat of a renumbered import.
	ZxidTable bool
}

// importOp is one key an import puts, carrying ZooKeeper zxid zxid (0: in the marker's
// transaction). Its key and value are built when it is written (appendImportKey,
// appendImportValue).
type importOp struct {
	zxid  int64
	kind  byte // 'n' data, 'c' child-create, 'd' child-delete, 'o' offsets, 'r' reap index
	node  *zkdata.Node
	lease int64 // an ephemeral's session
	size  int   // bytes it adds to a transaction, an estimate from above
}

// importPlan is a State's keys, grouped by the zxid they carry.
type importPlan struct {
	byZxid map[int64][]importOp
	zxids  []int64 // every distinct non-zero zxid of the Stats, sorted
	nodes  int
	// sessions are the sessions imported, by id; skipped counts the others, skippedEph their
	// ephemerals; eph counts the ephemerals imported.
	sessions        []zkdata.Session
	eph             int
	skipped, skipEp int
}

func planImport(k keySchema, st *zkdata.State) (*importPlan, error) {
	p := &importPlan{byZxid: map[int64][]importOp{}}
	for id, sess := range st.Sessions {
		if id > 0 {
			p.sessions = append(p.sessions, sess)
		} else {
			p.skipped++
		}
	}
	slices.SortFunc(p.sessions, func(a, b zkdata.Session) int { return cmp.Compare(a.ID, b.ID) })
	seen := map[int64]bool{}
	note := func(z int64) {
		if z != 0 && !seen[z] {
			seen[z] = true
			p.zxids = append(p.zxids, z)
		}
	}
	// In any order: a zxid's keys go into its revision in any order.
	for n := range st.All() {
		path, s := n.Path, &n.Stat
		var lease int64
		if n.Type() == zkdata.Ephemeral {
			if _, ok := st.Sessions[int64(s.EphemeralOwner)]; !ok || s.EphemeralOwner <= 0 {
				p.skipEp++
				continue
			}
			lease = int64(s.EphemeralOwner)
			p.eph++
		}
		if s.Pzxid < s.Czxid {
			return nil, fmt.Errorf("zetcd import: %s: pzxid %#x before czxid %#x cannot be stored", path, s.Pzxid, s.Czxid)
		}
		if (int64(s.Cversion)+int64(s.NumChildren))%2 != 0 {
			return nil, fmt.Errorf("zetcd import: %s: cversion %d with %d children names no create count", path, s.Cversion, s.NumChildren)
		}
		size := len(n.Data) + aclValueLen(aclValue{ACL: n.ACL}) + 2*len(path) + 256
		mz := int64(s.Mzxid)
		p.add(importOp{zxid: mz, kind: 'n', node: n, lease: lease, size: size})
		if needsOffsets(n) {
			p.add(importOp{zxid: mz, kind: 'o', node: n, lease: lease, size: len(path) + 96})
		}
		if t := n.Type(); t == zkdata.Container || t == zkdata.TTL {
			p.add(importOp{zxid: mz, kind: 'r', node: n, size: len(path) + 48})
		}
		if kind := importChildKey(n); kind != 0 {
			p.add(importOp{zxid: int64(s.Pzxid), kind: kind, node: n, size: len(path) + 64})
		}
		note(int64(s.Czxid))
		note(mz)
		note(int64(s.Pzxid))
		p.nodes++
	}
	slices.Sort(p.zxids)
	return p, nil
}

func (p *importPlan) add(op importOp) { p.byZxid[op.zxid] = append(p.byZxid[op.zxid], op) }

// importRev is one transaction of an import: the writes of the zxids placed in revision rev.
type importRev struct {
	rev   int64
	zxids []int64 // ZooKeeper's zxids placed here, in order
	ops   int
	bytes int
}

// importLayout is where each ZooKeeper zxid lands: its zetcd zxid, and the transactions.
type importLayout struct {
	mapped map[int64]encoding.Zxid
	revs   []importRev
}

func (l *importLayout) zxid(z int64) encoding.Zxid {
	if z == 0 {
		return 0
	}
	return l.mapped[z]
}

// exactLayout places every zxid Z in revision Z>>16 at index Z&0xffff; it fails if a revision
// is at or before after, or its writes exceed the transaction limits.
func (p *importPlan) exactLayout(after int64, maxOps, maxBytes int) (*importLayout, error) {
	l := &importLayout{mapped: map[int64]encoding.Zxid{}}
	for _, z := range p.zxids {
		rev := revOf(encoding.Zxid(z))
		l.mapped[z] = encoding.Zxid(z)
		if rev <= after {
			return nil, fmt.Errorf("zxid %#x lies in etcd revision %d, which etcd has already passed (it is at %d)", z, rev, after)
		}
		if len(l.revs) == 0 || l.revs[len(l.revs)-1].rev != rev {
			l.revs = append(l.revs, importRev{rev: rev})
		}
		r := &l.revs[len(l.revs)-1]
		r.zxids = append(r.zxids, z)
		for _, op := range p.byZxid[z] {
			r.ops++
			r.bytes += op.size
		}
		if r.ops > maxOps {
			return nil, fmt.Errorf("the writes of zxids %#x to %#x (etcd revision %d) take %d operations, past etcd's --max-txn-ops %d", r.zxids[0], z, rev, r.ops, maxOps)
		}
		if r.bytes > maxBytes {
			return nil, fmt.Errorf("the writes of zxids %#x to %#x (etcd revision %d) take about %d bytes, past etcd's --max-request-bytes %d", r.zxids[0], z, rev, r.bytes, maxBytes)
		}
	}
	return l, nil
}

// renumberedLayout numbers the zxids again, in order, from revision from: each revision holds
// up to maxBatchIndex+1 of them, as many as its transaction's limits allow.
func (p *importPlan) renumberedLayout(from int64, maxOps, maxBytes int) (*importLayout, error) {
	l := &importLayout{mapped: map[int64]encoding.Zxid{}}
	for _, z := range p.zxids {
		ops, bytes := 0, 0
		for _, op := range p.byZxid[z] {
			ops++
			bytes += op.size
		}
		if ops > maxOps || bytes > maxBytes {
			return nil, fmt.Errorf("the writes of zxid %#x alone take %d operations and about %d bytes, past etcd's --max-txn-ops %d or --max-request-bytes %d", z, ops, bytes, maxOps, maxBytes)
		}
		if n := len(l.revs); n == 0 || len(l.revs[n-1].zxids) > maxBatchIndex || l.revs[n-1].ops+ops > maxOps || l.revs[n-1].bytes+bytes > maxBytes {
			l.revs = append(l.revs, importRev{rev: from + int64(n)})
		}
		r := &l.revs[len(l.revs)-1]
		l.mapped[z] = zxidOf(r.rev, len(r.zxids))
		r.zxids = append(r.zxids, z)
		r.ops += ops
		r.bytes += bytes
	}
	return l, nil
}

// renumberedTxnOps bounds the operations of a renumbered import's transactions, whatever etcd
// allows: etcd traces each put of a transaction, and formats every step of a trace that took
// over 100 ms (etcdserver.raftRequest's LogIfLong) even when nothing logs it; transactions of
// tens of thousands of puts spent a tenth of the import's CPU there.
const renumberedTxnOps = 4096

// importer is one run of Import.
type importer struct {
	cfg  ImportConfig
	keys keySchema
	log  *zap.Logger
	st   *zkdata.State
	plan *importPlan
	// sessionTxns are the imported sessions' puts (makeSessionTxns), and the chunks of a
	// renumbered import's table of zxids (addZxidTable), committed just before the import's
	// final revision.
	sessionTxns [][]importPut
	// zxidHead is that table's head, put in the final revision ("" without a table).
	zxidHead string
	marker   string // the marker's value
	first    int64  // the marker's CreateRevision
	padded   int64
}

// Import writes st into the empty prefix cfg.Prefix (see the comment above ImportZxids).
func Import(ctx context.Context, cfg ImportConfig, st *zkdata.State) (ImportResult, error) {
	cfg.Prefix = cmp.Or(cfg.Prefix, "/zk/")
	cfg.Zxids = cmp.Or(cfg.Zxids, ImportAuto)
	cfg.MaxPadding = cmp.Or(cfg.MaxPadding, DefaultMaxPadding)
	cfg.MaxTxnOps = cmp.Or(cfg.MaxTxnOps, defaultMaxTxnOps)
	cfg.MaxRequestBytes = cmp.Or(cfg.MaxRequestBytes, 3<<19)
	cfg.PaddingInFlight = cmp.Or(cfg.PaddingInFlight, 256)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Backend != nil {
		// Neither revisions nor transactions cost anything in etcd's database.
		cfg.MaxPadding, cfg.MaxTxnOps, cfg.MaxRequestBytes = math.MaxInt64, math.MaxInt, math.MaxInt
	}
	im := &importer{cfg: cfg, keys: keySchema{prefix: cfg.Prefix}, log: cfg.Logger, st: st}
	var res ImportResult
	plan, err := planImport(im.keys, st)
	if err != nil {
		return res, err
	}
	im.plan = plan
	im.sessionTxns = im.makeSessionTxns()
	res.Nodes, res.Sessions, res.Ephemerals = plan.nodes, len(plan.sessions), plan.eph
	res.SkippedSessions, res.SkippedEphemerals = plan.skipped, plan.skipEp
	if plan.skipped > 0 || plan.skipEp > 0 {
		im.log.Warn("sessions whose id cannot be an etcd lease id (not positive) are left out with their ephemeral nodes: their parents show fewer children, and their clients must open new sessions",
			zap.Int("sessions", plan.skipped), zap.Int("ephemerals", plan.skipEp))
	}
	if cfg.Backend != nil {
		if cfg.Marker != "" {
			return res, errors.New("zetcd import: a marker to keep needs an etcd client, not a database to write")
		}
		return im.importBackend(res)
	}
	if err := im.begin(ctx); err != nil {
		return res, err
	}
	res.FirstRev = im.first
	layout, why, err := im.layout()
	if err != nil {
		return res, im.failed(err)
	}
	if err := im.grantLeases(ctx); err != nil {
		return res, im.failed(err)
	}
	stopKeeping, err := im.keepLeases(ctx)
	if err != nil {
		return res, im.failed(err)
	}
	defer stopKeeping()
	res.Zxids, res.Why = im.zxidsDone(why)
	if res.ZxidTable, err = im.addZxidTable(layout, why != ""); err != nil {
		return res, im.failed(err)
	}
	if err := im.write(ctx, layout); err != nil {
		return res, im.failed(err)
	}
	res.Revisions = len(layout.revs)
	final, resume := im.finalRev(layout)
	sessionTxns := im.sessionTxns
	if err := im.padTo(ctx, final-1-int64(len(sessionTxns))); err != nil {
		return res, im.failed(err)
	}
	for i, puts := range sessionTxns {
		ops := make([]clientv3.Op, len(puts))
		for j, p := range puts {
			ops[j] = p.op()
		}
		if err := im.commitAt(ctx, final-int64(len(sessionTxns)-i), ops); err != nil {
			return res, im.failed(err)
		}
	}
	if err := im.finish(ctx, final); err != nil {
		return res, im.failed(err)
	}
	res.FinalRev, res.Padding, res.ResumeOK, res.Mapped = final, im.padded, resume, layout.mapped
	im.log.Info("import done", zap.Int("nodes", res.Nodes), zap.String("zxids", string(res.Zxids)),
		zap.Int("revisions", res.Revisions), zap.Int64("padding", res.Padding), zap.Int64("final-revision", final))
	return res, nil
}

// zxidsDone is what an import did with zxids, why being layout's.
func (im *importer) zxidsDone(why string) (ImportZxids, string) {
	if why == "" {
		return ImportExact, ""
	}
	im.log.Warn("zxids renumbered in order: zetcd's zxids differ from ZooKeeper's", zap.String("why", why))
	return ImportRenumber, why
}

// failed says that the marker stays, so that no zetcd serves what was half written.
func (im *importer) failed(err error) error {
	return fmt.Errorf("zetcd import into prefix %q failed, leaving its import marker %q (delete the prefix before importing again): %w",
		im.keys.prefix, im.keys.importMarker(), err)
}

// begin checks that the prefix is empty and puts the marker, with the system nodes whose
// zxids are all zero: New reports a system node's zxid equal to its own create revision (index
// 0) as 0.
func (im *importer) begin(ctx context.Context) error {
	for _, rg := range im.keys.storeRanges() {
		r, err := im.cfg.Client.Get(ctx, rg[0], clientv3.WithRange(rg[1]), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("zetcd import: read prefix %q: %w", im.keys.prefix, err)
		}
		if len(r.Kvs) > 0 {
			return fmt.Errorf("zetcd import: prefix %q is not empty (it holds %q): import only into an unused prefix", im.keys.prefix, r.Kvs[0].Key)
		}
	}
	im.marker = im.markerValue()
	ops := []clientv3.Op{clientv3.OpPut(im.keys.importMarker(), im.marker)}
	zero := &importLayout{}
	for _, op := range im.plan.byZxid[0] {
		ops = append(ops, im.putFor(op, 0, zero).op())
	}
	t, err := im.cfg.Client.Txn(ctx).
		If(im.keys.emptyStore()...).
		Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("zetcd import: start: %w", err)
	}
	if !t.Succeeded {
		return fmt.Errorf("zetcd import: prefix %q is not empty: a key appeared in it as the import started", im.keys.prefix)
	}
	im.first = t.Header.Revision
	im.log.Info("import started", zap.String("prefix", im.keys.prefix), zap.Int64("revision", im.first),
		zap.Int("nodes", im.plan.nodes), zap.Int("zxids", len(im.plan.zxids)), zap.String("last-zxid", fmt.Sprintf("%#x", im.st.LastZxid)))
	return nil
}

// markerValue is the import marker's value, for its reader: a mirror's (ImportConfig.Marker)
// from the start, so that the processes of its migration know it while it loads.
func (im *importer) markerValue() string {
	if im.cfg.Marker != "" {
		return im.cfg.Marker
	}
	return fmt.Sprintf("import of %d znodes up to zxid %#x started %s", im.plan.nodes, im.st.LastZxid, time.Now().UTC().Format(time.RFC3339))
}

// layout places the zxids as cfg.Zxids asks; why says why they were renumbered.
func (im *importer) layout() (_ *importLayout, why string, err error) {
	maxOps, maxBytes := im.cfg.MaxTxnOps, im.cfg.MaxRequestBytes
	if im.cfg.Zxids != ImportRenumber {
		l, err := im.plan.exactLayout(im.first, maxOps, maxBytes)
		if err == nil {
			final, _ := im.finalRev(l)
			if pad := final - im.first - 1 - int64(len(l.revs)); pad > im.cfg.MaxPadding {
				err = fmt.Errorf("exact zxids need %d revisions of padding, past the bound %d", pad, im.cfg.MaxPadding)
			}
		}
		if err == nil {
			return l, "", nil
		}
		if im.cfg.Zxids == ImportExact {
			return nil, "", fmt.Errorf("exact zxids impossible: %w", err)
		}
		why = err.Error()
	} else {
		why = "asked for"
	}
	// Past ZooKeeper's last zxid, a node's zxids read on zetcd are not below those a client
	// read on ZooKeeper; the padding there is the one finalRev would do after them.
	from := im.first + 1
	if past := revOf(encoding.Zxid(im.st.LastZxid)) + 1; past > from && past-from <= im.cfg.MaxPadding {
		from = past
	}
	l, err := im.plan.renumberedLayout(from, min(maxOps, renumberedTxnOps), maxBytes)
	return l, why, err
}

// finalRev is the revision of the import's last transaction, and whether it is past
// ZooKeeper's LastZxid (so that a client's lastZxidSeen from ZooKeeper is not ahead of zetcd):
// always for exact zxids, for renumbered ones if the padding to it is within bounds. The
// sessions' transactions come just before it.
func (im *importer) finalRev(l *importLayout) (int64, bool) {
	final := im.first + 1
	if n := len(l.revs); n > 0 {
		final = l.revs[n-1].rev + 1
	}
	final += int64(len(im.sessionTxns))
	past := revOf(encoding.Zxid(im.st.LastZxid)) + 1
	if past <= final {
		return final, true
	}
	if past-final > im.cfg.MaxPadding {
		return final, false
	}
	return past, true
}

// write commits each revision's writes, padding before each. The next revision's operations
// are built while etcd commits the one before.
func (im *importer) write(ctx context.Context, l *importLayout) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	built := make(chan []clientv3.Op, 1)
	go func() {
		defer close(built)
		for _, r := range l.revs {
			ops := make([]clientv3.Op, 0, r.ops)
			for _, z := range r.zxids {
				for _, op := range im.plan.byZxid[z] {
					ops = append(ops, im.putFor(op, l.zxid(op.zxid), l).op())
				}
			}
			select {
			case built <- ops:
			case <-ctx.Done():
				return
			}
		}
	}()
	last := time.Now()
	written := 0
	for i, r := range l.revs {
		ops := <-built
		if err := im.padTo(ctx, r.rev-1); err != nil {
			return err
		}
		if err := im.commitAt(ctx, r.rev, ops); err != nil {
			return err
		}
		written += r.ops
		if time.Since(last) > 2*time.Second || i == len(l.revs)-1 {
			last = time.Now()
			im.log.Info("import writing", zap.Int("revisions", i+1), zap.Int("of", len(l.revs)), zap.Int("keys", written))
		}
	}
	return nil
}

// commitAt commits ops as revision rev: etcd must be at rev-1, and the marker ours.
func (im *importer) commitAt(ctx context.Context, rev int64, ops []clientv3.Op) error {
	t, err := im.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(im.keys.importMarker()), "=", im.first)).
		Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("write revision %d: %w", rev, err)
	}
	if !t.Succeeded {
		return fmt.Errorf("write revision %d: the import marker changed under the import", rev)
	}
	if t.Header.Revision != rev {
		return fmt.Errorf("write revision %d: etcd committed it as revision %d: something else writes to this etcd", rev, t.Header.Revision)
	}
	return nil
}

// importPut is one put of an import: the same whether it goes through etcd's client or into
// its backend (backendWriter).
type importPut struct {
	key, value string
	lease      int64
}

func (p importPut) op() clientv3.Op {
	return clientv3.OpPut(p.key, p.value, clientv3.WithLease(clientv3.LeaseID(p.lease)))
}

// putFor is the put of op, its ZooKeeper zxid placed at z.
func (im *importer) putFor(op importOp, z encoding.Zxid, l *importLayout) importPut {
	return importPut{string(im.keys.appendImportKey(nil, op)), string(appendImportValue(nil, op, z, l)), op.lease}
}

// appendImportKey appends op's key to b: keySchema's data, childCreates, childDeletes, offsets
// or reapIndex key of op's node.
func (k keySchema) appendImportKey(b []byte, op importOp) []byte {
	path := op.node.Path
	b = append(b, k.prefix...)
	switch op.kind {
	case 'n':
		b = append(b, "n/"...)
	case 'r':
		return append(append(b, 'r'), path...)
	default:
		b = append(b, "m/"...)
	}
	b = strconv.AppendInt(b, int64(depth(path)), 10)
	b = append(b, path...)
	if op.kind != 'n' {
		b = append(b, 0, op.kind)
	}
	return b
}

// appendImportValue appends op's value to b, its ZooKeeper zxid placed at z.
func appendImportValue(b []byte, op importOp, z encoding.Zxid, l *importLayout) []byte {
	n, s := op.node, op.node.Stat
	switch op.kind {
	case 'n':
		ix := zxidIndexes{mzxid: uint16(z & maxBatchIndex)}
		if cz := l.zxid(int64(s.Czxid)); revOf(cz) == revOf(z) {
			ix.czxid = uint16(cz & maxBatchIndex)
		}
		return appendDataValue(b, n.Data, s.Mtime, ix, importMeta(n))
	case 'c', 'd':
		return appendIndexValue(b, uint16(z&maxBatchIndex))
	case 'o':
		return appendOffsetsValue(b, importOffsets(n, z, l))
	}
	return b
}

// importMeta is the meta of a node's data value: ctime, kind, TTL and ACL.
func importMeta(n *zkdata.Node) aclValue {
	m := aclValue{Ctime: n.Stat.Ctime, Mode: encoding.ModePersistent, ACL: n.ACL}
	switch n.Type() {
	case zkdata.Ephemeral:
		m.Mode = encoding.ModeEphemeral
	case zkdata.Container:
		m.Mode = encoding.ModeContainer
	case zkdata.TTL:
		m.Mode, m.TTL = encoding.ModePersistentWithTTL, n.TTL()
	}
	return m
}

// importCreates is a node's create counter C (DataNode keeps it as its cversion; a client
// reads 2C - numChildren).
func importCreates(n *zkdata.Node) int64 {
	return (int64(n.Stat.Cversion) + int64(n.Stat.NumChildren)) / 2
}

// importChildKey names the meta key an import puts at a node's pzxid: the child-create key of
// a node that has had children (the replica finds a node's children through it, and its
// Version counts C), else the child-delete key if pzxid is past czxid, else none (0).
func importChildKey(n *zkdata.Node) byte {
	switch {
	case importCreates(n) > 0:
		return 'c'
	case n.Stat.Pzxid > n.Stat.Czxid:
		return 'd'
	}
	return 0
}

// importOffsets is the offsets value that makes a node written by an import (data key put
// once, ACL key absent, child-create key put once if C > 0) report ZooKeeper's
// version, aversion and create counter, and its czxid when it lies outside the revision of
// mzxid (z, where the data key is put).
func importOffsets(n *zkdata.Node, z encoding.Zxid, l *importLayout) offsetsValue {
	s := n.Stat
	c := importCreates(n)
	if importChildKey(n) == 'c' {
		c-- // the child-create key's Version 1
	}
	o := offsetsValue{
		Version:  -int64(s.Version),
		Aversion: int64(aversionOffset(n.Path)) - int64(s.Aversion),
		Creates:  c,
	}
	if cz := l.zxid(int64(s.Czxid)); cz != 0 && revOf(cz) != revOf(z) {
		o.Czxid = int64(cz)
	}
	return o
}

// needsOffsets reports whether a node needs an offsets key whatever the layout of zxids
// (importOffsets may then be zero, which is harmless).
func needsOffsets(n *zkdata.Node) bool {
	s := n.Stat
	c := importCreates(n)
	if importChildKey(n) == 'c' {
		c--
	}
	return s.Version != 0 || int64(aversionOffset(n.Path)) != int64(s.Aversion) || c != 0 || s.Czxid != s.Mzxid
}

// grantLeases grants each imported session's lease, with the session's id and the TTL zetcd
// gives a session of its timeout (timing.go, leaseTTL, with the default margin).
func (im *importer) grantLeases(ctx context.Context) error {
	lc := im.cfg.LeaseClient
	if lc == nil {
		lc = pb.NewLeaseClient(im.cfg.Client.ActiveConnection())
	}
	for _, sess := range im.plan.sessions {
		if _, err := lc.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: sess.ID, TTL: sessionTTL(sess)}); err != nil {
			return fmt.Errorf("grant the lease of session %#x: %w", sess.ID, err)
		}
	}
	if n := len(im.plan.sessions); n > 0 {
		im.log.Info("import: sessions' leases granted", zap.Int("sessions", n))
	}
	return nil
}

// keepLeases refreshes the imported sessions' leases until stop is called, at the import's
// end: a long import (padding millions of revisions) must not let etcd expire a lease before
// its ephemerals are written, nor before zetcd serves the session. Once zetcd runs, the session
// is an orphan like any other (orphans.go), ended at its timeout unless resumed.
func (im *importer) keepLeases(ctx context.Context) (stop func(), err error) {
	kctx, cancel := context.WithCancel(ctx)
	for _, sess := range im.plan.sessions {
		ch, err := im.cfg.Client.KeepAlive(kctx, clientv3.LeaseID(sess.ID))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("keep the lease of session %#x alive: %w", sess.ID, err)
		}
		go func() {
			for range ch {
			}
		}()
	}
	return cancel, nil
}

// makeSessionTxns returns the puts of the imported sessions' keys, in transactions within etcd's
// limits: orphans of process 0, with ZooKeeper's passwords and their timeouts.
func (im *importer) makeSessionTxns() [][]importPut {
	var txns [][]importPut
	for i, sess := range im.plan.sessions {
		if i%im.cfg.MaxTxnOps == 0 {
			txns = append(txns, nil)
		}
		id := encoding.SessionID(sess.ID)
		v := encodeSessionValue(sessionValue{passwd: zkSessionPasswd(sess.ID), timeoutMs: sess.Timeout})
		txns[len(txns)-1] = append(txns[len(txns)-1], importPut{im.keys.session(id), v, sess.ID})
	}
	return txns
}

// sessionTTL is the TTL of session sess's lease: the one zetcd gives a session of its timeout
// (timing.go, leaseTTL, with the default margin).
func sessionTTL(sess zkdata.Session) int64 {
	return leaseTTLWith(time.Duration(sess.Timeout)*time.Millisecond, defaultLeaseMargin)
}

// zkSessionPasswd is the password ZooKeeper gives session id (ZooKeeperServer.generatePasswd):
// 16 bytes of java.util.Random seeded with id ^ ZooKeeperServer.superSecret (0xB3415C00), as
// Random.nextBytes draws them: each nextInt gives four bytes, low byte first.
func zkSessionPasswd(id int64) []byte {
	const (
		multiplier = 0x5DEECE66D
		mask       = 1<<48 - 1
	)
	seed := (id ^ 0xB3415C00 ^ multiplier) & mask
	out := make([]byte, 16)
	for i := 0; i < len(out); {
		seed = (seed*multiplier + 0xB) & mask
		rnd := int32(seed >> 16)
		for n := min(len(out)-i, 4); n > 0; n-- {
			out[i] = byte(rnd)
			rnd >>= 8
			i++
		}
	}
	return out
}

// padTo puts the marker until etcd's revision is rev (nothing when it is there already).
func (im *importer) padTo(ctx context.Context, rev int64) error {
	cur, err := im.revision(ctx)
	if err != nil {
		return err
	}
	if cur > rev {
		return fmt.Errorf("etcd is at revision %d, past %d: something else writes to this etcd", cur, rev)
	}
	need := rev - cur
	if need == 0 {
		return nil
	}
	start := time.Now()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range min(int64(im.cfg.PaddingInFlight), need) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if _, err := im.cfg.Client.Put(ctx, im.keys.importMarker(), im.marker); err != nil {
					once.Do(func() { firstErr = err })
				}
				done.Add(1)
			}
		}()
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
feed:
	for i := int64(0); i < need; i++ {
		select {
		case next <- struct{}{}:
		case <-tick.C:
			i--
			d := done.Load()
			im.log.Info("import padding", zap.Int64("revisions", d), zap.Int64("of", need),
				zap.Float64("per-second", float64(d)/time.Since(start).Seconds()))
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return fmt.Errorf("padding to revision %d: %w", rev, firstErr)
	}
	im.padded += need
	if need > 1000 {
		im.log.Info("import padded", zap.Int64("revisions", need), zap.Int64("to", rev),
			zap.Float64("per-second", float64(need)/time.Since(start).Seconds()))
	}
	if cur, err = im.revision(ctx); err != nil {
		return err
	}
	if cur != rev {
		return fmt.Errorf("padded to revision %d but etcd is at %d: something else writes to this etcd", rev, cur)
	}
	return nil
}

// revision is etcd's current revision.
func (im *importer) revision(ctx context.Context) (int64, error) {
	r, err := im.cfg.Client.Get(ctx, im.keys.importMarker(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return r.Header.Revision, nil
}

// finish deletes the marker (or leaves it with cfg.Marker's value) and puts the fence, as
// revision final.
func (im *importer) finish(ctx context.Context, final int64) error {
	marker := clientv3.OpDelete(im.keys.importMarker())
	if im.cfg.Marker != "" {
		marker = clientv3.OpPut(im.keys.importMarker(), im.cfg.Marker)
	}
	ops := []clientv3.Op{marker, clientv3.OpPut(im.keys.fence(), "0")}
	if im.zxidHead != "" {
		ops = append(ops, clientv3.OpPut(im.keys.migratedZxids(), im.zxidHead))
	}
	return im.commitAt(ctx, final, ops)
}

// addZxidTable gives a renumbered import the table of its zxids that a migration's cutover
// leaves (ZxidTable), so that zetcd shows ZooKeeper's zxids in every Stat: its chunks go in
// transactions just before the final one, with the sessions', and its head in the final one,
// with the marker's deletion. Only where zetcd's later zxids are above ZooKeeper's last (the
// final revision padded past it): a Stat then keeps ZooKeeper's order, ZooKeeper's zxids below
// zetcd's own. Not for a mirror's load, whose cutover writes the table.
func (im *importer) addZxidTable(l *importLayout, renumbered bool) (bool, error) {
	if !renumbered || im.cfg.Marker != "" {
		return false, nil
	}
	head, chunks, err := ZxidTable{Last: im.st.LastZxid, Zxids: l.mapped}.encode()
	if err != nil {
		return false, err
	}
	sessions := im.sessionTxns
	txns := make([][]importPut, 0, len(chunks)+len(sessions))
	for i, c := range chunks {
		txns = append(txns, []importPut{{key: im.keys.migratedZxidsChunk(i), value: string(c)}})
	}
	im.sessionTxns = append(txns, sessions...)
	if _, resume := im.finalRev(l); !resume {
		im.sessionTxns = sessions
		return false, nil
	}
	im.zxidHead = string(head)
	return true, nil
}

// errImportUnfinished is what New answers on a prefix holding the import marker.
var errImportUnfinished = errors.New("its import marker is present")

// checkImportMarker is the error of a prefix holding the import marker, whose value is marker.
func checkImportMarker(k keySchema, marker []byte) error {
	if bytes.HasPrefix(marker, []byte(mirrorMarkerPrefix)) {
		return fmt.Errorf("zetcd: prefix %q holds a copy of a running ZooKeeper, not served until the migration ends (%w: %q); to drop the copy, delete the prefix", k.prefix, errImportUnfinished, marker)
	}
	return fmt.Errorf("zetcd: an import into prefix %q did not finish (%w: %q); delete the prefix and run zetcd import again", k.prefix, errImportUnfinished, marker)
}

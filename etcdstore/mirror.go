package etcdstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// A Mirror keeps an exact copy of a running ZooKeeper in an empty prefix, from the states of
// its nodes as a follower of ZooKeeper reports them (internal/zklive's Follow): docs/migration.md,
// "Migration mode".
//
// Load writes the initial tree as Import does, zxids renumbered, and leaves the import marker in
// place (ImportConfig.Marker): New refuses the prefix while the copy follows ZooKeeper, so no
// zetcd serves it and no leader's job (orphaned sessions' ends, the reaper, quota statistics)
// touches it. Flush then writes the changes reported since, each node's newest state exactly:
// data, ACL, every Stat field, its keys as Import would leave them, corrected by the offsets key.
//
// Zxids. ZooKeeper's zxids are mapped to zetcd's in a table, in order: a batch, one etcd
// transaction at revision R, numbers the ZooKeeper zxids it writes for the first time R<<16|i
// in their order, i from 1 (index 0 of a revision is the zxid 0 of the system nodes, stat.go).
// A node's state is read after its event, so it may hold zxids whose transactions' other nodes
// are not reported yet; numbering such a zxid now could place a lower one, reported later,
// after it. So a batch numbers only the zxids up to the follower's settled zxid (every
// transaction up to it fully reported), all of them, and writes every part of a state they
// carry; the parts of a state carrying a later zxid wait for it (the data key with a newer mzxid,
// and a node created or created again; the child-create key with a newer pzxid), while its ACL
// goes at once and its czxid, which the offsets key can hold apart, needs only its number.
// Load does the same with the initial tree: Import writes every node holding a zxid up to the
// settled one, without the parts that wait.
//
// Epochs. A batch's revision R must also be above the ZooKeeper zxids it numbers (Z>>16 < R):
// a client that read a node through ZooKeeper before the cutover and through zetcd after it
// must not see its zxids go back. Load pads etcd past ZooKeeper's last zxid, after which the
// copy's revisions outrun ZooKeeper's counter within that epoch; a leader election moves
// ZooKeeper to the next epoch (epoch<<32), 65,536 revisions ahead, and the batch that first
// numbers such a zxid pads etcd's revision past it first, as the cutover does (PadPast). That
// padding is bounded by MaxPadding in all; past it the copy goes on without padding, its
// zxids below ZooKeeper's, and says so (MirrorProgress.Unpadded).
//
// Sessions. An ephemeral of ZooKeeper session s is attached to an etcd lease of id s, with s's
// session key (its ZooKeeper password, its timeout, owner process 0), as Import writes them;
// the mirror keeps those leases alive while ZooKeeper owns the sessions, and revokes a lease
// once its session has no ephemeral left in the copy. A session id that is not positive cannot
// be a lease: its ephemerals are left out, as Import leaves them out, and counted.

// ErrCopyImpossible marks the errors of a Mirror that keeping on cannot mend: a zxid's order
// or a ZooKeeper transaction's writes that the copy cannot hold, a corrupt key, another writer
// of the prefix. Its other errors are etcd's: Flush may be called again.
var ErrCopyImpossible = errors.New("the copy cannot be kept exact")

// MirrorConfig configures a Mirror.
type MirrorConfig struct {
	Client *clientv3.Client
	// LeaseClient grants the sessions' leases with their ids (default: one on Client's
	// connection; an in-process client has none).
	LeaseClient pb.LeaseClient
	// Prefix is the store's prefix (default "/zk/"); it must hold no key.
	Prefix string
	Logger *zap.Logger
	// Source names what is copied (ZooKeeper's addresses), for the import marker's value.
	Source string
	// MaxTxnOps and MaxRequestBytes are etcd's --max-txn-ops and --max-request-bytes (defaults
	// 128 and 1.5 MiB, etcd's), within which each batch stays.
	MaxTxnOps       int
	MaxRequestBytes int
	// MaxPadding bounds the padding of the initial write (ImportConfig.MaxPadding), and that
	// of the writes after it, in all, past ZooKeeper's new epochs (default DefaultMaxPadding).
	MaxPadding int64
	// Timeouts returns the timeouts in ms of sessions first seen owning ephemerals, by id (0:
	// unknown); nil leaves them unknown.
	Timeouts func(ids []int64) map[int64]int32
}

// Mirror is the copy's writer. Change may be called from one goroutine while Load and Flush run
// on another.
type Mirror struct {
	cfg  MirrorConfig
	keys keySchema
	log  *zap.Logger

	mu      sync.Mutex
	pending map[string]mirrorChange // the newest state reported of each node not written yet
	seq     uint64

	// Owned by Load and Flush.
	first    int64                   // the import marker's CreateRevision
	mapped   map[int64]encoding.Zxid // ZooKeeper's zxids written, and their zetcd zxids
	last     int64                   // the newest ZooKeeper zxid in mapped
	written  int64                   // every transaction up to this ZooKeeper zxid is in the copy
	owners   map[string]int64        // the copy's ephemerals, and their sessions
	sessions map[int64]*mirrorSession
	skipped  map[string]bool // ephemerals left out: their sessions cannot be leases
	rev      int64           // etcd's revision is at least this
	loadPad  int64           // the revisions Load padded
	padded   int64           // the revisions padded past ZooKeeper's epochs since Load
	unpadded int64           // the newest ZooKeeper zxid numbered below it, MaxPadding spent
}

// mirrorChange is a node's reported state (nil: deleted), numbered so that a later report
// replacing it is not mistaken for it.
type mirrorChange struct {
	node *zkdata.Node
	seq  uint64
}

// mirrorSession is a lease the mirror holds: its session's ephemerals in the copy, and the stop
// of its keepalive.
type mirrorSession struct {
	ephemerals int
	stop       context.CancelFunc
}

// NewMirror returns a mirror that takes changes (Change) at once; Load writes the initial tree.
func NewMirror(cfg MirrorConfig) *Mirror {
	cfg.Prefix = cmp.Or(cfg.Prefix, "/zk/")
	cfg.MaxTxnOps = cmp.Or(cfg.MaxTxnOps, defaultMaxTxnOps)
	cfg.MaxRequestBytes = cmp.Or(cfg.MaxRequestBytes, 3<<19)
	cfg.MaxPadding = cmp.Or(cfg.MaxPadding, DefaultMaxPadding)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.LeaseClient == nil {
		cfg.LeaseClient = pb.NewLeaseClient(cfg.Client.ActiveConnection())
	}
	return &Mirror{
		cfg: cfg, keys: keySchema{prefix: cfg.Prefix}, log: cfg.Logger,
		pending: map[string]mirrorChange{}, mapped: map[int64]encoding.Zxid{0: 0},
		owners: map[string]int64{}, sessions: map[int64]*mirrorSession{}, skipped: map[string]bool{},
	}
}

// Change records node as p's newest state (nil: p is deleted), to be written by Flush.
func (m *Mirror) Change(p string, node *zkdata.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.pending[p] = mirrorChange{node: node, seq: m.seq}
}

// MirrorProgress is how far the copy is.
type MirrorProgress struct {
	// Written: every ZooKeeper transaction up to this zxid is in the copy.
	Written int64
	// Pending counts the nodes whose reported state is not written yet.
	Pending int
	// SkippedEphemerals counts ephemerals left out (sessions whose id cannot be a lease).
	SkippedEphemerals int
	// Padding counts the revisions etcd's revision was padded to keep the copy's zxids above
	// ZooKeeper's: by Load, and past each new ZooKeeper epoch since.
	Padding int64
	// Unpadded is the newest ZooKeeper zxid the copy numbered below itself, MaxPadding being
	// spent (0: none).
	Unpadded int64
}

// Load writes st, the tree Follow read, into the empty prefix as Import does (zxids
// renumbered), but for the nodes whose states must wait (see above) and those changed since,
// which Flush writes; settled is the follower's settled zxid.
func (m *Mirror) Load(ctx context.Context, st *zkdata.State, settled int64) (ImportResult, error) {
	m.mu.Lock()
	for p, n := range st.Nodes {
		if _, ok := m.pending[p]; !ok {
			m.seq++
			m.pending[p] = mirrorChange{node: n, seq: m.seq}
		}
	}
	snap := maps.Clone(m.pending)
	m.mu.Unlock()
	// Import writes every node holding a zxid up to settled, so that every zxid up to it is
	// numbered in order; of a node holding later ones too, what they carry is left for Flush:
	// its data key is written at its czxid (its mzxid later), no child-create key (its pzxid
	// later).
	initial := &zkdata.State{Nodes: map[string]*zkdata.Node{}, Sessions: map[int64]zkdata.Session{}, LastZxid: st.LastZxid}
	var whole []string
	var fresh []int64
	for p, c := range snap {
		n := c.node
		if n == nil || int64(n.Stat.Czxid) > settled {
			continue
		}
		if owner := int64(n.Stat.EphemeralOwner); owner != 0 {
			if owner < 0 {
				m.skipped[p] = true
				whole = append(whole, p)
				continue
			}
			s, ok := st.Sessions[owner]
			if !ok {
				fresh = append(fresh, owner)
			}
			initial.Sessions[owner] = zkdata.Session{ID: owner, Timeout: s.Timeout}
		}
		if int64(n.Stat.Mzxid) <= settled && int64(n.Stat.Pzxid) <= settled {
			whole = append(whole, p)
		} else {
			part := *n
			if int64(part.Stat.Mzxid) > settled {
				part.Stat.Mzxid, part.Stat.Version = part.Stat.Czxid, 0
			}
			if int64(part.Stat.Pzxid) > settled {
				part.Stat.Pzxid, part.Stat.Cversion = part.Stat.Czxid, -part.Stat.NumChildren
			}
			n = &part
		}
		initial.Nodes[p] = n
	}
	for id, to := range m.timeouts(fresh) {
		initial.Sessions[id] = zkdata.Session{ID: id, Timeout: to}
	}
	res, err := Import(ctx, ImportConfig{
		Client: m.cfg.Client, LeaseClient: m.cfg.LeaseClient, Prefix: m.cfg.Prefix, Logger: m.log,
		Zxids: ImportRenumber, MaxPadding: m.cfg.MaxPadding, MaxTxnOps: m.cfg.MaxTxnOps,
		MaxRequestBytes: m.cfg.MaxRequestBytes, Marker: m.markerValue(),
	}, initial)
	if err != nil {
		return res, err
	}
	m.first, m.rev, m.loadPad = res.FirstRev, res.FinalRev, res.Padding
	maps.Copy(m.mapped, res.Mapped)
	for z := range res.Mapped {
		m.last = max(m.last, z)
	}
	m.written = settled
	for p, n := range initial.Nodes {
		if owner := int64(n.Stat.EphemeralOwner); owner != 0 {
			if err := m.hold(ctx, owner, p); err != nil {
				return res, err
			}
		}
	}
	m.done(snap, whole)
	m.log.Info("migration: initial tree written", zap.Int("nodes", res.Nodes), zap.Int("waiting", len(snap)-len(whole)),
		zap.String("written", fmt.Sprintf("%#x", settled)), zap.Int64("revision", res.FinalRev))
	return res, nil
}

// mirrorMarkerPrefix begins a mirror's import marker value, which New's refusal names.
const mirrorMarkerPrefix = "migration from ZooKeeper "

func (m *Mirror) markerValue() string {
	return fmt.Sprintf("%s%s started %s", mirrorMarkerPrefix, m.cfg.Source, time.Now().UTC().Format(time.RFC3339))
}

func (m *Mirror) timeouts(ids []int64) map[int64]int32 {
	if len(ids) == 0 || m.cfg.Timeouts == nil {
		return nil
	}
	return m.cfg.Timeouts(ids)
}

// done drops the changes written from pending, unless a newer one replaced them meanwhile.
func (m *Mirror) done(snap map[string]mirrorChange, paths []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range paths {
		if m.pending[p].seq == snap[p].seq {
			delete(m.pending, p)
		}
	}
}

// Mapped returns every ZooKeeper zxid the copy wrote and its zetcd zxid, both rising
// together (ZxidTable). It reads what Load and Flush write: call it once they stopped.
func (m *Mirror) Mapped() map[int64]encoding.Zxid {
	return maps.Clone(m.mapped)
}

// Progress is the copy's progress.
func (m *Mirror) Progress() MirrorProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MirrorProgress{Written: m.written, Pending: len(m.pending), SkippedEphemerals: len(m.skipped),
		Padding: m.loadPad + m.padded, Unpadded: m.unpadded}
}

// Close stops keeping the sessions' leases alive; etcd expires them at their TTL unless the
// process that takes the copy over keeps them.
func (m *Mirror) Close() {
	for _, s := range m.sessions {
		s.stop()
	}
}

// Flush writes, batch by batch, what the reported changes hold up to the follower's settled
// zxid, and returns the progress.
func (m *Mirror) Flush(ctx context.Context, settled int64) (MirrorProgress, error) {
	for {
		m.mu.Lock()
		snap := maps.Clone(m.pending)
		m.mu.Unlock()
		batch, bound, err := m.choose(snap, settled, m.cfg.MaxTxnOps)
		if err != nil {
			return m.Progress(), err
		}
		if len(batch) > 0 {
			if err := m.write(ctx, snap, batch, bound); err != nil {
				return m.Progress(), err
			}
		}
		m.written = max(m.written, bound)
		if bound >= settled {
			return m.Progress(), nil
		}
	}
}

// zxidsOf are the ZooKeeper zxids n's Stat holds.
func zxidsOf(n *zkdata.Node) [3]int64 {
	return [3]int64{int64(n.Stat.Czxid), int64(n.Stat.Mzxid), int64(n.Stat.Pzxid)}
}

// spans returns, for each state of snap holding zxids not mapped yet, the lowest and highest of
// them; it fails if one lies below a zxid already mapped.
func (m *Mirror) spans(snap map[string]mirrorChange) (map[string]zspan, error) {
	spans := map[string]zspan{}
	for p, c := range snap {
		if c.node == nil {
			continue
		}
		s := zspan{lo: -1}
		for _, z := range zxidsOf(c.node) {
			if _, ok := m.mapped[z]; ok {
				continue
			}
			if z <= m.last {
				return nil, fmt.Errorf("migration: %w: %s holds zxid %#x, below %#x already written", ErrCopyImpossible, p, z, m.last)
			}
			if s.lo < 0 || z < s.lo {
				s.lo = z
			}
			s.hi = max(s.hi, z)
		}
		if s.lo >= 0 {
			spans[p] = s
		}
	}
	return spans, nil
}

// choose returns the paths of snap to write in the next batch, sorted, and the bound up to
// which its zxids are numbered: settled, or lower if more nodes than limit operations allow
// hold zxids up to settled. The batch holds every state with a zxid not mapped up to the bound
// (a state may hold others above it: those parts of it wait), the deletions and the states
// without new zxids (setACLs).
func (m *Mirror) choose(snap map[string]mirrorChange, settled int64, limit int) ([]string, int64, error) {
	spans, err := m.spans(snap)
	if err != nil {
		return nil, 0, err
	}
	bound := settled
	var los []int64
	for _, s := range spans {
		if s.lo <= settled {
			los = append(los, s.lo)
		}
	}
	plain := len(snap) - len(spans)
	capacity := m.capacity(snap, spans, limit)
	if plain+len(los) > capacity {
		slices.Sort(los)
		switch {
		case plain >= capacity:
			bound = m.written
		case los[capacity-plain-1] == los[capacity-plain]:
			// The nodes of one zxid go together, or none.
			cut := los[capacity-plain-1]
			bound = cut - 1
			if i := slices.Index(los, cut); i == 0 && plain == 0 {
				return nil, 0, fmt.Errorf("migration: %w: the nodes written by zxid %#x do not fit one etcd transaction (--etcd-max-txn-ops %d)", ErrCopyImpossible, cut, limit)
			}
		default:
			bound = los[capacity-plain-1]
		}
		bound = max(bound, m.written)
	}
	var batch []string
	for p := range snap {
		if s, ok := spans[p]; !ok || s.lo <= bound {
			batch = append(batch, p)
		}
	}
	slices.Sort(batch)
	if plain > capacity {
		batch = slices.DeleteFunc(batch, func(p string) bool { _, ok := spans[p]; return ok })[:capacity]
	}
	return batch, bound, nil
}

// capacity is how many of snap's nodes, in the order choose takes them (those without new
// zxids, then by their lowest new zxid), fit one transaction within limit operations and
// MaxRequestBytes; at least one.
func (m *Mirror) capacity(snap map[string]mirrorChange, spans map[string]zspan, limit int) int {
	paths := slices.Collect(maps.Keys(snap))
	lo := func(p string) int64 { return spans[p].lo } // 0 without new zxids
	slices.SortFunc(paths, func(a, b string) int { return cmp.Compare(lo(a), lo(b)) })
	ops, bytes := 1, 0 // the fence
	for i, p := range paths {
		ops += mirrorOps
		bytes += 2*len(p) + 512
		if n := snap[p].node; n != nil {
			bytes += 2*len(n.Data) + aclValueLen(aclValue{ACL: n.ACL})
		}
		if ops > limit || bytes > m.cfg.MaxRequestBytes {
			return max(1, i)
		}
	}
	return len(paths)
}

// zspan is the lowest and highest zxid of a node's state that are not written yet.
type zspan struct{ lo, hi int64 }

// mirrorOps bounds the operations of one node's write (data, stats, ACL, child-create and
// offsets keys, a session key).
const mirrorOps = 6

// write commits one batch: reads the nodes' keys, and writes in one transaction what each
// node's new state holds up to bound, numbering the ZooKeeper zxids up to bound met for the
// first time. A node whose state holds zxids above bound stays pending.
func (m *Mirror) write(ctx context.Context, snap map[string]mirrorChange, batch []string, bound int64) (err error) {
	fresh, complete, err := m.number(snap, batch, bound)
	if err != nil {
		return err
	}
	if len(fresh) > 0 {
		if err := m.padPast(ctx, slices.Max(slices.Collect(maps.Keys(fresh)))); err != nil {
			return err
		}
	}
	olds, err := m.read(ctx, batch)
	if err != nil {
		return err
	}
	var granted []int64
	defer func() {
		if err != nil {
			m.ungrant(granted)
		}
	}()
	ops, owners, granted, err := m.batchOps(ctx, snap, batch, olds, fresh)
	if err != nil {
		return err
	}
	ops = append(ops, clientv3.OpPut(m.keys.fence(), "0"))
	t, err := m.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(m.keys.importMarker()), "=", m.first)).
		Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("migration: write %d nodes: %w", len(batch), err)
	}
	if !t.Succeeded {
		return fmt.Errorf("migration: %w: the import marker changed under the mirror: something else writes to its prefix", ErrCopyImpossible)
	}
	m.rev = t.Header.Revision
	for z, i := range fresh {
		m.mapped[z] = zxidOf(t.Header.Revision, i)
		m.last = max(m.last, z)
	}
	m.done(snap, complete)
	m.account(ctx, owners)
	return nil
}

// padPast moves etcd's revision past zxid>>16, unless it is there already, so that the next
// batch's revision numbers zxid above itself (see "Epochs" above); MaxPadding spent, it only
// records and logs zxid as numbered below itself.
func (m *Mirror) padPast(ctx context.Context, zxid int64) error {
	if zxid>>16 <= m.rev {
		return nil
	}
	if need := zxid>>16 + 1 - m.rev; m.padded+need > m.cfg.MaxPadding {
		if m.unpadded>>32 != zxid>>32 {
			m.log.Warn("migration: the copy's zxids fall below ZooKeeper's new epoch: padding etcd past it would exceed the bound; the cutover pads past it",
				zap.String("zookeeper-zxid", fmt.Sprintf("%#x", zxid)), zap.Int64("revisions", need),
				zap.Int64("padded", m.padded), zap.Int64("max-padding", m.cfg.MaxPadding))
		}
		m.unpadded = max(m.unpadded, zxid)
		return nil
	}
	start := time.Now()
	n, err := padPast(ctx, CutoverConfig{Client: m.cfg.Client, LeaseClient: m.cfg.LeaseClient, Prefix: m.cfg.Prefix, Logger: m.log}, zxid)
	m.padded += n
	switch {
	case errors.Is(err, ErrNoMarker):
		return fmt.Errorf("migration: %w: the import marker is gone: something else writes to its prefix", ErrCopyImpossible)
	case err != nil:
		return fmt.Errorf("migration: %w", err)
	}
	m.rev = max(m.rev, zxid>>16+1)
	m.log.Info("migration: etcd's revision padded past ZooKeeper's zxid", zap.String("zookeeper-zxid", fmt.Sprintf("%#x", zxid)),
		zap.Int64("revisions", n), zap.Duration("took", time.Since(start)), zap.Int64("padded", m.padded))
	return nil
}

// number returns the indexes in the batch's revision of the zxids up to bound not numbered yet,
// in their order from 1, and the paths whose states the batch writes whole.
func (m *Mirror) number(snap map[string]mirrorChange, batch []string, bound int64) (map[int64]int, []string, error) {
	fresh := map[int64]int{}
	var zs []int64
	complete := make([]string, 0, len(batch))
	for _, p := range batch {
		whole := true
		if n := snap[p].node; n != nil {
			for _, z := range zxidsOf(n) {
				if _, ok := m.mapped[z]; ok {
					continue
				}
				if z > bound {
					whole = false
				} else if _, ok := fresh[z]; !ok {
					fresh[z] = 0
					zs = append(zs, z)
				}
			}
		}
		if whole {
			complete = append(complete, p)
		}
	}
	if len(zs) > maxBatchIndex {
		return nil, nil, fmt.Errorf("migration: %w: %d new zxids in one batch", ErrCopyImpossible, len(zs))
	}
	slices.Sort(zs)
	for i, z := range zs {
		fresh[z] = i + 1
	}
	return fresh, complete, nil
}

// batchOps are the batch's writes, with the sessions of the nodes it (re)creates or deletes
// (0: none), and the leases granted for it (with their session keys among the writes).
func (m *Mirror) batchOps(ctx context.Context, snap map[string]mirrorChange, batch []string, olds map[string]*nodeKeys, fresh map[int64]int) (ops []clientv3.Op, owners map[string]int64, granted []int64, _ error) {
	owners = map[string]int64{}
	for _, p := range batch {
		n := snap[p].node
		if n != nil && n.Stat.EphemeralOwner < 0 {
			m.skipped[p] = true
			n = nil
		} else {
			delete(m.skipped, p)
		}
		if n == nil {
			ops = append(ops, clientv3.OpDelete(m.keys.data(p)), clientv3.OpDelete(m.keys.metaPrefix(p), clientv3.WithPrefix()))
			owners[p] = 0
			continue
		}
		nops, created, err := m.nodeOps(p, n, olds[p], fresh)
		if err != nil {
			return nil, nil, granted, err
		}
		ops = append(ops, nops...)
		if !created {
			continue
		}
		owner := int64(n.Stat.EphemeralOwner)
		owners[p] = owner
		if owner != 0 && m.sessions[owner] == nil {
			put, err := m.grant(ctx, owner)
			if err != nil {
				return nil, nil, granted, err
			}
			granted = append(granted, owner)
			ops = append(ops, put)
		}
	}
	return ops, owners, granted, nil
}

// ungrant gives up the leases granted for a batch that was not written: a session key is put
// in the batch that grants its lease, so the next grants it again.
func (m *Mirror) ungrant(ids []int64) {
	for _, id := range ids {
		m.sessions[id].stop()
		delete(m.sessions, id)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := m.cfg.Client.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
			m.log.Warn("migration: revoke the lease of a session: etcd expires it", zap.String("session", fmt.Sprintf("%#x", id)), zap.Error(err))
		}
		cancel()
	}
}

// grant grants session id's lease, keeps it alive, and returns the put of its session key.
func (m *Mirror) grant(ctx context.Context, id int64) (clientv3.Op, error) {
	to := m.timeouts([]int64{id})[id]
	sess := zkdata.Session{ID: id, Timeout: to}
	if _, err := m.cfg.LeaseClient.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: sessionTTL(sess)}); err != nil {
		return clientv3.Op{}, fmt.Errorf("migration: grant the lease of session %#x: %w", id, err)
	}
	if err := m.keep(ctx, id); err != nil {
		return clientv3.Op{}, err
	}
	v := encodeSessionValue(sessionValue{passwd: zkSessionPasswd(id), timeoutMs: to})
	return clientv3.OpPut(m.keys.session(encoding.SessionID(id)), v, clientv3.WithLease(clientv3.LeaseID(id))), nil
}

// keep keeps session id's lease alive until Close or its revocation.
func (m *Mirror) keep(ctx context.Context, id int64) error {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch, err := m.cfg.Client.KeepAlive(kctx, clientv3.LeaseID(id))
	if err != nil {
		cancel()
		return fmt.Errorf("migration: keep the lease of session %#x alive: %w", id, err)
	}
	go func() {
		for range ch {
		}
	}()
	m.sessions[id] = &mirrorSession{stop: cancel}
	return nil
}

// hold counts p as an ephemeral of session id, whose lease Import granted.
func (m *Mirror) hold(ctx context.Context, id int64, p string) error {
	if m.sessions[id] == nil {
		if err := m.keep(ctx, id); err != nil {
			return err
		}
	}
	m.owners[p] = id
	m.sessions[id].ephemerals++
	return nil
}

// account records the ephemerals (re)created or deleted, and revokes the leases of sessions
// left without one (a lease etcd does not revoke expires at its TTL, no longer kept alive).
func (m *Mirror) account(ctx context.Context, owners map[string]int64) {
	for p, owner := range owners {
		if id, ok := m.owners[p]; ok {
			m.sessions[id].ephemerals--
			delete(m.owners, p)
		}
		if owner != 0 {
			m.owners[p] = owner
			m.sessions[owner].ephemerals++
		}
	}
	for id, s := range m.sessions {
		if s.ephemerals > 0 {
			continue
		}
		s.stop()
		delete(m.sessions, id)
		if _, err := m.cfg.Client.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
			m.log.Warn("migration: revoke the lease of a session: etcd expires it", zap.String("session", fmt.Sprintf("%#x", id)), zap.Error(err))
		}
	}
}

// read returns the keys of the nodes at paths, as the replica decodes them.
func (m *Mirror) read(ctx context.Context, paths []string) (map[string]*nodeKeys, error) {
	out := make(map[string]*nodeKeys, len(paths))
	per := max(1, m.cfg.MaxTxnOps/2)
	for len(paths) > 0 {
		chunk := paths[:min(per, len(paths))]
		paths = paths[len(chunk):]
		var ops []clientv3.Op
		for _, p := range chunk {
			ops = append(ops, clientv3.OpGet(m.keys.data(p)), clientv3.OpGet(m.keys.metaPrefix(p), clientv3.WithPrefix()))
		}
		t, err := m.cfg.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("migration: read %d nodes: %w", len(chunk), err)
		}
		for i, p := range chunk {
			nk := &nodeKeys{}
			for _, kv := range t.Responses[2*i+1].GetResponseRange().Kvs {
				if _, name, ok := m.keys.pathOfMetaKey(string(kv.Key)); ok {
					nk.putMeta(name, kv, nil)
				}
			}
			if kvs := t.Responses[2*i].GetResponseRange().Kvs; len(kvs) > 0 {
				nk.putData(kvs[0], nil)
			}
			if err := nk.decodeErr(); err != nil {
				return nil, fmt.Errorf("migration: %w: %s: %w", ErrCopyImpossible, p, err)
			}
			out[p] = nk
		}
	}
	return out, nil
}

// zref is where a ZooKeeper zxid lands: a zetcd zxid already written, the index of a zxid
// the batch numbers (fresh), or nowhere yet (later: the part of the state holding it waits).
type zref struct {
	full  encoding.Zxid
	index int
	fresh bool
	later bool
}

func (m *Mirror) ref(z int64, fresh map[int64]int) zref {
	if i, ok := fresh[z]; ok {
		return zref{index: i, fresh: true}
	}
	full, ok := m.mapped[z]
	return zref{full: full, later: !ok}
}

// nodeOps are the writes that give node p, whose keys are old, the state n as far as its zxids
// are numbered: a key is put only where its revision must move (the data key at a new mzxid or
// czxid, the child-create key at a new pzxid) or its value changes, and the offsets key corrects
// etcd's counters to n's. created says that the data key is put with n's session.
//
// The parts of the state are written as their zxids come: the data key with mzxid (data,
// version, mtime; a node is created or created again only with it), the child-create key with
// pzxid (the create counter); czxid, stored apart where it must be (offsets key), only needs
// its number; the ACL and aversion need none.
func (m *Mirror) nodeOps(p string, n *zkdata.Node, old *nodeKeys, fresh map[int64]int) (_ []clientv3.Op, created bool, _ error) {
	s := n.Stat
	cz, mz, pz := m.ref(int64(s.Czxid), fresh), m.ref(int64(s.Mzxid), fresh), m.ref(int64(s.Pzxid), fresh)
	lease := int64(s.EphemeralOwner)
	exists := old.exists()
	oldCz, oldMz, oldPz := old.zxids()
	if exists && s.Czxid == 0 {
		cz.full = zxidOf(old.data.create, 0) // a system node: the bootstrap's zxid reads 0
	}
	if exists && s.Mzxid == 0 {
		mz.full = zxidOf(old.data.create, 0)
	}
	same := func(r zref, z encoding.Zxid) bool { return exists && !r.fresh && !r.later && r.full == z }
	more := old.moreOrZero()
	var ops []clientv3.Op
	putCreates := s.Pzxid != s.Czxid && !same(pz, oldPz) && !pz.later
	if putCreates && !pz.fresh {
		return nil, false, fmt.Errorf("migration: %w: %s: pzxid %#x was numbered before its node was written", ErrCopyImpossible, p, s.Pzxid)
	}
	if putCreates {
		ops = append(ops, clientv3.OpPut(m.keys.childCreates(p), encodeIndexValue(uint16(pz.index))))
	}
	recreated := !same(cz, oldCz) || old.lease != lease
	if mz.later && recreated {
		return ops, false, nil // the node is (created) again with its mzxid
	}
	putData := recreated || !same(mz, oldMz) && !mz.later
	if putData && !mz.fresh && !(s.Mzxid == 0 && !exists) {
		return nil, false, fmt.Errorf("migration: %w: %s: mzxid %#x was numbered before its node was written", ErrCopyImpossible, p, s.Mzxid)
	}
	withLease := clientv3.WithLease(clientv3.LeaseID(lease))
	meta := importMeta(n)
	offs := more.offs

	var ix zxidIndexes
	ix.czxid, offs.Czxid = placeCzxid(cz, s.Czxid == 0, old)
	dataVersion := old.data.version
	switch {
	case putData:
		dataVersion++
		ix.mzxid = uint16(mz.index)
		ops = append(ops, clientv3.OpPut(m.keys.data(p), encodeDataValue(n.Data, s.Mtime, ix, meta), withLease))
		if more.stats.mod != 0 {
			ops = append(ops, clientv3.OpDelete(m.keys.stats(p)))
		}
	case ix.czxid != old.ix.czxid && offs.Czxid == 0:
		return nil, false, fmt.Errorf("migration: %w: %s: czxid %#x", ErrCopyImpossible, p, s.Czxid)
	case mz.later:
	case !bytes.Equal(old.dataNow(), n.Data):
		// Data changed without its version: a quota's statistics (quota.go).
		ops = append(ops, clientv3.OpPut(m.keys.stats(p), string(n.Data), withLease))
	}
	if !mz.later {
		offs.Version = dataVersion - 1 - int64(s.Version)
	}

	// ACL and meta: an ACL key, once there, stands for the data key's meta.
	aclVersion := old.acl.version
	if (old.acl.mod != 0 || !putData) && !sameMeta(old.meta, meta) {
		aclVersion++
		ops = append(ops, clientv3.OpPut(m.keys.acl(p), encodeACLValue(meta)))
	}
	offs.Aversion = aclVersion + int64(aversionOffset(p)) - int64(s.Aversion)

	// The create counter, with pzxid: the newest of czxid and the child-create and child-delete
	// keys' zxids.
	if !pz.later {
		createsVersion := more.creates.version
		if putCreates {
			createsVersion++
		}
		offs.Creates = (int64(s.Cversion)+int64(s.NumChildren))/2 - createsVersion
	}
	if offs.Czxid < 0 || offs != more.offs || putData && more.offsets.mod != 0 && old.lease != lease {
		ops = append(ops, clientv3.OpPut(m.keys.offsets(p), encodeOffsetsValue(offs), withLease))
	}
	return ops, putData, nil
}

// placeCzxid says where czxid cz of a node whose keys are old is kept: in the data key's
// value, as the index beside its CreateRevision (the revision that creates the data key, for a
// node that has none), or else in the offsets key (offsetsValue.Czxid). system is a zxid 0 of a
// system node, which its data key's creation gives.
func placeCzxid(cz zref, system bool, old *nodeKeys) (index uint16, offsets int64) {
	switch {
	case !old.exists() && (cz.fresh || system):
		return uint16(cz.index), 0
	case cz.fresh:
		return 0, czxidOwn(uint16(cz.index))
	case old.exists() && revOf(cz.full) == old.data.create:
		return uint16(cz.full & maxBatchIndex), 0
	}
	return 0, int64(cz.full)
}

func sameMeta(a, b aclValue) bool {
	return a.Ctime == b.Ctime && a.Mode == b.Mode && a.TTL == b.TTL && slices.Equal(a.ACL, b.ACL)
}

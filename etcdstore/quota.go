package etcdstore

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// ZooKeeper's quotas, kept as DataTree keeps them. A quota on path q is the node
// /zookeeper/quota<q>/zookeeper_limits (its data a StatsTrack string of limits); its statistics
// are the data of /zookeeper/quota<q>/zookeeper_stats ("count=N,bytes=M"):
//
//   - creating the limits node makes q a quota'd path (DataTree's pTrie), deleting it unmakes it;
//   - creating the stats node sets its data to the count and bytes of q's subtree as it stands
//     (DataTree.updateQuotaForPath), whatever data the create carried;
//   - every create, delete and setData at or below q, where q is the deepest quota'd path above
//     the node (DataTree.getMaxPrefixWithQuota; "/" never counts), adds to the stats node's count
//     and bytes (DataTree.updateQuotaStat) in the same transaction, so at the same zxid, as the
//     write. ZooKeeper changes only the node's data: its version, mzxid and mtime stay, no watch
//     fires. zetcd keeps such data in the node's stats key (keys.go) rather than its data key,
//     whose etcd counters are the node's version and mzxid.
//   - with Config.EnforceQuota (ZooKeeper's zookeeper.enforceQuota), a create or setData that
//     would pass a hard limit fails with QuotaExceeded, and one that passes a soft limit is
//     logged (ZooKeeperServer.checkQuota); without it nothing is checked or logged, as in
//     ZooKeeper.
//
// The committer keeps them on its overlay (checks.go); the deletes made outside it (an ended
// session's ephemerals, a reaped node) through quotaDeletes. The set of quota'd paths is held
// by the replica (tree.quotas), so a write under no quota costs a test of an empty map. Every
// transaction that creates or deletes a limits node puts the quota key (keys.go), which the
// transactions checked without the fence compare (multiState.guards), so that none counts on a
// stale set.

const (
	quotaZookeeper = "/zookeeper/quota"
	quotaLimitNode = "zookeeper_limits"
	quotaStatNode  = "zookeeper_stats"
)

// quotaLimitPath and quotaStatPath are ZooKeeper's Quotas.limitPath and Quotas.statPath.
func quotaLimitPath(q string) string { return quotaZookeeper + q + "/" + quotaLimitNode }
func quotaStatPath(q string) string  { return quotaZookeeper + q + "/" + quotaStatNode }

// quotaOf returns the quota'd path whose node called name (quotaLimitNode or quotaStatNode)
// path is.
func quotaOf(path, name string) (string, bool) {
	rest, ok := strings.CutPrefix(path, quotaZookeeper)
	if !ok {
		return "", false
	}
	q, ok := strings.CutSuffix(rest, name)
	if !ok || !strings.HasSuffix(q, "/") {
		return "", false
	}
	q = q[:len(q)-1]
	if len(q) < 2 || q[0] != '/' {
		return "", false
	}
	return q, true
}

// quotaSet is the set of quota'd paths: those with a limits node. Shared, never changed in
// place (with and without copy it).
type quotaSet map[string]struct{}

func (s quotaSet) with(q string) quotaSet {
	if _, ok := s[q]; ok {
		return s
	}
	out := make(quotaSet, len(s)+1)
	for p := range s {
		out[p] = struct{}{}
	}
	out[q] = struct{}{}
	return out
}

func (s quotaSet) without(q string) quotaSet {
	if _, ok := s[q]; !ok {
		return s
	}
	out := make(quotaSet, len(s))
	for p := range s {
		if p != q {
			out[p] = struct{}{}
		}
	}
	return out
}

// maxPrefix is DataTree.getMaxPrefixWithQuota: the deepest quota'd path that is path or one of
// its ancestors, "" when there is none.
func (s quotaSet) maxPrefix(path string) string {
	if len(s) == 0 {
		return ""
	}
	for p := path; len(p) > 1; {
		if _, ok := s[p]; ok {
			return p
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return ""
		}
		p = p[:i]
	}
	return ""
}

// statsTrack is ZooKeeper's StatsTrack: "key=value" pairs separated by ',' or ';'; a key
// absent reads -1.
type statsTrack map[string]int64

const (
	statsCount          = "count"
	statsBytes          = "bytes"
	statsCountHardLimit = "countHardLimit"
	statsByteHardLimit  = "byteHardLimit"
)

var errStatsTrack = errors.New("malformed quota statistics")

// parseStatsTrack parses data as StatsTrack's constructor does; err where that one throws.
func parseStatsTrack(data []byte) (statsTrack, error) {
	st := statsTrack{}
	if len(data) == 0 {
		return st, nil
	}
	pairs := strings.FieldsFunc(string(data), func(r rune) bool { return r == ',' || r == ';' })
	if data[0] == ',' || data[0] == ';' {
		return nil, errStatsTrack // Java's split keeps the leading empty pair
	}
	for _, pair := range pairs {
		kv := strings.Split(pair, "=")
		for len(kv) > 0 && kv[len(kv)-1] == "" {
			kv = kv[:len(kv)-1] // Java's split drops trailing empty strings
		}
		if len(kv) < 2 {
			return nil, errStatsTrack
		}
		v := int64(-1)
		if kv[1] != "" {
			var err error
			if v, err = strconv.ParseInt(kv[1], 10, 64); err != nil {
				return nil, errStatsTrack
			}
		}
		st[kv[0]] = v
	}
	return st, nil
}

func (st statsTrack) get(key string) int64 {
	if v, ok := st[key]; ok {
		return v
	}
	return -1
}

// String is StatsTrack.toString: count and bytes first, then, after an extra "=", the other
// keys sorted, each after a ';'.
func (st statsTrack) String() string {
	var b strings.Builder
	b.WriteString("count=" + strconv.FormatInt(st.get(statsCount), 10))
	b.WriteString(",bytes=" + strconv.FormatInt(st.get(statsBytes), 10))
	var rest []string
	for k := range st {
		if k != statsCount && k != statsBytes {
			rest = append(rest, k)
		}
	}
	if len(rest) > 0 {
		b.WriteString("=")
		slices.Sort(rest)
		for _, k := range rest {
			b.WriteString(";" + k + "=" + strconv.FormatInt(st[k], 10))
		}
	}
	return b.String()
}

// nodeBefore is the overlay's node at path as it was before the write being simulated
// (multiState.begin): what ZooKeeper's checkQuota reads, the tree as committed.
func (m *multiState) nodeBefore(path string) *mnode {
	i, ok := m.undo[path]
	switch {
	case !ok:
		return m.node(path)
	case i >= 0:
		return &m.saved[i]
	}
	// Not in the overlay before the write: as the replica holds it (multiState.node).
	if m.lookup != nil {
		if n := m.lookup(path); n != nil {
			return n
		}
	}
	return &mnode{path: path}
}

// checkQuota is ZooKeeperServer.checkQuota for a create (countDiff 1, lastData nil) or a
// setData of data at path: QuotaExceeded past a hard limit, a WARN past a soft one. It reads
// the quota'd paths, limits and stats from before the write, as ZooKeeper reads its committed
// tree while it prepares a multi's ops.
func (m *multiState) checkQuota(path string, lastData, data []byte, countDiff int64) encoding.ErrCode {
	if !m.enforceQuota {
		return 0
	}
	q := m.quotasBefore.maxPrefix(path)
	if q == "" {
		return 0
	}
	ln := m.nodeBefore(quotaLimitPath(q))
	limits, err := parseStatsTrack(ln.data)
	if !ln.exists || err != nil {
		m.log.Warn("quota: limits node missing or unreadable", zap.String("path", quotaLimitPath(q)), zap.Error(err))
		return 0
	}
	bytesDiff := int64(len(data) - len(lastData))
	checkCount := countDiff != 0 && (limits.get(statsCount) > -1 || limits.get(statsCountHardLimit) > -1)
	checkBytes := bytesDiff != 0 && (limits.get(statsBytes) > -1 || limits.get(statsByteHardLimit) > -1)
	if !checkCount && !checkBytes {
		return 0
	}
	sn := m.nodeBefore(quotaStatPath(q))
	stats, err := parseStatsTrack(sn.data)
	if !sn.exists || err != nil {
		m.log.Warn("quota: stats node missing or unreadable", zap.String("path", quotaStatPath(q)), zap.Error(err))
		return 0
	}
	if checkCount && m.overQuota(q, "count", "CountLimit", stats.get(statsCount)+countDiff, limits.get(statsCount), limits.get(statsCountHardLimit)) {
		return encoding.ErrQuotaExceeded
	}
	if checkBytes && m.overQuota(q, "bytes", "ByteLimit", stats.get(statsBytes)+bytesDiff, limits.get(statsBytes), limits.get(statsByteHardLimit)) {
		return encoding.ErrQuotaExceeded
	}
	return 0
}

// overQuota logs a value past its limit (the hard one if set, else the soft one) with
// ZooKeeper's words ("current count", "softCountLimit"), and reports whether the hard limit
// refuses it.
func (m *multiState) overQuota(q, what, limitName string, value, soft, hard int64) bool {
	limit, kind := soft, "soft"
	if hard > -1 {
		limit, kind = hard, "hard"
	}
	if value <= limit {
		return false
	}
	m.log.Warn("Quota exceeded", zap.String("path", q), zap.Int64("current "+what, value), zap.Int64(kind+limitName, limit))
	return hard > -1
}

// updateQuotaStat is DataTree.updateQuotaStat: add to the count and bytes of quota q's stats
// node, if q is one.
func (m *multiState) updateQuotaStat(q string, bytesDiff, countDiff int64) {
	if q == "" {
		return
	}
	sn := m.node(quotaStatPath(q))
	stats, err := parseStatsTrack(sn.data)
	if !sn.exists || err != nil {
		m.log.Warn("quota: stats node missing or unreadable", zap.String("path", quotaStatPath(q)), zap.Error(err))
		return
	}
	stats[statsCount] = stats.get(statsCount) + countDiff
	stats[statsBytes] = stats.get(statsBytes) + bytesDiff
	m.setStats(sn, stats)
}

// setStats makes st the data of the stats node n, leaving its Stat but its dataLength.
func (m *multiState) setStats(n *mnode, st statsTrack) {
	n.data = []byte(st.String())
	n.stat.DataLength = int32(len(n.data))
	n.touched = true
	n.statsWrites++
}

// quotaCreated keeps the quotas for the node created at path with data (DataTree.createNode):
// a limits node makes a quota, a stats node is set to its quota's subtree, and the node counts
// in the deepest quota above it.
func (m *multiState) quotaCreated(path string, data []byte) {
	if q, ok := quotaOf(path, quotaLimitNode); ok {
		m.quotas = m.quotas.with(q)
		m.quotasChanged = true
	}
	if q, ok := quotaOf(path, quotaStatNode); ok {
		count, bytes := m.subtreeSize(q)
		m.setStats(m.node(path), statsTrack{statsCount: count, statsBytes: bytes})
	}
	m.updateQuotaStat(m.quotas.maxPrefix(path), int64(len(data)), 1)
}

// quotaDeleted keeps the quotas for the node at path deleted with data (DataTree.deleteNode).
func (m *multiState) quotaDeleted(path string, data []byte) {
	if q, ok := quotaOf(path, quotaLimitNode); ok {
		m.quotas = m.quotas.without(q)
		m.quotasChanged = true
	}
	m.updateQuotaStat(m.quotas.maxPrefix(path), -int64(len(data)), -1)
}

// subtreeSize is DataTree.getCounts at the overlay's state: the nodes at and below q, and their
// data bytes. The replica's subtree, corrected by the overlay's nodes in it; the commit guards
// the subtree (subtreeGuards), so that no write made elsewhere slips between.
func (m *multiState) subtreeSize(q string) (count, bytes int64) {
	if m.tree != nil {
		var st subtreeRead
		m.tree.read(func(v replicaView) { st = v.subtree(q) })
		m.subtrees = append(m.subtrees, st)
		count, bytes = st.count, st.bytes
	}
	for p, n := range m.nodes {
		if p != q && !strings.HasPrefix(p, q+"/") {
			continue
		}
		if n.read && n.keys.exists() {
			count--
			bytes -= int64(len(n.keys.dataNow()))
		}
		if n.exists {
			count++
			bytes += int64(len(n.data))
		}
	}
	return count, bytes
}

// quotaDeletes is what a transaction that deletes the nodes at paths outside the committer (an
// ended session's ephemerals, a reaped node) compares and writes to keep their quotas'
// statistics (DataTree.deleteNode), read from the replica at its revision. The compares fail
// if the replica had not seen a node, its stats node or the set of quota'd paths as they are:
// the caller tries again once the replica has caught up.
func (b *Store) quotaDeletes(paths []string) (cmps []clientv3.Cmp, ops []clientv3.Op) {
	if len(paths) == 0 {
		return nil, nil
	}
	b.tree.read(func(v replicaView) {
		t := v.r.t
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(b.keys.quota()), "<", v.r.rev+1))
		deltas := map[string]*[2]int64{} // quota'd path → count and bytes deleted
		for _, p := range paths {
			q := t.quotas.maxPrefix(p)
			if q == "" {
				continue
			}
			var mod int64 // 0, failing the compare, if the replica has not seen the node
			if rn := t.nodes[p]; rn != nil && rn.exists() {
				mod = rn.mod
				if deltas[q] == nil {
					deltas[q] = &[2]int64{}
				}
				deltas[q][0]++
				deltas[q][1] += int64(len(rn.dataNow()))
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(b.keys.data(p)), "=", mod))
		}
		for q, d := range deltas {
			sp := quotaStatPath(q)
			sn := t.nodes[sp]
			if sn == nil || !sn.exists() || slices.Contains(paths, sp) {
				b.log.Warn("quota: stats node missing", zap.String("path", sp))
				continue
			}
			st, err := parseStatsTrack(sn.dataNow())
			if err != nil {
				b.log.Warn("quota: stats node unreadable", zap.String("path", sp), zap.Error(err))
				continue
			}
			st[statsCount] = st.get(statsCount) - d[0]
			st[statsBytes] = st.get(statsBytes) - d[1]
			cmps = append(cmps,
				clientv3.Compare(clientv3.ModRevision(b.keys.data(sp)), "=", sn.mod),
				clientv3.Compare(clientv3.ModRevision(b.keys.metaPrefix(sp)), "<", v.r.rev+1).WithPrefix())
			ops = append(ops, clientv3.OpPut(b.keys.stats(sp), st.String(), clientv3.WithLease(clientv3.LeaseID(sn.lease))))
		}
	})
	return cmps, ops
}

// subtreeRead is a subtree as the replica counted it: the nodes at and below path and their
// data bytes, path's data key's CreateRevision (0: absent) and the depth of its deepest node.
type subtreeRead struct {
	path         string
	count, bytes int64
	created      int64
	deepest      int
}

// subtreeGuards are the compares that the subtree st has not changed since rev: its root's
// data key neither created, deleted nor put; no data key put at any depth of the subtree or
// one below its deepest (where a node must go before a deeper one can); no meta key put at
// the root or any depth above the deepest (a child's delete puts its parent's).
func (k keySchema) subtreeGuards(st subtreeRead, rev int64) []clientv3.Cmp {
	before := func(key string) clientv3.Cmp {
		return clientv3.Compare(clientv3.ModRevision(key), "<", rev+1).WithPrefix()
	}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(k.data(st.path)), "=", st.created),
		clientv3.Compare(clientv3.ModRevision(k.data(st.path)), "<", rev+1),
		before(k.metaPrefix(st.path)),
	}
	root := depth(st.path)
	for d := root + 1; d <= max(st.deepest, root)+1; d++ {
		cmps = append(cmps, before(k.descendantsAt("n/", st.path, d)))
		if d <= st.deepest {
			cmps = append(cmps, before(k.descendantsAt("m/", st.path, d)))
		}
	}
	return cmps
}

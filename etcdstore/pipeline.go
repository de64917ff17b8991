package etcdstore

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/zetcd"
)

// Pipelined commits (docs/design.md "Group commit"). While the fence guards the tree
// (Config.FenceGuards, fence.go), the committer sends a batch without waiting for the answers
// to the ones before it, up to Config.CommitDepth batches in flight, as ZooKeeper's
// PrepRequestProcessor checks requests against its outstanding changes while the earlier ones
// are being logged:
//
//   - a batch is checked on the replica plus the nodes the batches still in flight change, each
//     as etcd will hold it once that batch commits at the revision predicted for it (flight.after);
//   - each transaction puts the fence with a token of its own, and one sent behind another
//     compares the fence's value with its predecessor's token and the fence's revision with the
//     predecessor's predicted revision: etcd applies it only right after its predecessor, at the
//     revision its check assumed, with no other write to the tree between;
//   - answers are handled in the order the batches were sent: a batch that succeeded is applied
//     and answered as a batch of one-at-a-time commits is; one that failed its guard (its
//     predecessor failed, or committed elsewhere than predicted, or another writer came between)
//     is checked again and committed alone once every batch before it is answered, and so is
//     every batch after it, whose guards fail since the token they name was never put.
//
// A batch whose check depends on more than the nodes it names (a setACL, which changes the ACLs
// the watch feed delivers by; one that creates or deletes a quota's limits node or counts a
// subtree for a stats node, quota.go) is committed alone, with none in flight.

// flight is a batch sent to etcd whose answer the committer has not handled yet.
type flight struct {
	batch    []*pendingWrite
	outcomes []writeOutcome
	writes   []txnWrite
	journal  []journalChange // the journal writes holds, decoded
	// token is the fence value the batch puts; rev the revision it commits at if it commits
	// right after its predecessor (or the replica, for the first).
	token string
	rev   int64
	// after holds the nodes the batch changed as etcd holds them at rev.
	after map[string]*mnode
	// growth and puts are what the batch adds to the data (multiState.grow).
	growth, puts int64
	// alone: no batch may be sent while this one is in flight.
	alone  bool
	cancel context.CancelFunc
	done   chan struct{} // closed once resp or err is set
	resp   *clientv3.TxnResponse
	err    error
}

// defaultCommitDepth bounds the batches in flight when Config.CommitDepth is 0.
const defaultCommitDepth = 4

// pipelined reports whether the committer's next batch may be sent behind the ones in flight.
func (c *committer) pipelined(batch []*pendingWrite) bool {
	if c.b.commitDepth <= 1 || !c.b.fenceGuardsNow() || setsACL(batch[0]) {
		return false
	}
	for _, w := range batch {
		if w.retries > 1 {
			return false
		}
	}
	for _, f := range c.pipe {
		if f.alone {
			return false
		}
	}
	return true
}

// dispatch commits batch: sent behind the batches in flight when it may be, else alone once
// they are answered. A batch that must wait for them goes back to the front of the queue, so that
// the writes of a batch in flight that fails (complete) are checked again before it.
func (c *committer) dispatch(batch []*pendingWrite) {
	if c.pipelined(batch) {
		if f := c.checkFlight(batch); f != nil {
			c.pipe = append(c.pipe, f)
			return
		}
	}
	if len(c.pipe) == 0 {
		c.commit(batch, 0)
		return
	}
	c.requeue(batch)
	c.drain()
}

// requeue puts writes back at the front of the queue, in order.
func (c *committer) requeue(writes []*pendingWrite) {
	c.mu.Lock()
	c.queue = slices.Concat(writes, c.queue)
	c.mu.Unlock()
}

// drain handles the answers of every batch in flight.
func (c *committer) drain() {
	for len(c.pipe) > 0 {
		c.complete()
	}
}

// live returns the batches in flight that the replica at rev has not applied: those whose
// changes a check at rev must see.
func (c *committer) live(rev int64) []*flight {
	for i, f := range c.pipe {
		if f.rev > rev {
			return c.pipe[i:]
		}
	}
	return nil
}

// checkFlight checks batch on the replica plus the changes of the batches in flight, and sends
// it. nil when it cannot be sent so (an error reading the replica, a check that must run
// alone), and the batch is to be committed alone.
func (c *committer) checkFlight(batch []*pendingWrite) *flight {
	b := c.b
	label := "batch"
	if len(batch) == 1 {
		label = batch[0].opName
	}
	ctx, cancel := context.WithTimeout(zetcd.WithOpLabel(b.bgCtx, label), batchTimeout)
	floor := c.lastRev
	for _, w := range batch {
		floor = max(floor, w.floor)
	}
	m, err := b.readMultiState(ctx, readSet(batch, nil), floor)
	if err != nil {
		cancel()
		return nil
	}
	live := c.live(m.rev)
	overlay(m, live)
	outcomes, writes, journal := c.check(m, batch)
	alone := m.quotasChanged || len(m.subtrees) > 0
	if alone && len(live) > 0 {
		cancel()
		return nil
	}
	var prev *flight
	if len(live) > 0 {
		prev = live[len(live)-1]
	}
	c.tokens++
	f := &flight{batch: batch, outcomes: outcomes, journal: journal, token: strconv.FormatUint(b.process.id, 16) + "." + strconv.FormatUint(c.tokens, 16),
		rev: max(m.rev, c.lastRev) + 1, growth: m.growth, puts: m.puts, alone: alone, cancel: cancel, done: make(chan struct{})}
	if prev != nil {
		f.rev = prev.rev + 1
	}
	f.writes = withFence(writes, txnWrite{key: b.keys.fence(), value: f.token})
	var guards []clientv3.Cmp
	if prev == nil {
		guards = m.guards(true)
	} else {
		fence := b.keys.fence()
		guards = append(m.guardsWith(true, nil),
			clientv3.Compare(clientv3.Value(fence), "=", prev.token),
			clientv3.Compare(clientv3.ModRevision(fence), "=", prev.rev))
	}
	guards = append(guards, c.processGuards(m.rev)...)
	// Last: rebased changes m's nodes, which the guards pin as read.
	if f.after = m.rebased(f.writes, f.rev); f.after == nil {
		cancel()
		return nil
	}
	ops := txnOps(f.writes)
	go func() {
		f.resp, f.err = c.send(ctx, guards, ops)
		close(f.done)
	}()
	// The transaction's goroutine runs first, up to its proposal to etcd's raft: etcd then
	// receives the transactions in the order they were sent, unless another goroutine gets
	// the processor between (the guards make that safe, and costs the checks again).
	runtime.Gosched()
	return f
}

// overlay puts in m the nodes the batches in flight (live, in order) change, as etcd will hold
// them, over the replica's: for the nodes read, and for those the check looks up.
func overlay(m *multiState, live []*flight) {
	if len(live) == 0 {
		return
	}
	newest := func(p string) *mnode {
		for i := len(live) - 1; i >= 0; i-- {
			if n := live[i].after[p]; n != nil {
				c := *n
				return &c
			}
		}
		return nil
	}
	for p := range m.nodes {
		if n := newest(p); n != nil {
			m.nodes[p] = n
		}
	}
	replicaLookup := m.lookup
	m.lookup = func(p string) *mnode {
		if n := newest(p); n != nil {
			return n
		}
		if replicaLookup == nil {
			return nil
		}
		return replicaLookup(p)
	}
	for _, f := range live {
		if f.growth > 0 {
			m.room.grow -= min(f.growth, m.room.grow)
		}
		m.room.put -= min(f.puts, m.room.put)
	}
}

// withFence returns writes with the fence put as fence says, whether or not the check wrote
// it: every batch in flight puts its token, also a batch whose writes all failed.
func withFence(writes []txnWrite, fence txnWrite) []txnWrite {
	for i := range writes {
		if writes[i].key == fence.key {
			writes[i] = fence
			return writes
		}
	}
	return append(writes, fence)
}

// rebased returns the nodes the writes change, as etcd holds them once the writes commit at rev
// (the keys read, with the writes' puts and deletes, as replica.ownEvents makes their events),
// or nil when a node's keys do not decode. It changes the keys of m's nodes: m is done with.
func (m *multiState) rebased(writes []txnWrite, rev int64) map[string]*mnode {
	keys := make(map[string]*nodeKeys, len(m.nodes))
	for p, n := range m.nodes {
		if n.touched {
			keys[p] = &n.keys // n is m's: the check is done with it
		}
	}
	acls := &aclTable{} // the batch's own: the nodes of one ACL list decode it once
	for _, w := range writes {
		if w.del && w.prefix {
			path, _, _ := m.keys.pathOfMetaKey(w.key + "a")
			if k := keys[path]; k != nil {
				for i := range len(metaKeyNames) {
					k.deleteMeta(metaKeyNames[i])
				}
			}
			continue
		}
		path, name, ok := m.keys.pathOfNodeKey(w.key)
		k := keys[path]
		if !ok || k == nil {
			continue
		}
		var prev keyRevs
		if name == dataKeyName {
			prev = k.data
		} else {
			prev, _ = k.metaRevs(name)
		}
		switch {
		case w.del && name == dataKeyName:
			k.deleteData()
		case w.del:
			k.deleteMeta(name)
		default:
			// The keys keep slices of the value, which nothing changes (stringBytes).
			kv := mvccpb.KeyValue{Key: stringBytes(w.key), Value: stringBytes(w.value), Lease: w.lease, ModRevision: rev, CreateRevision: rev, Version: 1}
			if prev.mod != 0 {
				kv.CreateRevision, kv.Version = prev.create, prev.version+1
			}
			if name == dataKeyName {
				k.putData(&kv, acls)
			} else {
				k.putMeta(name, &kv, acls)
			}
		}
	}
	after := make(map[string]*mnode, len(keys))
	nodes := make([]mnode, len(keys)) // one allocation for the nodes
	i := 0
	for p, k := range keys {
		n := &nodes[i]
		i++
		if n.fromKeys(p, *k, int64(m.nodes[p].stat.NumChildren), m.tree.migrated) != nil {
			return nil
		}
		after[p] = n
	}
	return after
}

// complete handles the answer of the oldest batch in flight, waiting for it. A batch committed
// is applied and answered. When one failed, every batch after it was checked on its changes:
// their answers are awaited, those that committed all the same (checked without it) applied
// and answered, and the writes of those that failed their guards go back to the front of the
// queue, in order, to be checked again on a replica that has reached the revision they failed
// at; a write that fails so twice is committed alone (commitBatch).
func (c *committer) complete() {
	f := c.pipe[0]
	<-f.done
	clear(c.pipe[:1])
	c.pipe = c.pipe[1:]
	if f.committed() {
		c.applied(f)
		return
	}
	rest := c.pipe
	c.pipe = nil
	back := c.settleFailed(f, nil)
	for _, g := range rest {
		<-g.done
		if g.committed() {
			c.applied(g)
			continue
		}
		back = c.settleFailed(g, back)
	}
	if len(back) > 0 {
		c.requeued.Add(int64(len(back)))
		c.requeue(back)
	}
}

// committed reports whether etcd committed f (once answered).
func (f *flight) committed() bool { return f.err == nil && f.resp.Succeeded }

// applied applies and answers f, which etcd committed.
func (c *committer) applied(f *flight) {
	f.cancel()
	rev := f.resp.Header.Revision
	c.lastRev = max(c.lastRev, rev)
	c.b.applyOwn(rev, f.writes, f.journal)
	for i := range f.outcomes {
		f.outcomes[i].rev = rev
		if f.outcomes[i].failedAt < 0 {
			committedMulti(f.outcomes[i].results, rev)
		}
	}
	c.answer(f.batch, f.outcomes, nil)
}

// settleFailed handles f, which etcd did not commit: appends to back the writes of a batch
// that failed its guards, to be checked again; commits alone, or answers with the error, those
// of a batch etcd refused.
func (c *committer) settleFailed(f *flight, back []*pendingWrite) []*pendingWrite {
	f.cancel()
	switch {
	case f.err == nil:
		c.lastRev = max(c.lastRev, f.resp.Header.Revision)
		for _, w := range f.batch {
			w.retries++
		}
		return append(back, f.batch...)
	case len(f.batch) > 1 && (isLeaseGone(f.err) || errors.Is(f.err, errOverEtcdLimit)):
		for _, w := range f.batch {
			c.commit([]*pendingWrite{w}, 0)
		}
	default:
		c.answer(f.batch, nil, f.err)
	}
	return back
}

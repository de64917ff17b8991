package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// Group commit. Every create, delete, setData and multi of this process goes through one
// committer, which takes the writes waiting at one moment, from any sessions, and commits them
// as one etcd transaction:
//
//  1. The nodes all of them touch are read from the replica (the multi engine's overlay, multi.go)
//     once it has reached every write's floor and the last batch answered, with the changes of
//     the batches still in flight over it (pipeline.go).
//  2. The writes are checked in arrival order on that overlay, each numbered by its index in the
//     batch and seeing the effects of the earlier ones; a write that fails a check fails alone
//     (its changes are rolled back) and still consumes its zxid.
//  3. One Txn guarded by everything read writes the net change of the successful writes, and a
//     journal of their changes with their indexes, from which the watch feed fires each write's
//     events at its own zxid (zxid.go). A guard that fails means the replica was behind a write
//     made elsewhere: wait for it to reach the failed commit, and check the batch again. The
//     guards are two compares per znode read, or with fence guards (Config.FenceGuards) one
//     compare on the fence key that every write to the tree puts (keys.go, multiState.guards);
//     a batch that fails a fence is checked again with per-znode guards.
//  4. The committed batch is applied to the replica, and its watches fired, by the committer
//     itself (own.go), before the writes are answered, batch after batch in the order they were
//     sent.
//
// The committer never waits for more writes: a batch is whatever queued while the previous ones
// were sent, so one client alone pays nothing for it. A batch is bounded by etcd's limits
// on a transaction (maxBatchOps, maxBatchBytes); a batch that etcd refuses all the same (over an
// external etcd's limits, or naming a session lease that has ended) is committed again write by
// write, so that only the write at fault fails.

// pendingWrite is one write waiting for the committer: a session's ops (a single op is a multi
// of one), its floor (the session's lastRev when it was sent), and where its outcome goes.
type pendingWrite struct {
	s      *etcdSession
	opName string
	ops    []mop
	one    [1]mop // ops of a single op (singleWrite)
	floor  int64
	done   chan<- writeOutcome // capacity 1: the committer never blocks on it
	// retries counts the batches in flight it was in that failed their guards (pipeline.go).
	retries int
}

// answer sends w its outcome and counts it answered in its session's writes in flight, which
// submit counted it in.
func (w *pendingWrite) answer(o writeOutcome) {
	w.done <- o
	w.s.writes.done()
}

// writeOutcome is what became of a write: its results (or failedAt and the code of the op that
// failed), the revision and index of its zxid, or err if it could not be served.
type writeOutcome struct {
	results  []encoding.MultiResult
	failedAt int
	failed   encoding.ErrCode
	rev      int64
	index    uint16
	err      error
}

const (
	// maxBatchWrites bounds the writes of one batch, far below the zxid's index space.
	maxBatchWrites = 1024
	// batchTimeout bounds one batch's commit, retries included.
	batchTimeout = 30 * time.Second
)

// committer queues this process's writes and commits them in batches: the first in the
// goroutine of the write that found none running (lead), the next ones in a goroutine that runs
// only while writes are queued or batches are in flight (run), which sends a batch behind the
// ones in flight when it may (pipeline.go). mu protects queue and running.
type committer struct {
	b       *Store
	mu      sync.Mutex
	queue   []*pendingWrite
	running bool
	// queued wakes run, waiting for the answer of a batch in flight, when a write is queued.
	queued chan struct{}
	// The fields below belong to the goroutine committing. lastRev is the revision of the
	// newest batch committed: the next batch reads a replica that has applied it, or the
	// batches in flight over it. pipe holds the batches in flight, oldest first; tokens counts
	// the fence tokens handed out.
	lastRev int64
	pipe    []*flight
	tokens  uint64
	// inflight is the transactions being committed, for failStuck.
	inflight inflightTxn
	// requeued counts the writes checked again after their batch in flight failed its guards.
	requeued atomic.Int64
}

// inflightTxn is the committer's transactions in flight. Its methods may be called from any
// goroutine.
type inflightTxn struct {
	mu   sync.Mutex
	sent map[*sentTxn]struct{}
}

// sentTxn is one transaction in flight.
type sentTxn struct {
	since  time.Time               // when it was sent
	cancel context.CancelCauseFunc // fails it
}

// errStuckWrite is why failStuck fails a transaction.
var errStuckWrite = errors.New("etcd held the transaction while the member guard left a member out; its outcome is unknown")

// send records a transaction sent now, which cancel fails; done records its answer.
func (t *inflightTxn) send(cancel context.CancelCauseFunc) *sentTxn {
	s := &sentTxn{since: time.Now(), cancel: cancel}
	t.mu.Lock()
	if t.sent == nil {
		t.sent = map[*sentTxn]struct{}{}
	}
	t.sent[s] = struct{}{}
	t.mu.Unlock()
	return s
}

func (t *inflightTxn) done(s *sentTxn) {
	t.mu.Lock()
	delete(t.sent, s)
	t.mu.Unlock()
}

// failStuck fails the transactions in flight sent at least d ago, and says how long the oldest
// was held.
func (t *inflightTxn) failStuck(d time.Duration) (held time.Duration, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.sent {
		if h := time.Since(s.since); h >= d {
			s.cancel(errStuckWrite)
			held, failed = max(held, h), true
		}
	}
	return held, failed
}

// submit queues the session's write w and waits for its outcome (on the session's outcome
// channel, made on its first write). If ctx ends first, the write may still commit; its session
// is going away.
func (c *committer) submit(ctx context.Context, w *pendingWrite) writeOutcome {
	s := w.s
	if s.outcome == nil {
		s.outcome = make(chan writeOutcome, 1)
	}
	done := s.outcome
	w.done = done
	s.writes.add()
	c.mu.Lock()
	c.queue = append(c.queue, w)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if lead {
		c.lead()
	} else {
		select {
		case c.queued <- struct{}{}:
		default:
		}
	}
	select {
	case o := <-done:
		return o
	case <-ctx.Done():
		s.outcome = nil // the outcome may still come: a next write waits on a channel of its own
		return writeOutcome{err: ctx.Err()}
	}
}

// lead commits the first batch in the queue, in the goroutine of the write that found no
// batch running, which is in it: that write is answered with no switch to another goroutine
// and back. The batches queued meanwhile go on in a goroutine of their own (run).
func (c *committer) lead() {
	if batch := c.take(); batch != nil {
		c.commit(batch, 0)
	}
	c.mu.Lock()
	more := len(c.queue) > 0
	c.running = more
	c.mu.Unlock()
	if more {
		go c.run()
	}
}

// run commits batches until the queue is empty and no batch is in flight, handling each
// batch's answer as soon as it comes while no write is queued.
func (c *committer) run() {
	for {
		for len(c.pipe) > 0 && answered(c.pipe[0]) {
			c.complete()
		}
		if len(c.pipe) >= c.b.commitDepth {
			c.complete()
			continue
		}
		if batch := c.takeQueued(); batch != nil {
			c.dispatch(batch)
			continue
		}
		if len(c.pipe) == 0 {
			if c.idle() {
				return
			}
			continue
		}
		select {
		case <-c.pipe[0].done:
			c.complete()
		case <-c.queued:
		}
	}
}

// answered reports whether etcd has answered f.
func answered(f *flight) bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// idle reports, when nothing is queued, that the goroutine is done.
func (c *committer) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) > 0 {
		return false
	}
	c.running = false
	return true
}

// take removes the next batch from the queue (takeQueued). nil, and the goroutine is done,
// when nothing is queued.
func (c *committer) take() []*pendingWrite {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.running = false
		return nil
	}
	return c.takeLocked()
}

// takeQueued removes the next batch from the queue: as many writes as fit etcd's limits (at
// least one); nil when nothing is queued.
func (c *committer) takeQueued() []*pendingWrite {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	return c.takeLocked()
}

// takeLocked is takeQueued with mu held and something queued.
func (c *committer) takeLocked() []*pendingWrite {
	n, ops, bytes := 0, 0, 0
	for n < len(c.queue) && n < maxBatchWrites {
		wops, wbytes := batchCost(c.queue[n].ops)
		if n > 0 && (ops+wops > c.b.maxBatchOps || bytes+wbytes > maxBatchBytes || setsACL(c.queue[0]) || setsACL(c.queue[n])) {
			break
		}
		n, ops, bytes = n+1, ops+wops, bytes+wbytes
	}
	batch := make([]*pendingWrite, n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch
}

// setsACL reports whether w is a setACL, which is committed in a batch of its own: the watch
// feed decides the delivery of a batch's events on the ACLs from before the batch
// (Store.journalACLs), which a setACL in it would change. setACL is rare.
func setsACL(w *pendingWrite) bool { return len(w.ops) == 1 && w.ops[0].op == encoding.OpSetACL }

// maxBatchBytes bounds the data and paths of one batch below an external etcd's default
// --max-request-bytes (1.5 MiB); a single write may exceed it.
const maxBatchBytes = 1 << 20

// batchCost estimates the etcd operations (compares or writes: etcd bounds each list of a Txn
// by --max-txn-ops) and bytes a write adds to a batch: a node's two guards and up to five
// writes per op, plus its journal entry.
func batchCost(ops []mop) (txnOps, bytes int) {
	txnOps = 1
	for _, o := range ops {
		txnOps += 5
		bytes += 2*len(o.path) + len(o.data) + 64
	}
	return txnOps, bytes
}

// commit commits one batch, checked on a replica at floor or later, and answers each of its
// writes.
func (c *committer) commit(batch []*pendingWrite, floor int64) {
	b := c.b
	// The etcd round trips of a batch of one write count as that write's.
	label := "batch"
	if len(batch) == 1 {
		label = batch[0].opName
	}
	ctx, cancel := context.WithTimeout(zetcd.WithOpLabel(b.bgCtx, label), batchTimeout)
	defer cancel()
	outcomes, err := c.commitBatch(ctx, batch, floor)
	if err != nil && len(batch) > 1 && (isLeaseGone(err) || errors.Is(err, errOverEtcdLimit)) {
		// A write at fault (a create of an ephemeral whose session ended, a batch over an
		// external etcd's limits): each write alone, so that only that one fails.
		for _, w := range batch {
			c.commit([]*pendingWrite{w}, 0)
		}
		return
	}
	c.answer(batch, outcomes, err)
}

// answer answers the writes of a batch committed (outcomes) or not (err).
func (c *committer) answer(batch []*pendingWrite, outcomes []writeOutcome, err error) {
	c.b.metrics.ObserveWriteBatch(len(batch))
	for i, w := range batch {
		if err != nil {
			w.answer(writeOutcome{err: err})
			continue
		}
		w.answer(outcomes[i])
	}
}

// commitBatch checks the batch on the replica and commits it, again after a conflict.
func (c *committer) commitBatch(ctx context.Context, batch []*pendingWrite, floor int64) ([]writeOutcome, error) {
	b := c.b
	floor = max(floor, c.lastRev)
	for _, w := range batch {
		floor = max(floor, w.floor)
	}
	var unread []string // names guarded as absent that conflicted: read them next time
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		if attempt >= 3 {
			// Contention from other processes: let the writers ahead of us commit.
			time.Sleep(time.Duration(rand.IntN(1<<min(attempt, 10))) * 100 * time.Microsecond)
		}
		m, err := b.readMultiState(ctx, readSet(batch, unread), floor)
		if err != nil {
			return nil, err
		}
		outcomes, writes, journal := c.check(m, batch)
		fence := attempt == 0 && b.fenceGuardsNow()
		guards := m.guards(fence)
		if attempt == 0 {
			guards = append(guards, c.processGuards(m.rev)...)
		} else {
			// A take of any session from this process fails processGuards: a client that
			// resumes again and again must not fail the other sessions' writes too.
			guards = append(guards, c.ownerGuards(batch, outcomes)...)
		}
		r, err := c.send(ctx, guards, txnOps(writes))
		if err != nil {
			return nil, err
		}
		if !r.Succeeded {
			if fence {
				b.fenceConflict()
			}
			floor = max(floor, r.Header.Revision)
			unread = append(unread, m.unreadPaths()...)
			continue
		}
		c.lastRev = r.Header.Revision
		b.applyOwn(r.Header.Revision, writes, journal)
		for i := range outcomes {
			outcomes[i].rev = r.Header.Revision
			if outcomes[i].failedAt < 0 {
				committedMulti(outcomes[i].results, r.Header.Revision)
			}
		}
		return outcomes, nil
	}
	return nil, fmt.Errorf("commit of %d writes: too many conflicting retries", len(batch))
}

// ownerGuards are the compares that the sessions of the batch's writes (but those refused as
// moved or ended) are still owned by the connections that sent them: their session keys'
// ModRevisions. What processGuards ensure, with one compare per write; for a batch checked
// again after its processGuards failed, which a move of another session may have caused. A connection
// has one write in flight at most, so a batch names each one once.
func (c *committer) ownerGuards(batch []*pendingWrite, outcomes []writeOutcome) []clientv3.Cmp {
	cmps := make([]clientv3.Cmp, 0, len(batch))
	for i, w := range batch {
		if f := outcomes[i].failed; f == encoding.ErrSessionMoved || f == encoding.ErrSessionExpired {
			continue
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.b.keys.session(w.s.id)), "=", w.s.ownerRev))
	}
	return cmps
}

// processGuards are the compares that no session was taken from this process (resumed
// elsewhere, or ended as an orphan), nor lost to etcd's expiry of its lease, since rev, the
// revision the batch was checked at:
//
//   - its taken key (keys.go) is still the one it put, not put since. A session that moved while
//     its write was on the way to etcd fails the transaction, and the check that follows, on a
//     replica that has seen the move (etcdSession.keyCode), refuses the write; else the write
//     would land after the writes the session made since, where it moved, as ZooKeeper's leader
//     never lets a write of the server a session left.
//   - its process key exists and the replica had seen it put. etcd expires a session's lease
//     (its key deleted with no transaction of zetcd's) only after this process has failed to
//     refresh it for the session's timeout and more, longer than the process key's TTL: the
//     process key went first. A batch checked before the process key was put again, so before
//     those deletions, fails, and the check that follows refuses the writes of the sessions that
//     ended (SessionExpired), as ZooKeeper's leader refuses a request of a session it expired.
//
// Two compares per transaction, whatever its size, once the feed has shown the taken key's
// last put and the process key's creation at or before rev: the taken key's ModRevision is
// the one the feed last showed, which no put or delete since leaves, and the process key's
// CreateRevision is the one its last put made. Each implies its pair above; a put the feed
// has not shown yet fails it, and the batch is checked again as after a take. Else four, the
// pairs themselves. A move fails the batches of the process it left once, each checked again
// and guarded by ownerGuards. A session this process ends itself needs no guard: its end
// waits for its writes on the way (writesInFlight).
func (c *committer) processGuards(rev int64) []clientv3.Cmp {
	p := &c.b.process
	cmps := make([]clientv3.Cmp, 0, 4)
	if mod := p.takenMod.Load(); mod != 0 && mod <= rev {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p.takenKey), "=", mod))
	} else {
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(p.takenKey), "=", p.takenRev.Load()),
			clientv3.Compare(clientv3.ModRevision(p.takenKey), "<", rev+1))
	}
	if created := p.processRev.Load(); created != 0 && created <= rev {
		return append(cmps, clientv3.Compare(clientv3.CreateRevision(p.processKey), "=", created))
	}
	return append(cmps,
		clientv3.Compare(clientv3.CreateRevision(p.processKey), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(p.processKey), "<", rev+1))
}

// send commits one transaction of the batch; failStuck may fail it.
func (c *committer) send(ctx context.Context, guards []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s := c.inflight.send(cancel)
	sent := time.Now()
	r, err := c.b.kv.Txn(ctx).If(guards...).Then(ops...).Commit()
	c.inflight.done(s)
	c.b.metrics.ObserveBatchCommit(time.Since(sent))
	if err != nil && errors.Is(context.Cause(ctx), errStuckWrite) {
		return nil, fmt.Errorf("%w (%w)", errStuckWrite, err)
	}
	return r, err
}

// check runs the batch's writes in order on the overlay m: each write's outcome (but its
// revision), what the commit writes, and the journal it writes (nil: none), which the
// committer fires its own revision by (applyOwn). The write of a session that has moved to another
// connection, or ended, fails first (etcdSession.keyCode), as ZooKeeper checks a request's
// session and its owner before the request.
func (c *committer) check(m *multiState, batch []*pendingWrite) ([]writeOutcome, []txnWrite, []journalChange) {
	b := c.b
	m.providers = b.providers()
	now := b.nowMs()
	outcomes := make([]writeOutcome, len(batch))
	// One write of one op needs no journal: the feed fires its key events, at index 0.
	journaled := len(batch) > 1 || len(batch[0].ops) > 1
	var journal []journalChange
	if journaled {
		journal = make([]journalChange, 0, len(batch))
	}
	for i, w := range batch {
		m.index, m.auth = uint16(i), w.s.auth
		if code := w.s.keyCode(); code != 0 {
			outcomes[i] = writeOutcome{results: errorResults(len(w.ops), 0, code), failedAt: 0, failed: code, index: m.index}
			continue
		}
		m.begin()
		results, failedAt, failed := m.simulate(w.ops, w.s.id, now)
		if failedAt >= 0 {
			m.rollback()
			if failed == encoding.ErrQuotaExceeded {
				b.space.refusing()
			}
			outcomes[i] = writeOutcome{results: errorResults(len(w.ops), failedAt, failed), failedAt: failedAt, failed: failed, index: m.index}
			continue
		}
		outcomes[i] = writeOutcome{results: results, failedAt: -1, index: m.index}
		if journaled {
			journal = appendJournal(journal, w.ops, results, m.index, w.s.auth, m.providers)
		}
	}
	writes := m.writes()
	if len(writes) > 0 {
		writes = append(writes, b.fenceWrite())
	}
	if m.quotasChanged {
		writes = append(writes, txnWrite{key: b.keys.quota()})
	}
	if len(journal) > 0 {
		writes = append(writes, txnWrite{key: b.keys.journal(), value: encodeJournal(journal)})
	}
	if len(writes) == 0 || len(batch) > 1 {
		// The error key's value is the index of the batch's last write, which makes the zxid
		// of the state at its revision (replica.stateZxid); a batch of failed writes (or
		// checks) writes nothing else, and consumes its zxids all the same.
		writes = append(writes, txnWrite{key: b.keys.errorKey(), value: encodeIndexValue(uint16(len(batch) - 1))})
	}
	return outcomes, writes, journal
}

// FailStuckWrites fails this process's etcd transaction in flight if it was sent at least d
// ago: its writes are answered as after a lost connection to etcd, their outcome unknown. The
// member guard calls it as it leaves a member out (memberguard.Guard.OnLeave, with d its
// Silence): a transaction that another member holds for the one left out (a follower forwards
// writes to its leader) would otherwise wait for etcd's own request timeout, and every write of
// the process behind it. A transaction in flight for a Silence while another member answers the
// guard's reads is held for the member left out; on a slow but live etcd the guard leaves no
// member out.
func (b *Store) FailStuckWrites(d time.Duration) {
	if held, ok := b.commits.inflight.failStuck(d); ok {
		b.log.Warn("failed the etcd transaction in flight: an etcd member was left out while etcd held it",
			zap.Duration("held", held.Round(time.Millisecond)))
	}
}

// maxConflictRetries is the one retry policy of the store's writes: how often one request reads
// again and commits again when its guarded transaction keeps failing because other writers
// changed what it had read (a node's ACL, a parent's sequence counter, a multi's read set, a
// session's ephemerals). Each retry means another writer succeeded, so the bound is reached
// only under a livelock; the request then fails like an etcd error (the connection closes, the
// session survives, the client retries).
const maxConflictRetries = 100

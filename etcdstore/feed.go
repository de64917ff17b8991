package etcdstore

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/zetcd"
)

// Watches on etcd: ONE etcd watch per process, on the whole prefix, feeds the in-memory
// watchRegistry (watch.go) in revision order. Data-key events become znode changes; every other
// key under the prefix (ACL, child-create/delete, session and error keys) only moves progress,
// so that progress reaches every zxid zetcd hands out. Writes to etcd outside the prefix (a
// shared cluster) are covered by asking etcd for a progress notification when a wait stalls.

// progressRequestDelay is how long AwaitEvents waits for the feed before asking etcd for a
// progress notification.
const progressRequestDelay = 5 * time.Millisecond

const (
	// feedHeartbeat: a feed that has heard nothing from etcd for this long asks for a progress
	// notification, which etcd answers even when nothing changed (once the watch's start
	// revision exists: see followWatch).
	feedHeartbeat = time.Second
	// feedStall: a feed that has heard nothing for this long, its heartbeat included, watches
	// again. Its stream may be on a member that stopped answering (frozen, cut off from the
	// client), where it would wait until the client's keepalive gives the member up; a new
	// watch may be balanced onto another member.
	feedStall = 3 * time.Second
)

// runWatchFeed owns the etcd watch. It restarts the watch after errors and stalls, resuming
// after the last revision it fired; if etcd compacted that history away, it resynchronises
// every registered watch from etcd's current state (catch-up) and carries on from there. It
// never stalls silently and never drops an event without that resync.
func (b *Store) runWatchFeed(rev int64) {
	next := rev + 1
	stallWarned := false // a stall is a warning once, until the feed hears etcd again
	for b.bgCtx.Err() == nil {
		ctx, cancel := context.WithCancel(feedContext(b.bgCtx))
		wch := b.watcher.Watch(ctx, b.keys.prefix, clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithProgressNotify())
		var heard bool
		var quiet time.Duration
		next, heard, quiet = b.followWatch(ctx, wch, next)
		if heard {
			stallWarned = false
		}
		if quiet > 0 && !stallWarned {
			stallWarned = true
			b.log.Warn("watch feed heard nothing from etcd, not even a progress notification; watching again",
				zap.Duration("quiet", quiet), zap.Int64("from", next))
		}
		cancel()
		select {
		case <-b.bgCtx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// followWatch applies wch's responses until the watch ends, fails or stalls (feedStall). It
// returns the revision to watch from next, whether it heard anything from etcd, and, if it
// stalled, for how long it heard nothing.
//
// A quiet feed asks etcd for a progress notification after feedHeartbeat and, if that goes
// unanswered, for etcd's current revision after another: etcd answers a progress request only
// once the watch's start revision exists, so a watch opened or resumed (by the etcd client,
// on another member) past etcd's newest revision hears nothing until the next write, however
// current it is. A current revision below next tells the feed it has missed nothing.
func (b *Store) followWatch(ctx context.Context, wch clientv3.WatchChan, next int64) (_ int64, heard bool, stalled time.Duration) {
	last, asked := time.Now(), 0 // asked: progress requested (1), then the revision read (2)
	current := make(chan struct{}, 1)
	t := time.NewTicker(feedHeartbeat / 2)
	defer t.Stop()
	hear := func() {
		heard, asked = true, 0
		last = time.Now()
		b.feedHeard.Store(last.UnixNano())
		b.readOnly.storeHeard()
	}
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				return next, heard, 0
			}
			var more bool
			next, more = b.feedResponse(resp, next)
			b.feedNext.Store(next)
			if !more {
				return next, true, 0
			}
			hear() // after applying: a long reload is not a silence of etcd's
		case <-current:
			hear()
		case now := <-t.C:
			switch quiet := now.Sub(last); {
			case quiet >= feedStall:
				return next, heard, quiet
			case quiet >= 2*feedHeartbeat && asked == 1:
				asked = 2
				go b.checkNothingNew(ctx, next, current)
			case quiet >= feedHeartbeat && asked == 0:
				// In a goroutine: the request waits for the client's stream, which a member
				// that stopped answering may hold; ctx ends it when the watch is given up.
				asked = 1
				go b.requestProgress(ctx)
			}
		case <-b.bgCtx.Done():
			return next, heard, 0
		}
	}
}

// checkNothingNew reads etcd's current revision, and signals current if it is below next: the
// feed, which has applied everything before next, is current as of the read.
func (b *Store) checkNothingNew(ctx context.Context, next int64, current chan<- struct{}) {
	ctx, cancel := context.WithTimeout(zetcd.WithOpLabel(ctx, zetcd.OpLabelOther), feedStall-2*feedHeartbeat)
	defer cancel()
	if rev, err := b.currentRevision(ctx); err == nil && rev < next {
		select {
		case current <- struct{}{}:
		default:
		}
	}
}

// feedResponse applies one watch response and returns the revision to watch from next, and
// false if the watch must be opened again (an error, or a resync after lost history).
func (b *Store) feedResponse(resp clientv3.WatchResponse, next int64) (int64, bool) {
	if resp.CompactRevision != 0 {
		b.log.Warn("watch feed fell behind etcd compaction; resynchronising watches",
			zap.Int64("from", next), zap.Int64("compacted", resp.CompactRevision))
		if cur, err := b.resyncWatches(); err == nil {
			next = cur + 1
		}
		return next, false
	}
	if err := resp.Err(); err != nil {
		if b.bgCtx.Err() == nil {
			b.log.Warn("watch feed interrupted; restarting", zap.Int64("from", next), zap.Error(err))
		}
		return next, false
	}
	if resp.IsProgressNotify() {
		b.applyMu.Lock()
		b.tree.advance(resp.Header.Revision)
		b.watches.Advance(b.tree.stateZxid(resp.Header.Revision))
		b.applyMu.Unlock()
		return max(next, resp.Header.Revision+1), true
	}
	if !b.applyEvents(resp.Events) {
		if cur, err := b.resyncWatches(); err == nil {
			next = cur + 1
		}
		return next, false
	}
	return max(next, resp.Events[len(resp.Events)-1].Kv.ModRevision+1), true
}

// feedContext is ctx with what the feed's watch is opened with: WithRequireLeader, so that a
// member cut off from its cluster's leader ends the watch and the feed moves to another.
func feedContext(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// requestProgress asks etcd for a progress notification on the feed's watch. The etcd client
// sends it on the gRPC stream that ctx's metadata names, so ctx must carry the feed's
// (feedContext): with other metadata the client opens a stream with no watch on it, and the
// answer reaches nobody.
func (b *Store) requestProgress(ctx context.Context) error {
	return b.watcher.RequestProgress(feedContext(ctx))
}

// applyEvents applies a watch response's events to the replica and fires their watches,
// revision by revision (etcd sends all events of one revision together); a revision the
// committer applied already is checked instead (own.go). It reports false if that check failed.
func (b *Store) applyEvents(evs []*clientv3.Event) bool {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	for len(evs) > 0 {
		r := evs[0].Kv.ModRevision
		n := 1
		for n < len(evs) && evs[n].Kv.ModRevision == r {
			n++
		}
		b.fenceWatch(r, evs[:n])
		if r <= b.tree.revision() {
			if !b.checkOwn(r, evs[:n]) {
				return false
			}
		} else {
			b.observeSessionKeys(evs[:n]) // before the replica shows r: committer.check
			before := b.tree.apply(r, evs[:n])
			b.fireRevision(evs[:n], before, nil)
			b.watches.Advance(b.tree.stateZxid(r))
		}
		evs = evs[n:]
	}
	return true
}

// fireRevision fires the znode changes of one revision: the multi journal when the revision has
// one (its per-op changes, in op order), else the events on data keys.
//
// Each change carries the ACLs that decide whether its events may be delivered (watchacl.go): from
// the replica, which has applied the revision, and before, the ACLs the revision replaced.
func (b *Store) fireRevision(evs []*clientv3.Event, before aclsBefore, own []journalChange) {
	b.observeProcessKeys(evs)
	journal := b.keys.journal()
	for _, ev := range evs {
		if ev.Type == mvccpb.PUT && string(ev.Kv.Key) == journal {
			changes, err := journalChanges(own, ev.Kv.Value, ev.Kv.ModRevision)
			if err == nil {
				b.journalACLs(changes, before)
				for _, c := range changes {
					b.watches.Fire(c)
				}
				return
			}
			b.log.Error("watch feed: undecodable multi journal; firing key events instead",
				zap.Int64("revision", ev.Kv.ModRevision), zap.Error(err))
		}
	}
	var rs []aclResolver
	for _, ev := range evs {
		if c, ok := b.changeOf(ev); ok {
			if rs == nil {
				rs = b.aclResolvers(len(evs))
			}
			b.watches.Fire(keyEventACLs(c, before, &rs[0]))
			rs = rs[1:]
		}
	}
}

// journalChanges returns the changes of the journal value v written in revision rev, with their
// zxids: own's, the journal as the committer made it, if it did, else decoded from v.
func journalChanges(own []journalChange, v []byte, rev int64) ([]watch.Change, error) {
	if own == nil {
		return decodeJournal(v, rev)
	}
	changes := make([]watch.Change, len(own))
	for i, c := range own {
		changes[i] = c.Change
		changes[i].Zxid = zxidOf(rev, int(c.index))
		if c.Kind != watch.Created {
			changes[i].CreatedACL = nil
		}
	}
	return changes, nil
}

// changeOf turns an etcd event on a data key into a znode change.
func (b *Store) changeOf(ev *clientv3.Event) (watch.Change, bool) {
	path, ok := b.keys.pathOfDataKey(string(ev.Kv.Key))
	if !ok {
		return watch.Change{}, false
	}
	// A revision without a journal holds one write: index 0.
	c := watch.Change{Path: path, Zxid: zxidOf(ev.Kv.ModRevision, 0)}
	switch {
	case ev.Type == mvccpb.DELETE:
		c.Kind = watch.Deleted
	case ev.Kv.CreateRevision == ev.Kv.ModRevision:
		c.Kind = watch.Created
	default:
		c.Kind = watch.DataChanged
	}
	return c, true
}

// resyncWatches recovers from lost history: every registered watch is checked against etcd's
// current state as setWatches does (events carry zxid -1), then the feed resumes from there.
func (b *Store) resyncWatches() (int64, error) {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	ctx, cancel := context.WithTimeout(b.bgCtx, 30*time.Second)
	defer cancel()
	cur, err := b.currentRevision(ctx)
	if err != nil {
		b.log.Error("resync watches: read current revision", zap.Error(err))
		return 0, err
	}
	if err := b.tree.load(ctx, b.kv, cur); err != nil {
		b.log.Error("resync watches: reload the tree", zap.Error(err))
		return 0, err
	}
	if err := b.observeSessionsAt(ctx, cur); err != nil {
		b.log.Error("resync watches: read the session keys", zap.Error(err))
		return 0, err
	}
	if err := b.observeTakenKeyAt(ctx, cur); err != nil {
		b.log.Error("resync watches: read the taken key", zap.Error(err))
		return 0, err
	}
	b.own.forget() // the feed resumes after cur
	at := b.tree.stateZxid(cur)
	b.watches.ResetHistory(at)
	// The replica is at cur: applyMu keeps the feed and the committer from moving it.
	states, _ := b.tree.watchedStates(b.watches.WatchedPaths(at))
	b.persistentWatchesLost(b.watches.CatchUpArmed(states, at))
	b.watches.Advance(at)
	return cur, nil
}

// persistentWatchesLost closes the connections of the watchers whose persistent watches missed
// changes no catch-up can tell (Registry.CatchUpArmed): their clients see a disconnection, as a
// ZooKeeper follower's do when it falls behind its leader, and resume the session (here or
// elsewhere) and read again what they watch.
func (b *Store) persistentWatchesLost(lost []*watch.Watcher) {
	if len(lost) == 0 {
		return
	}
	b.log.Warn("watch feed: persistent watches missed changes etcd compacted away; closing their connections so that their clients resume",
		zap.Int("connections", len(lost)))
	isLost := map[*watch.Watcher]bool{}
	for _, w := range lost {
		isLost[w] = true
	}
	b.local.mu.Lock()
	defer b.local.mu.Unlock()
	for _, objs := range b.local.m {
		for _, s := range objs {
			if isLost[s.watcher] {
				s.gone.close(fmt.Errorf("session %s: its persistent watches missed changes etcd compacted before the watch feed read them: %w", s.id, zetcd.ErrNotServing))
			}
		}
	}
}

// currentRevision reads etcd's newest revision. A watch armed there fires for no change that
// any client was answered about before the request that set it, wherever that change was made,
// as a watch ZooKeeper sets now; the feed's own progress may still lag behind such changes.
func (b *Store) currentRevision(ctx context.Context) (int64, error) {
	r, err := b.kv.Get(ctx, b.keys.errorKey(), clientv3.WithKeysOnly(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return r.Header.Revision, nil
}

// catchUp checks registrations against the tree's state, as of floor at least: each either
// fires now (event zxid eventZxid; -1 for setWatches) or is (re-)armed at the revision read,
// with history replay from there.
func (b *Store) catchUp(ctx context.Context, regs []watch.Registration, eventZxid encoding.Zxid, floor int64) error {
	if len(regs) == 0 {
		return nil
	}
	if err := b.awaitFloor(ctx, floor); err != nil {
		return err
	}
	states, rev := b.tree.watchedStates(watchedPaths(regs))
	return b.watches.Settle(regs, states, eventZxid, b.tree.stateZxid(rev))
}

// watchedPaths lists the paths of regs, each once.
func watchedPaths(regs []watch.Registration) []string {
	seen := map[string]bool{}
	var paths []string
	for _, r := range regs {
		if !seen[r.Path] {
			seen[r.Path] = true
			paths = append(paths, r.Path)
		}
	}
	return paths
}

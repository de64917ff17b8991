package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

// etcdSession is one session served by this process. Its id is its etcd lease id.
//
// Handler methods run on the session's executor goroutine only (Handler contract); Detach may be
// called from any goroutine, and more than once.
type etcdSession struct {
	b       *Store
	id      encoding.SessionID
	passwd  []byte
	timeout time.Duration
	// ownerRev is the session key's ModRevision when this connection took the session; a
	// different ModRevision means another connection has resumed it since.
	ownerRev int64
	// keyState is set by the watch feed, before the replica shows the revision, once the
	// session key is rewritten by a newer owner (keyMoved) or deleted (keyGone): the committer
	// then refuses the session's writes here, SessionMoved as ZooKeeper's leader refuses those
	// of the server a session left, or SessionExpired.
	keyState atomic.Int32
	// lastRev is the newest revision this session has been answered with, and lastZxid the
	// newest zxid (zxid.go); executor only.
	lastRev  int64
	lastZxid encoding.Zxid
	// outcome receives the outcome of the session's write from the committer (executor only;
	// capacity 1, made once: a session has one write in flight at most). nil after a write
	// was abandoned, whose outcome may still arrive there.
	outcome chan writeOutcome
	// writes counts the session's writes the committer has not answered, abandoned ones too:
	// the session's end waits for them (end, Close).
	writes writesInFlight
	// watcher holds this connection's watches; released by Detach.
	watcher *watch.Watcher
	// remote is the client's address, its "ip" identity (whoAmI); set by Connect.
	remote net.Addr
	// readOnly marks a read-only session (readonly.go), which never reaches etcd.
	readOnly bool
	// auth holds the connection's identities (auth.go); shared with watcher.
	auth *znode.Identities

	detached sync.Once // Detach's work

	// gone is closed (by markGone) when the watch feed sees the session key deleted (expired
	// in etcd, closed elsewhere) or rewritten by a newer owner (resumed elsewhere).
	gone goneLatch
	// ending is set when this connection ends the session itself (end): the session key's
	// deletion is then no news.
	ending atomic.Bool
}

// localSessions tracks the Session objects this process serves, by id, so that the watch feed
// can tell them their session ended or moved elsewhere. mu guards m. An id has one object but
// for the moment a resumed session's old connection takes to let go, so a slice (no map per id).
type localSessions struct {
	mu sync.Mutex
	m  map[encoding.SessionID][]*etcdSession
}

func (t *localSessions) add(s *etcdSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[encoding.SessionID][]*etcdSession{}
	}
	if !slices.Contains(t.m[s.id], s) {
		t.m[s.id] = append(t.m[s.id], s)
	}
}

func (t *localSessions) remove(s *etcdSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	objs := t.m[s.id]
	i := slices.Index(objs, s)
	if i < 0 {
		return
	}
	objs = slices.Delete(objs, i, i+1)
	if len(objs) == 0 {
		delete(t.m, s.id)
	} else {
		t.m[s.id] = objs
	}
}

// observeSessionKeys marks gone every local Session object whose session key one of evs
// deletes, or rewrites at a revision after the object took the session (a resume elsewhere),
// and marks the latter moved. The feed calls it before the replica shows the events' revision,
// so a write checked on a replica at that revision sees the move.
func (b *Store) observeSessionKeys(evs []*clientv3.Event) {
	for _, ev := range evs {
		id, ok := b.keys.sessionOfKey(string(ev.Kv.Key))
		if !ok {
			continue
		}
		modRev := ev.Kv.ModRevision
		if ev.Type == mvccpb.DELETE {
			modRev = 0
		}
		b.sessionKeyAt(id, modRev, ev.Kv.ModRevision)
	}
}

// The states of a session's key as a connection that took it sees it (etcdSession.keyState).
const (
	keyOwned int32 = iota
	keyMoved       // rewritten by a newer owner
	keyGone        // deleted: the session ended
)

// sessionKeyAt records that session id's key had ModRevision modRev at revision rev (0: deleted)
// in every local Session object of id taken by then, and marks gone those it ended or moved
// elsewhere. An object taken after rev is not told about it.
func (b *Store) sessionKeyAt(id encoding.SessionID, modRev, rev int64) {
	b.local.mu.Lock()
	defer b.local.mu.Unlock()
	for _, s := range b.local.m[id] {
		switch {
		case s.ownerRev > rev:
			continue
		case modRev == 0:
			s.keyState.Store(keyGone)
		case modRev > s.ownerRev:
			s.keyState.Store(keyMoved)
		default:
			continue
		}
		if !s.ending.Load() {
			s.markGone()
		}
	}
}

// observeSessionsAt does what observeSessionKeys does for the session keys' events up to rev,
// from etcd's state at rev: after a reload of the replica, which skips the events it missed.
func (b *Store) observeSessionsAt(ctx context.Context, rev int64) error {
	r, err := b.kv.Get(ctx, b.keys.sessionKeysPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
	if err != nil {
		return err
	}
	modRevs := map[encoding.SessionID]int64{}
	for _, kv := range r.Kvs {
		if id, ok := b.keys.sessionOfKey(string(kv.Key)); ok {
			modRevs[id] = kv.ModRevision
		}
	}
	b.local.mu.Lock()
	ids := slices.Collect(maps.Keys(b.local.m))
	b.local.mu.Unlock()
	for _, id := range ids {
		b.sessionKeyAt(id, modRevs[id], rev)
	}
	return nil
}

func (s *etcdSession) markGone() { s.gone.close(nil) }

// leaseLapsed closes the connections of the local sessions on lease id, which etcd has not
// confirmed alive within its serving window (keepalive.go): cut off from etcd, this process
// can no longer vouch for them. The sessions stay resumable, here or elsewhere.
func (b *Store) leaseLapsed(id clientv3.LeaseID, since time.Duration) {
	err := fmt.Errorf("session %s: etcd has not confirmed its lease for %v: %w", encoding.SessionID(id), since.Round(time.Millisecond), zetcd.ErrNotServing)
	b.local.mu.Lock()
	defer b.local.mu.Unlock()
	for _, s := range b.local.m[encoding.SessionID(id)] {
		s.gone.close(err)
	}
}

func (s *etcdSession) Done() <-chan struct{} { return s.gone.done() }

// Err is what closed Done: nil for a session that ended or moved, ErrNotServing (wrapped) for one
// whose lease lapsed.
func (s *etcdSession) Err() error { return s.gone.err() }

// AfterDone calls f in a goroutine of its own once Done is closed, with no goroutine waiting.
func (s *etcdSession) AfterDone(f func()) (stop func() bool) { return s.gone.after(f) }

// goneLatch is a Session's Done: a latch closed once, whose channel is made only if someone
// asks for it, and which calls the functions registered with after (each in a goroutine of its
// own) when it closes. It is what context.WithCancel plus context.AfterFunc would be, without
// their per-session map of children: the server registers one function per connection.
type goneLatch struct {
	mu         sync.Mutex
	closed     bool
	cause      error         // what close was given; read by err
	ch         chan struct{} // made by done, closed by close
	registered []*func()     // registered by after and not yet stopped
}

// closedChan is done's answer once the latch is closed and no channel was made before.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (l *goneLatch) done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		if l.closed {
			return closedChan
		}
		l.ch = make(chan struct{})
	}
	return l.ch
}

// close closes the latch with cause; a latch closes once, and keeps its first cause.
func (l *goneLatch) close(cause error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed, l.cause = true, cause
	if l.ch != nil {
		close(l.ch)
	}
	fs := l.registered
	l.registered = nil
	l.mu.Unlock()
	for _, f := range fs {
		go (*f)()
	}
}

func (l *goneLatch) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// after registers f, or starts it at once if the latch is closed; stop unregisters it and
// reports whether f had not been started.
func (l *goneLatch) after(f func()) (stop func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		go f()
		return func() bool { return false }
	}
	p := &f
	l.registered = append(l.registered, p)
	return func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		i := slices.Index(l.registered, p)
		if i < 0 {
			return false
		}
		l.registered = slices.Delete(l.registered, i, i+1)
		return true
	}
}

// LastZxid is the newest revision this process knows committed (newestZxid), as far as the
// Session contract allows: while this connection holds a watch, only the watch feed's
// progress, since the feed may not yet have handed over the watch's events of a revision
// answered to some session a moment ago (AwaitEvents waits for them; LastZxid may not). Like
// a ZooKeeper follower's last processed zxid, it can lag writes made through other zetcd
// processes. Reads reflect it: they wait for the replica to reach the newest answer
// (readFloor), and the feed applies a revision before it counts it as progress.
func (s *etcdSession) LastZxid() encoding.Zxid {
	if s.b.watches.Watching(s.watcher) {
		return s.b.watches.ProgressZxid()
	}
	return s.b.newestZxid()
}

// newestZxid is the newest revision this process knows committed without a round trip: the
// watch feed's progress, or the newest answer given to any of its sessions if that is newer
// (the feed applies a revision a moment after etcd acknowledges it).
func (b *Store) newestZxid() encoding.Zxid {
	return max(b.watches.ProgressZxid(), encoding.Zxid(b.newestAnswer.Load()))
}

// RefuseWrite consumes a revision through the error key, as ZooKeeper logs an error txn for
// a write it refused while decoding it.
func (s *etcdSession) RefuseWrite(ctx context.Context, op encoding.Op) (encoding.Zxid, error) {
	return s.fail(ctx, op.String(), "", encoding.ErrMarshallingError)
}

var _ zetcd.Session = (*etcdSession)(nil)

func (s *etcdSession) ID() encoding.SessionID { return s.id }
func (s *etcdSession) Password() []byte       { return s.passwd }
func (s *etcdSession) Timeout() time.Duration { return s.timeout }

// Detach lets the connection go; the session lives on in etcd until it expires or is resumed.
// A write the connection gave up on may still wait in the committer: the object stays among
// the local ones, where the feed marks it moved or gone (observeSessionKeys), until its writes
// are answered, so that the committer refuses such a write if the session was resumed or ended
// meanwhile, as ZooKeeper's leader refuses a request from the server a session left.
func (s *etcdSession) Detach() {
	s.detached.Do(func() {
		s.b.watches.CloseWatcher(s.watcher)
		s.b.keeper.remove(clientv3.LeaseID(s.id))
		s.writes.afterSettled(s.b.bgCtx, func() { s.b.local.remove(s) })
	})
}

// Close ends the session at its client's request, as end does, but keeps the session's watcher
// until the events of the close's deletions are handed over (to the connection, which queues
// them before the reply): ZooKeeper fires the watches its closeSession triggers, the closing
// session's own among them (a watch on one of its ephemerals), before it answers.
func (s *etcdSession) Close(ctx context.Context) (encoding.Zxid, error) {
	if err := s.writes.wait(ctx); err != nil {
		return 0, fmt.Errorf("session %s: close: wait for its write in flight: %w", s.id, err)
	}
	s.ending.Store(true)
	zxid, _, err := s.b.endSession(ctx, s.id, s.ownerRev, s.b.process.id)
	if err == nil {
		if werr := s.AwaitEvents(ctx, zxid); werr != nil {
			s.b.log.Warn("closeSession answered without waiting for its watch events",
				zap.Error(fmt.Errorf("session %s: await events <= %v: %w", s.id, zxid, werr)))
		}
	}
	s.Detach()
	return zxid, err
}

func (s *etcdSession) Expire(ctx context.Context) error {
	_, owned, err := s.end(ctx)
	if err == nil && !owned {
		s.b.log.Debug("session resumed elsewhere; not expiring it here", zap.String("session", s.id.String()))
	}
	return err
}

// writesInFlight counts a session's writes in the committer. A session ends (its timeout, its
// client's closeSession) only once the writes it sent before are answered, so that none lands
// after its end: ZooKeeper's leader processes a session's requests before its closeSession.
// The zero value is ready; its methods may be called from any goroutine.
type writesInFlight struct {
	mu sync.Mutex
	n  int
	// settled is closed as n drops to 0; made by the first to wait for it (settledLocked), so
	// that a session's writes, mostly one at a time with nobody waiting, make none.
	settled chan struct{}
}

// add counts a write handed to the committer.
func (w *writesInFlight) add() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
}

// done counts a write the committer answered.
func (w *writesInFlight) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n--
	if w.n == 0 && w.settled != nil {
		close(w.settled)
		w.settled = nil
	}
}

// settledLocked returns the channel closed once the writes in flight now are answered, nil if
// there are none; mu held.
func (w *writesInFlight) settledLocked() chan struct{} {
	if w.n == 0 {
		return nil
	}
	if w.settled == nil {
		w.settled = make(chan struct{})
	}
	return w.settled
}

// wait returns once the writes in flight when it was called are answered, or ctx's error.
func (w *writesInFlight) wait(ctx context.Context) error {
	w.mu.Lock()
	settled := w.settledLocked()
	w.mu.Unlock()
	if settled == nil {
		return nil
	}
	select {
	case <-settled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// afterSettled calls f once the writes in flight when it was called are answered: at once if
// there are none, else in a goroutine of its own, or never if ctx ends first.
func (w *writesInFlight) afterSettled(ctx context.Context, f func()) {
	w.mu.Lock()
	settled := w.settledLocked()
	w.mu.Unlock()
	if settled == nil {
		f()
		return
	}
	go func() {
		select {
		case <-settled:
			f()
		case <-ctx.Done():
		}
	}()
}

// end deletes the session key and every ephemeral node of the session in one transaction (one
// zxid, parents' pzxid updated, as ZooKeeper's closeSession), then revokes the lease. It does
// nothing when the session was resumed by another connection (owned=false). It first waits
// for the session's writes in flight (writesInFlight).
func (s *etcdSession) end(ctx context.Context) (zxid encoding.Zxid, owned bool, err error) {
	if err := s.writes.wait(ctx); err != nil {
		return 0, true, fmt.Errorf("session %s: end: wait for its write in flight: %w", s.id, err)
	}
	s.ending.Store(true)
	s.Detach()
	return s.b.endSession(ctx, s.id, s.ownerRev, s.b.process.id)
}

// endSession ends session id on behalf of the connection (or orphan adoption, orphans.go)
// that took it when its session key had ModRevision ownerRev, the session of process owner; see
// etcdSession.end. It lists the lease's keys, then deletes the session key and the ephemerals,
// guarded by the session key's ModRevision (not resumed since) and each ephemeral's lease (none
// deleted or created since; else it lists again). Ending another process's session puts that
// process's taken key too (takenFrom).
func (b *Store) endSession(ctx context.Context, id encoding.SessionID, ownerRev int64, owner uint64) (zxid encoding.Zxid, owned bool, err error) {
	skey := b.keys.session(id)
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		ttl, err := b.lease.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
		if err != nil {
			return 0, true, fmt.Errorf("session %s: close: list ephemerals: %w", id, err)
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(skey), "=", ownerRev)}
		ops := []clientv3.Op{clientv3.OpDelete(skey)}
		parents := map[string]bool{}
		var paths []string
		for _, k := range ttl.Keys {
			p, ok := b.keys.pathOfDataKey(string(k))
			if !ok {
				continue
			}
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			dk := b.keys.data(p)
			cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(dk), "=", int64(id)))
			ops = append(ops, clientv3.OpDelete(dk), clientv3.OpDelete(b.keys.metaPrefix(p), clientv3.WithPrefix()))
			if parent, ok := znode.Parent(p); ok && !parents[parent] {
				parents[parent] = true
				ops = append(ops, clientv3.OpPut(b.keys.childDeletes(parent), ""))
			}
		}
		if len(paths) > 0 {
			ops = append(ops, b.fenceOp())
		}
		qcmps, qops := b.quotaDeletes(paths)
		cmps, ops = append(cmps, qcmps...), append(ops, qops...)
		if owner != b.process.id {
			ops = append(ops, b.takenFrom(owner))
		}
		txn, err := b.kv.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(skey, clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return 0, true, fmt.Errorf("session %s: close: %w", id, err)
		}
		if txn.Succeeded {
			b.revokeQuietly(clientv3.LeaseID(id))
			return zxidOf(txn.Header.Revision, 0), true, nil
		}
		sk := txn.Responses[0].GetResponseRange().Kvs
		if len(sk) == 0 || sk[0].ModRevision != ownerRev {
			// Resumed elsewhere, or already ended (lease expired in etcd): not ours to end.
			return zxidOf(txn.Header.Revision, 0), false, nil
		}
		// An ephemeral was deleted or created concurrently, or the replica had not seen what
		// the quotas rest on: read the lease's keys again, on a replica that has.
		if len(paths) > 0 {
			_ = b.awaitTreeRevision(ctx, txn.Header.Revision)
		}
	}
	return 0, true, fmt.Errorf("session %s: close: too many conflicting retries", id)
}

// discardEvents is the EventSink of a session opened without one (backend-level tests).
type discardEvents struct{}

func (discardEvents) Event(encoding.WatcherEvent, encoding.Zxid) {}

// isLeaseGone reports whether err says the session's lease no longer exists in etcd.
func isLeaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || (err != nil && strings.Contains(err.Error(), "requested lease not found"))
}

// keyCode is how the committer refuses the session's writes once its key has moved or gone
// (keyState), or 0.
func (s *etcdSession) keyCode() encoding.ErrCode {
	switch s.keyState.Load() {
	case keyMoved:
		return encoding.ErrSessionMoved
	case keyGone:
		return encoding.ErrSessionExpired
	}
	return 0
}

package zetcd

import (
	"strings"
	"sync"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// This file is the in-memory side of ZooKeeper watches (PROTOCOL.md §6): the watch tables, the
// trigger rules, and the history that closes the gap between a read and its watch registration.
// It knows nothing of etcd: the etcd backend feeds it changes in zxid order (etcd_watch.go).

// watchKind is the table a watch lives in.
type watchKind uint8

const (
	watchData       watchKind = iota // getData, or exists on a present node: one-shot
	watchExist                       // exists on an absent node: one-shot, same triggers as data
	watchChild                       // getChildren/getChildren2: one-shot
	watchPersistent                  // addWatch mode 0: data and child triggers, stays
	watchRecursive                   // addWatch mode 1: data triggers on the node and below, stays
	numWatchKinds
)

// changeKind is what happened to a znode.
type changeKind uint8

const (
	changeCreated changeKind = iota
	changeDeleted
	changeData
)

func (k watchKind) oneShot() bool { return k == watchData || k == watchExist || k == watchChild }

// change is one znode change, at the zxid that made it.
type change struct {
	kind changeKind
	path string
	zxid encoding.Zxid
	// acl, if set, returns the ACL of the changed node (parent false) or of its parent (true)
	// as it was at the change. ZooKeeper 3.9.2+ delivers an event only to a connection with
	// READ on the node whose ACL applies: the changed node, the parent for NodeChildrenChanged
	// (PROTOCOL.md §6.2). ok false means the ACL cannot be known: the event is not delivered.
	// nil means no check. It may block (etcd_watch.go reads etcd on a cache miss): it is only
	// called without the registry's lock held.
	acl func(parent bool) (acl []encoding.ACL, ok bool)
	// createdACL is the ACL a create gave the node, in a multi's journal (schema.go).
	createdACL []encoding.ACL
}

// delivery is an event for one watcher, decided under the registry's lock and handed to its
// sink after it (deliver), once the ACL check is done.
type delivery struct {
	w      *watcher
	ev     encoding.WatcherEvent
	parent bool // the parent's ACL decides (NodeChildrenChanged)
}

// deliver hands the events of change c to their sinks, each only if its connection may READ
// the node whose ACL applies. A one-shot watch whose event is withheld is consumed all the
// same, as in ZooKeeper. Called without the registry's lock.
func (c change) deliver(ds []delivery) {
	for _, d := range ds {
		if d.w.auth != nil && c.acl != nil {
			acl, ok := c.acl(d.parent)
			if !ok || !d.w.auth.Allowed(acl, encoding.PermRead) {
				continue
			}
		}
		d.w.sink.Event(d.ev, c.zxid)
	}
}

// watcher is one connection's set of watches. sinks and indexes are guarded by the registry's mu.
type watcher struct {
	sink EventSink
	// session is the id of the session whose connection holds these watches (wchc, wchp); set
	// before the watcher is shared, read-only afterwards.
	session encoding.SessionID
	// since[kind][path] is the zxid the watch was armed at: only changes after it fire it.
	since  [numWatchKinds]map[string]encoding.Zxid
	closed bool
	// auth is the connection's identities, for the READ check of each event (nil: no check);
	// set before the watcher is shared.
	auth *znode.Identities
}

func newWatcher(sink EventSink) *watcher {
	w := &watcher{sink: sink}
	for k := range w.since {
		w.since[k] = map[string]encoding.Zxid{}
	}
	return w
}

// historyLen is how many recent changes the registry keeps to replay to a watch registered
// after the fact (a read at zxid R whose watch is armed once the feed is already past R).
const historyLen = 8192

// watchRegistry holds every watch of one process, indexed by kind and path.
//
// mu guards everything. fire is called by the one goroutine feeding changes, in zxid order;
// registration and removal come from session executors.
type watchRegistry struct {
	mu sync.Mutex
	// moved is closed (and replaced) whenever progress moves.
	moved chan struct{}
	table [numWatchKinds]map[string]map[*watcher]struct{}
	// progress is the zxid up to which every change has been fired.
	progress encoding.Zxid
	// history is a ring of the last historyLen changes; hstart is its oldest entry; oldest is the
	// zxid before which history may be incomplete.
	history []change
	hstart  int
	oldest  encoding.Zxid
	count   int // number of registered watches
}

func newWatchRegistry(progress encoding.Zxid) *watchRegistry {
	r := &watchRegistry{progress: progress, oldest: progress, moved: make(chan struct{})}
	for k := range r.table {
		r.table[k] = map[string]map[*watcher]struct{}{}
	}
	return r
}

// register arms a watch of kind on path for changes after zxid since. Changes in (since,
// progress] that the feed already fired are replayed from history. ok is false when history
// does not reach back to since; the caller must then check the node's state itself (catch-up).
func (r *watchRegistry) register(w *watcher, kind watchKind, path string, since encoding.Zxid) (ok bool) {
	var replay []change
	var ds []delivery
	defer func() {
		for i, c := range replay {
			c.deliver(ds[i : i+1])
		}
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.closed {
		return true
	}
	if since < r.progress {
		if since < r.oldest {
			return false
		}
		for i := 0; i < len(r.history); i++ {
			c := r.history[(r.hstart+i)%len(r.history)]
			if c.zxid <= since {
				continue
			}
			if ev, hit := eventFor(kind, path, c); hit {
				replay = append(replay, c)
				ds = append(ds, delivery{w: w, ev: ev, parent: ev.Type == encoding.EventNodeChildrenChanged})
				if kind.oneShot() {
					return true // consumed
				}
			}
		}
	}
	r.add(w, kind, path, max(since, r.progress))
	return true
}

// add puts a watch in the tables; mu held.
func (r *watchRegistry) add(w *watcher, kind watchKind, path string, since encoding.Zxid) {
	if _, dup := w.since[kind][path]; !dup {
		r.count++
	}
	w.since[kind][path] = since
	set := r.table[kind][path]
	if set == nil {
		set = map[*watcher]struct{}{}
		r.table[kind][path] = set
	}
	set[w] = struct{}{}
}

// remove drops one watch; mu held. It reports whether the watch existed.
func (r *watchRegistry) remove(w *watcher, kind watchKind, path string) bool {
	if _, ok := w.since[kind][path]; !ok {
		return false
	}
	delete(w.since[kind], path)
	r.count--
	set := r.table[kind][path]
	delete(set, w)
	if len(set) == 0 {
		delete(r.table[kind], path)
	}
	return true
}

// closeWatcher removes every watch of w (its connection is gone).
func (r *watchRegistry) closeWatcher(w *watcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.closed = true
	for k := range w.since {
		for path := range w.since[k] {
			r.remove(w, watchKind(k), path)
		}
	}
}

// watching reports whether w holds any watch.
func (r *watchRegistry) watching(w *watcher) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range w.since {
		if len(w.since[k]) > 0 {
			return true
		}
	}
	return false
}

// has reports whether w holds a watch of kind on path.
func (r *watchRegistry) has(w *watcher, kind watchKind, path string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := w.since[kind][path]
	return ok
}

// removeKinds removes w's watches of the given kinds on path (removeWatches); it reports
// whether any existed. With dryRun it only reports (checkWatches).
func (r *watchRegistry) removeKinds(w *watcher, path string, kinds []watchKind, dryRun bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	found := false
	for _, k := range kinds {
		if _, ok := w.since[k][path]; !ok {
			continue
		}
		found = true
		if !dryRun {
			r.remove(w, k, path)
		}
	}
	return found
}

// eventFor says whether a change fires a watch of kind on path, and with which event. It is the
// trigger table of PROTOCOL.md §6.2 for one watch.
func eventFor(kind watchKind, path string, c change) (encoding.WatcherEvent, bool) {
	ev := encoding.WatcherEvent{State: encoding.StateSyncConnected, Path: c.path}
	parent, _ := znode.Parent(c.path)
	switch kind {
	case watchData, watchExist:
		if c.path != path {
			return ev, false
		}
	case watchChild:
		if c.path == path && c.kind == changeDeleted {
			ev.Type = encoding.EventNodeDeleted
			return ev, true
		}
		if parent != path || c.kind == changeData {
			return ev, false
		}
		return encoding.WatcherEvent{Type: encoding.EventNodeChildrenChanged, State: encoding.StateSyncConnected, Path: parent}, true
	case watchPersistent:
		if c.path != path {
			if parent == path && c.kind != changeData {
				return encoding.WatcherEvent{Type: encoding.EventNodeChildrenChanged, State: encoding.StateSyncConnected, Path: parent}, true
			}
			return ev, false
		}
	case watchRecursive:
		if !isAncestorOrSelf(path, c.path) {
			return ev, false
		}
	}
	switch c.kind {
	case changeCreated:
		ev.Type = encoding.EventNodeCreated
	case changeDeleted:
		ev.Type = encoding.EventNodeDeleted
	default:
		ev.Type = encoding.EventNodeDataChanged
	}
	return ev, true
}

// isAncestorOrSelf reports whether a is p or an ancestor of p.
func isAncestorOrSelf(a, p string) bool {
	if a == "/" || a == p {
		return true
	}
	return strings.HasPrefix(p, a) && len(p) > len(a) && p[len(a)] == '/'
}

// fire delivers the events of one change to every connection watching it, at most one event per
// connection per trigger, removes the one-shot watches it consumed, and records the change in
// history. Changes must come in zxid order; call advance after the last change of a zxid.
func (r *watchRegistry) fire(c change) {
	var ds []delivery
	defer func() { c.deliver(ds) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(c)
	parent, _ := znode.Parent(c.path)

	// Trigger 1: the node itself (data, exist, child-on-delete, persistent, recursive).
	notified := map[*watcher]bool{}
	deliver := func(kind watchKind, path string) {
		for w := range r.table[kind][path] {
			if w.since[kind][path] >= c.zxid {
				continue
			}
			ev, hit := eventFor(kind, path, c)
			if !hit {
				continue
			}
			if kind.oneShot() {
				r.remove(w, kind, path)
			}
			if ev.Path != c.path || notified[w] {
				continue
			}
			notified[w] = true
			ds = append(ds, delivery{w: w, ev: ev})
		}
	}
	deliver(watchData, c.path)
	deliver(watchExist, c.path)
	if c.kind == changeDeleted {
		deliver(watchChild, c.path)
	}
	deliver(watchPersistent, c.path)
	if len(r.table[watchRecursive]) > 0 {
		for a := c.path; ; {
			deliver(watchRecursive, a)
			if a == "/" {
				break
			}
			a, _ = znode.Parent(a)
		}
	}

	// Trigger 2: the parent's children changed (create and delete only).
	if c.kind == changeData || c.path == "/" {
		return
	}
	notified = map[*watcher]bool{}
	for _, kind := range []watchKind{watchChild, watchPersistent} {
		for w := range r.table[kind][parent] {
			if w.since[kind][parent] >= c.zxid {
				continue
			}
			if kind == watchChild {
				r.remove(w, kind, parent)
			}
			if notified[w] {
				continue
			}
			notified[w] = true
			ds = append(ds, delivery{w: w, parent: true,
				ev: encoding.WatcherEvent{Type: encoding.EventNodeChildrenChanged, State: encoding.StateSyncConnected, Path: parent}})
		}
	}
}

// record appends c to the history ring; mu held.
func (r *watchRegistry) record(c change) {
	if len(r.history) < historyLen {
		r.history = append(r.history, c)
		return
	}
	// Overwriting the oldest entry: history is now complete only after its zxid.
	r.oldest = r.history[r.hstart].zxid
	r.history[r.hstart] = c
	r.hstart = (r.hstart + 1) % historyLen
}

// advance records that every change up to zxid has been fired, and wakes waiters.
func (r *watchRegistry) advance(zxid encoding.Zxid) {
	r.mu.Lock()
	if zxid > r.progress {
		r.progress = zxid
		close(r.moved)
		r.moved = make(chan struct{})
	}
	r.mu.Unlock()
}

// progressNow returns the progress and a channel closed when it next moves.
func (r *watchRegistry) progressNow() (encoding.Zxid, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress, r.moved
}

// resetHistory forgets history (after the feed lost events, e.g. to compaction): registrations
// armed before zxid then need a catch-up check.
func (r *watchRegistry) resetHistory(zxid encoding.Zxid) {
	r.mu.Lock()
	r.history = r.history[:0]
	r.hstart = 0
	r.oldest = zxid
	r.mu.Unlock()
}

// snapshot lists every (watcher, kind, path, since) registered, for catch-up after a resync.
func (r *watchRegistry) snapshot() []registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []registration
	for k := range r.table {
		for path, set := range r.table[k] {
			for w := range set {
				out = append(out, registration{w: w, kind: watchKind(k), path: path, since: w.since[k][path]})
			}
		}
	}
	return out
}

type registration struct {
	w     *watcher
	kind  watchKind
	path  string
	since encoding.Zxid
}

// stats reports the number of watches and of watched paths.
func (r *watchRegistry) stats() (watches, paths int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for k := range r.table {
		for p := range r.table[k] {
			seen[p] = true
		}
	}
	return r.count, len(seen)
}

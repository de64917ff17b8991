package watch

import (
	"sync"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// Sink receives the watch events of one connection (zetcd.EventSink satisfies it). Event must
// not block for long: it queues the event behind what the connection has already queued. zxid
// is the zxid of the change that fired the event, or -1 for catch-up events (setWatches).
type Sink interface {
	Event(ev encoding.WatcherEvent, zxid encoding.Zxid)
}

// Kind is the table a watch lives in.
type Kind uint8

const (
	Data                Kind = iota // getData, or exists on a present node: one-shot
	Exist                           // exists on an absent node: one-shot, same triggers as data
	Child                           // getChildren/getChildren2: one-shot
	Persistent                      // addWatch mode 0: data and child triggers, stays
	PersistentRecursive             // addWatch mode 1: data triggers on the node and below, stays
	NumKinds
)

// ChangeKind is what happened to a znode.
type ChangeKind uint8

const (
	Created ChangeKind = iota
	Deleted
	DataChanged
)

func (k Kind) OneShot() bool { return k == Data || k == Exist || k == Child }

// Change is one znode Change, at the zxid that made it.
type Change struct {
	Kind ChangeKind
	Path string
	Zxid encoding.Zxid
	// ACL, if set, gives the ACLs that decide the delivery of the change's events; nil means
	// no check.
	ACL ACLSource
	// CreatedACL is the ACL a create gave the node, in a multi's journal (keys.go).
	CreatedACL []encoding.ACL
}

// ACLSource gives the ACLs of a change. ZooKeeper 3.9.2+ delivers an event only to a
// connection with READ on the node whose ACL applies: the changed node, the parent for
// NodeChildrenChanged (WatchManager).
type ACLSource interface {
	// ACL returns the ACL of the changed node (parent false) or of its parent (true) as it was
	// at the change. ok false means the ACL cannot be known: the event is not delivered. It
	// may block (the store reads etcd on a cache miss): it is only called without the
	// registry's lock held.
	ACL(parent bool) (acl []encoding.ACL, ok bool)
}

// delivery is an event for one watcher, decided under the registry's lock and handed to its
// sink after it (deliver), once the ACL check is done.
type delivery struct {
	w      *Watcher
	ev     encoding.WatcherEvent
	parent bool // the parent's ACL decides (NodeChildrenChanged)
}

// deliver hands the events of change c to their sinks, each only if its connection may READ
// the node whose ACL applies. A one-shot watch whose event is withheld is consumed all the
// same, as in ZooKeeper. Called without the registry's lock.
func (c Change) deliver(ds []delivery) {
	for _, d := range ds {
		if d.w.auth != nil && c.ACL != nil {
			acl, ok := c.ACL.ACL(d.parent)
			if !ok || !d.w.auth.Allowed(acl, encoding.PermRead) {
				continue
			}
		}
		d.w.sink.Event(d.ev, c.Zxid)
	}
}

// hold counts deliveries decided for their watchers, so that Watching reports true until they
// are handed over (release); mu held.
func hold(ds []delivery) {
	for _, d := range ds {
		d.w.inFlight++
	}
}

// release uncounts deliveries once handed over; called without mu.
func (r *Registry) release(ds []delivery) {
	if len(ds) == 0 {
		return
	}
	r.mu.Lock()
	for _, d := range ds {
		d.w.inFlight--
	}
	r.mu.Unlock()
}

// Watcher is one connection's set of watches. sinks and indexes are guarded by the registry's mu.
type Watcher struct {
	sink Sink
	// session is the id of the session whose connection holds these watches (wchc, wchp); set
	// before the watcher is shared, read-only afterwards.
	session encoding.SessionID
	// inFlight counts the events decided for this watcher and not yet handed to its sink: a
	// one-shot watch is gone from the tables before its event is delivered.
	inFlight int
	// since[kind][path] is the zxid the watch was armed at: only changes after it fire it. A
	// kind's map is made by its first watch (most connections use one or two kinds).
	since  [NumKinds]map[string]encoding.Zxid
	closed bool
	// auth is the connection's identities, for the READ check of each event (nil: no check);
	// set before the watcher is shared.
	auth *znode.Identities
}

// NewWatcher makes the watcher of one connection of session id; auth is the connection's
// identities, for the READ check of each event (nil: no check).
func NewWatcher(sink Sink, session encoding.SessionID, auth *znode.Identities) *Watcher {
	return &Watcher{sink: sink, session: session, auth: auth}
}

// watchers is the set of watchers of one kind on one path. Most watched paths are watched by
// one connection: that one is held inline, and the map is made for a second one (and kept, with
// one inside, until the set empties). So one is set only while more is nil.
type watchers struct {
	one  *Watcher
	more map[*Watcher]struct{}
}

// with returns the set with w added.
func (s watchers) with(w *Watcher) watchers {
	switch {
	case s.more != nil:
		s.more[w] = struct{}{}
	case s.one == nil || s.one == w:
		s.one = w
	default:
		s.more = map[*Watcher]struct{}{s.one: {}, w: {}}
		s.one = nil
	}
	return s
}

// without returns the set with w removed.
func (s watchers) without(w *Watcher) watchers {
	if s.more != nil {
		delete(s.more, w)
		if len(s.more) == 0 {
			s.more = nil
		}
	} else if s.one == w {
		s.one = nil
	}
	return s
}

func (s watchers) empty() bool { return s.one == nil && s.more == nil }

// each calls f for every watcher of the set as it is when each is called; f may remove
// watchers from the registry's tables (deleting from more while ranging over it is allowed).
func (s watchers) each(f func(w *Watcher)) {
	if s.one != nil {
		f(s.one)
	}
	for w := range s.more {
		f(w)
	}
}

// historyLen is how many recent changes the registry keeps to replay to a watch registered
// after the fact (a read at zxid R whose watch is armed once the feed is already past R).
const historyLen = 8192

// Registry holds every watch of one process, indexed by kind and path.
//
// mu guards everything. fire is called by the one goroutine feeding changes, in zxid order;
// registration and removal come from session executors.
type Registry struct {
	mu sync.Mutex
	// moved is closed whenever progress moves, and made again by the next Progress that asks
	// for it: nil while nobody waits, so that a revision nobody waits for makes none.
	moved chan struct{}
	table [NumKinds]map[string]watchers
	// progress is the zxid up to which every change has been fired.
	progress encoding.Zxid
	// history is a ring of the last historyLen changes; hstart is its oldest entry; oldest is the
	// zxid before which history may be incomplete.
	history []Change
	hstart  int
	oldest  encoding.Zxid
	count   int // number of registered watches
}

func NewRegistry(progress encoding.Zxid) *Registry {
	r := &Registry{progress: progress, oldest: progress}
	for k := range r.table {
		r.table[k] = map[string]watchers{}
	}
	return r
}

// Arm arms a watch of kind on path for the changes after zxid since, for a caller that holds
// the state at since while it arms: a read under the store's replica lock, which the feed must
// take to apply a revision before it fires that revision's changes. No change after since can
// have been fired yet, so nothing is replayed or caught up, and nothing is delivered here. ok
// is false, and nothing is armed, if since is behind the progress: the caller broke that rule.
func (r *Registry) Arm(w *Watcher, kind Kind, path string, since encoding.Zxid) (ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if since < r.progress {
		return false
	}
	if !w.closed {
		r.add(w, kind, path, since)
	}
	return true
}

// Register arms a watch of kind on path for changes after zxid since. The changes after since
// the feed has already fired are replayed from history: those up to the progress, and those of
// a revision the feed is firing (fired, not yet advanced), which a caller that read its state
// just before that revision would otherwise miss. ok is false when history does not reach back
// to since; the caller must then check the node's state itself (catch-up).
func (r *Registry) Register(w *Watcher, kind Kind, path string, since encoding.Zxid) (ok bool) {
	return r.registerAll([]Registration{{Watcher: w, Kind: kind, Path: path}}, since)
}

// replayed identifies an event replayed to a watcher: a change (its place in history) gives a
// connection at most one event of a type and path, however many of its watches it fires, as
// Fire gives one per trigger.
type replayed struct {
	w  *Watcher
	at int
	ev encoding.WatcherEvent
}

// registerAll arms every registration of regs (their Since aside) at since, as Register does,
// in one step under mu.
func (r *Registry) registerAll(regs []Registration, since encoding.Zxid) (ok bool) {
	var replay []Change // replay[i] fired ds[i]
	var ds []delivery
	defer func() {
		for i, c := range replay {
			c.deliver(ds[i : i+1])
		}
		r.release(ds)
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { hold(ds) }() // before the unlock: Fire's deliveries count under mu too
	if since < r.oldest {
		return false
	}
	consumed := make([]bool, len(regs))
	seen := map[replayed]bool{}
	for i := range r.history {
		c := r.history[(r.hstart+i)%len(r.history)]
		if c.Zxid <= since {
			continue
		}
		for j, reg := range regs {
			if consumed[j] || reg.Watcher.closed {
				continue
			}
			ev, hit := EventFor(reg.Kind, reg.Path, c)
			if !hit {
				continue
			}
			consumed[j] = reg.Kind.OneShot()
			if key := (replayed{reg.Watcher, i, ev}); !seen[key] {
				seen[key] = true
				replay = append(replay, c)
				ds = append(ds, delivery{w: reg.Watcher, ev: ev, parent: ev.Type == encoding.EventNodeChildrenChanged})
			}
		}
	}
	for j, reg := range regs {
		if !consumed[j] && !reg.Watcher.closed {
			r.add(reg.Watcher, reg.Kind, reg.Path, max(since, r.progress))
		}
	}
	return true
}

// add puts a watch in the tables; mu held.
func (r *Registry) add(w *Watcher, kind Kind, path string, since encoding.Zxid) {
	if _, dup := w.since[kind][path]; !dup {
		r.count++
	}
	if w.since[kind] == nil {
		w.since[kind] = map[string]encoding.Zxid{}
	}
	w.since[kind][path] = since
	r.table[kind][path] = r.table[kind][path].with(w)
}

// remove drops one watch; mu held. It reports whether the watch existed.
func (r *Registry) remove(w *Watcher, kind Kind, path string) bool {
	if _, ok := w.since[kind][path]; !ok {
		return false
	}
	delete(w.since[kind], path)
	r.count--
	if set := r.table[kind][path].without(w); set.empty() {
		delete(r.table[kind], path)
	} else {
		r.table[kind][path] = set
	}
	return true
}

// CloseWatcher removes every watch of w (its connection is gone).
func (r *Registry) CloseWatcher(w *Watcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.closed = true
	for k := range w.since {
		for path := range w.since[k] {
			r.remove(w, Kind(k), path)
		}
	}
}

// Watching reports whether w holds any watch, or has events decided and not yet handed over:
// false means no change can produce an event for w any more.
func (r *Registry) Watching(w *Watcher) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.inFlight > 0 {
		return true
	}
	for k := range w.since {
		if len(w.since[k]) > 0 {
			return true
		}
	}
	return false
}

// Has reports whether w holds a watch of kind on path.
func (r *Registry) Has(w *Watcher, kind Kind, path string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := w.since[kind][path]
	return ok
}

// RemoveKinds removes w's watches of the given kinds on path (removeWatches); it reports
// whether any existed. With dryRun it only reports (checkWatches).
func (r *Registry) RemoveKinds(w *Watcher, path string, kinds []Kind, dryRun bool) bool {
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

// Fire delivers the events of one change to every connection watching it, at most one event per
// connection per trigger, removes the one-shot watches it consumed, and records the change in
// history. Changes must come in zxid order; call advance after the last change of a zxid.
func (r *Registry) Fire(c Change) {
	var ds []delivery
	defer func() { c.deliver(ds); r.release(ds) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { hold(ds) }()
	r.record(c)
	parent, _ := znode.Parent(c.Path)

	// Trigger 1: the node itself (data, exist, child-on-delete, persistent, recursive).
	notified := map[*Watcher]bool{}
	deliver := func(kind Kind, path string) {
		r.table[kind][path].each(func(w *Watcher) {
			if w.since[kind][path] >= c.Zxid {
				return
			}
			ev, hit := EventFor(kind, path, c)
			if !hit {
				return
			}
			if kind.OneShot() {
				r.remove(w, kind, path)
			}
			if ev.Path != c.Path || notified[w] {
				return
			}
			notified[w] = true
			ds = append(ds, delivery{w: w, ev: ev})
		})
	}
	deliver(Data, c.Path)
	deliver(Exist, c.Path)
	if c.Kind == Deleted {
		deliver(Child, c.Path)
	}
	deliver(Persistent, c.Path)
	if len(r.table[PersistentRecursive]) > 0 {
		for a := c.Path; ; {
			deliver(PersistentRecursive, a)
			if a == "/" {
				break
			}
			a, _ = znode.Parent(a)
		}
	}

	// Trigger 2: the parent's children changed (create and delete only).
	if c.Kind == DataChanged || c.Path == "/" {
		return
	}
	notified = map[*Watcher]bool{}
	for _, kind := range []Kind{Child, Persistent} {
		r.table[kind][parent].each(func(w *Watcher) {
			if w.since[kind][parent] >= c.Zxid {
				return
			}
			if kind == Child {
				r.remove(w, kind, parent)
			}
			if notified[w] {
				return
			}
			notified[w] = true
			ds = append(ds, delivery{w: w, parent: true,
				ev: encoding.WatcherEvent{Type: encoding.EventNodeChildrenChanged, State: encoding.StateSyncConnected, Path: parent}})
		})
	}
}

// record appends c to the history ring; mu held.
func (r *Registry) record(c Change) {
	if len(r.history) < historyLen {
		r.history = append(r.history, c)
		return
	}
	// Overwriting the oldest entry: history is now complete only after its zxid.
	r.oldest = r.history[r.hstart].Zxid
	r.history[r.hstart] = c
	r.hstart = (r.hstart + 1) % historyLen
}

// Advance records that every change up to zxid has been fired, and wakes waiters.
func (r *Registry) Advance(zxid encoding.Zxid) {
	r.mu.Lock()
	if zxid > r.progress {
		r.progress = zxid
		if r.moved != nil {
			close(r.moved)
			r.moved = nil
		}
	}
	r.mu.Unlock()
}

// ProgressZxid returns the progress.
func (r *Registry) ProgressZxid() encoding.Zxid {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress
}

// Progress returns the progress and a channel closed when it next moves.
func (r *Registry) Progress() (encoding.Zxid, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved == nil {
		r.moved = make(chan struct{})
	}
	return r.progress, r.moved
}

// ResetHistory forgets history (after the feed lost events, e.g. to compaction): registrations
// armed before zxid then need a catch-up check.
func (r *Registry) ResetHistory(zxid encoding.Zxid) {
	r.mu.Lock()
	r.history = r.history[:0]
	r.hstart = 0
	r.oldest = zxid
	r.mu.Unlock()
}

// Registration is one watch: the connection's watcher, its kind and path, and the zxid it is
// armed at (only changes after Since fire it).
type Registration struct {
	Watcher *Watcher
	Kind    Kind
	Path    string
	Since   encoding.Zxid
}

// Stats reports the number of watches and of watched paths.
func (r *Registry) Stats() (watches, paths int) {
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

// Info is one registered watch, as list reports it.
type Info struct {
	Session encoding.SessionID
	Path    string
	Kind    Kind
}

// List returns every registered watch.
func (r *Registry) List() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, r.count)
	for k := range r.table {
		for path, set := range r.table[k] {
			set.each(func(w *Watcher) {
				out = append(out, Info{Session: w.session, Path: path, Kind: Kind(k)})
			})
		}
	}
	return out
}

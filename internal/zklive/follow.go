package zklive

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// Change is one node's new state: Node is the node as read after the change (nil: deleted).
type Change struct {
	Path string
	Node *zkdata.Node
}

// Follower reports a ZooKeeper's changes after Follow's initial read, until its context ends.
type Follower struct {
	cfg    Config
	report func(Change)
	log    *zap.Logger

	qmu    sync.Mutex
	queue  []item
	signal chan struct{} // has a value while queue may be non-empty

	smu sync.Mutex
	s   *session // the current session; replaced by the follower's goroutine on a resync
	gen int      // counts sessions; an item of an older one is stale

	// Owned by the follower's goroutine.
	nodes     map[string]*zkdata.Node // what has been reported: the initial read and every Change since
	seen      int64                   // every transaction up to this zxid is in nodes, but for setACLs if dirty
	dirty     bool                    // ZooKeeper applied transactions no event named since the last sweep
	lastSweep time.Time               // when the last sweep (or the read of the whole tree) ended
	sweepTook time.Duration           // how long it took

	// settled is the newest zxid up to which every transaction's changes have been reported
	// (Settled).
	settled atomic.Int64

	done chan struct{}
	err  error // why the follower stopped; read after done is closed
}

// item is what the follower's goroutine takes in order: a notification of the session gen, or
// a barrier of Sync, answered once every item before it has been handled: nil, or the error
// that lost the session before it could be (the follower then opens a new one).
type item struct {
	gen     int
	n       notification
	barrier chan error // buffered: the follower never waits on it
}

// Follow sets a persistent recursive watch on "/" (addWatch, ZooKeeper 3.6+), then reads the
// whole tree as Read does, and returns the State read. From then on, until ctx ends, it calls
// report (from one goroutine, in order) with the new state of every node that changes:
//
//   - NodeCreated, NodeDeleted and NodeDataChanged name the node; it and, for the first two,
//     its parent (whose pzxid, cversion and children change, with no event of its own) are read
//     again and reported if they differ from what was last reported. Every read is on one
//     session, whose view never goes back (ZooKeeper's guarantee), so the states reported for
//     a node never go back in mzxid, pzxid or versions; a read may see later changes than the
//     event's, whose own events then find nothing new.
//   - setACL fires no watch (DataTree.setACL), nor do createSession, closeSession of a session
//     without ephemerals, and failed writes. Each transaction has its own zxid, and every
//     ReplyHeader (of a ping, every third of the session timeout, too) carries ZooKeeper's last
//     one: a zxid that no event accounts for may be a setACL, and makes the follower read every
//     node's ACL and Stat again (a sweep), at most every Config.SweepInterval, and always in
//     Sync. A node's children that were not reported are read when it is: ZooKeeper sends no
//     event of a node the follower may not read, and reading it names it.
//   - A lost connection, an expired session or a removed watch makes the follower open a new
//     session, set the watch again, read the whole tree and report every difference from what it
//     reported before (changed nodes parents first, deleted ones children first), retrying
//     until ctx ends.
//
// Sessions are not followed: the State's are those of the initial read, and the ephemeralOwners
// of the nodes reported later name the sessions open then, whose timeouts Sessions reads.
//
// A node that becomes unreadable with the credentials given stops the follower: Wait returns
// the error, which wraps ErrUnreadable.
func Follow(ctx context.Context, cfg Config, report func(Change)) (*Follower, *zkdata.State, error) {
	f := &Follower{cfg: cfg, report: report, log: cfg.log(), signal: make(chan struct{}, 1), done: make(chan struct{})}
	last, err := f.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	st := &zkdata.State{Nodes: maps.Clone(f.nodes), LastZxid: last}
	st.Sessions, st.Skipped = Sessions(cfg, st.Nodes)
	go f.run(ctx)
	return f, st, nil
}

// Wait blocks until the follower stops, and returns why: ctx's error, or a node it may not read.
func (f *Follower) Wait() error {
	<-f.done
	return f.err
}

// Settled returns a zxid up to which every transaction's changes have been reported: every
// node a transaction at or below it touched has been reported in a state that holds it (setACLs
// aside: they move no zxid of a Stat, and a sweep reports them). A node reported earlier may hold
// zxids above it, whose other nodes may come later: it is the bound below which no zxid is
// missing. A transaction's events share its zxid (a multi fires one per op), so an event moves
// it to the zxid before the event's; a ping's or a Sync's reply, which comes after the events of
// every transaction up to its zxid, and a whole read of the tree from a zxid move it to that zxid.
// report is called before Settled moves past what it reports.
func (f *Follower) Settled() int64 { return f.settled.Load() }

func (f *Follower) settle(zxid int64) {
	if zxid > f.settled.Load() {
		f.settled.Store(zxid)
	}
}

// Last returns ZooKeeper's last zxid, read after a sync on the follower's session, without
// waiting for the follower to report the changes up to it (Sync does).
func (f *Follower) Last(ctx context.Context) (int64, error) {
	f.smu.Lock()
	s := f.s
	f.smu.Unlock()
	return lastZxid(ctx, s)
}

// Sync returns ZooKeeper's last zxid once every change up to it has been reported: it reads that
// zxid after a sync, then waits until the follower has handled every event that came before
// the reply, and sweeps the ACLs if a transaction without an event came before it.
func (f *Follower) Sync(ctx context.Context) (int64, error) {
	for {
		f.smu.Lock()
		s, gen := f.s, f.gen
		f.smu.Unlock()
		last, err := lastZxid(ctx, s)
		if err == nil {
			b := make(chan error, 1)
			f.push(item{gen: gen, n: notification{zxid: last, ping: true}, barrier: b})
			select {
			case err := <-b:
				if err != nil {
					return 0, err
				}
				return last, nil
			case <-f.done:
				return 0, f.err
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if !errors.Is(err, errClosed) {
			return 0, err
		}
		select { // the follower is opening a new session
		case <-f.done:
			return 0, f.err
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *Follower) push(it item) {
	f.qmu.Lock()
	f.queue = append(f.queue, it)
	f.qmu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// pop returns the next item, or false when wake fires first (nil: never).
func (f *Follower) pop(ctx context.Context, wake <-chan time.Time) (item, bool, error) {
	for {
		f.qmu.Lock()
		if len(f.queue) > 0 {
			it := f.queue[0]
			f.queue[0] = item{}
			f.queue = f.queue[1:]
			f.qmu.Unlock()
			return it, true, nil
		}
		f.qmu.Unlock()
		select {
		case <-f.signal:
		case <-wake:
			return item{}, false, nil
		case <-ctx.Done():
			return item{}, false, ctx.Err()
		}
	}
}

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	defer func() { f.current().close() }()
	for {
		err := f.step(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil || errors.Is(err, ErrUnreadable) {
			f.err = cmp.Or(ctx.Err(), err)
			return
		}
		f.log.Warn("lost ZooKeeper: reading the tree again", zap.Error(err))
		f.current().fail(err)
		if err := f.reconnect(ctx); err != nil {
			f.err = err
			return
		}
	}
}

// step sweeps if a sweep is due, else handles the next item or waits until a sweep is due.
func (f *Follower) step(ctx context.Context) error {
	var wake <-chan time.Time
	if f.dirty {
		due := time.Until(f.lastSweep.Add(max(f.cfg.sweepInterval(), 9*f.sweepTook)))
		if due <= 0 {
			return f.sweep(ctx)
		}
		t := time.NewTimer(due)
		defer t.Stop()
		wake = t.C
	}
	it, ok, err := f.pop(ctx, wake)
	if err != nil {
		return err
	}
	if !ok {
		return f.sweep(ctx)
	}
	if it.gen != f.gen { // of a lost session; the new one's whole read came after it
		if it.barrier != nil {
			it.barrier <- nil
		}
		return nil
	}
	if it.n.lost != nil {
		return it.n.lost
	}
	f.account(it.n.zxid, it.n.ping)
	if it.barrier != nil {
		if f.dirty {
			if err := f.sweep(ctx); err != nil {
				it.barrier <- err
				return err
			}
		}
		f.settle(it.n.zxid)
		it.barrier <- nil
		return nil
	}
	if it.n.ping {
		f.settle(it.n.zxid)
		return nil
	}
	f.settle(it.n.zxid - 1)
	return f.handle(ctx, it.n.ev)
}

// account moves seen to zxid, which an event (ping false) or a ReplyHeader (ping true) carries,
// and marks the follower dirty if transactions lie between that no event named.
func (f *Follower) account(zxid int64, ping bool) {
	switch {
	case zxid <= f.seen:
		return
	case ping || zxid > f.seen+1:
		f.dirty = true
	}
	f.seen = zxid
}

func (f *Follower) handle(ctx context.Context, ev encoding.WatcherEvent) error {
	switch ev.Type {
	case encoding.EventNodeCreated, encoding.EventNodeDeleted:
		if err := f.refresh(ctx, ev.Path); err != nil {
			return err
		}
		if ev.Path != "/" {
			return f.refresh(ctx, path.Dir(ev.Path))
		}
		return nil
	case encoding.EventNodeDataChanged, encoding.EventNodeChildrenChanged:
		return f.refresh(ctx, ev.Path)
	case encoding.EventPersistentWatchRemoved:
		return fmt.Errorf("%w: the watch on / was removed", errClosed)
	}
	return nil
}

// refresh reads p again and reports it if it differs from what was reported, and then the
// subtrees of its children that were not reported: ZooKeeper sends a persistent recursive
// watch no event of a node the watcher may not read (WatchManager), so such a child shows
// only in its parent's children, and reading it names it.
func (f *Follower) refresh(ctx context.Context, p string) error {
	n, _, err := readNode(ctx, f.current(), p)
	if err != nil {
		return err
	}
	f.set(p, n)
	if n == nil {
		return nil
	}
	for _, c := range n.Children {
		child := path.Join(p, c)
		if f.nodes[child] != nil {
			continue
		}
		nodes, _, err := readTree(ctx, &f.cfg, f.current(), child)
		if err != nil {
			return err
		}
		for _, q := range slices.Sorted(maps.Keys(nodes)) {
			f.set(q, nodes[q])
		}
	}
	return nil
}

// set reports n as p's state if it differs; a nil n deletes p and what is held below it,
// deepest first.
func (f *Follower) set(p string, n *zkdata.Node) {
	old := f.nodes[p]
	if n == nil {
		if old == nil {
			return
		}
		for _, c := range old.Children {
			f.set(path.Join(p, c), nil)
		}
		delete(f.nodes, p)
		f.report(Change{Path: p})
		return
	}
	if old != nil && sameNode(old, n) {
		return
	}
	f.nodes[p] = n
	f.report(Change{Path: p, Node: n})
}

func sameNode(a, b *zkdata.Node) bool {
	return a.Stat == b.Stat && bytes.Equal(a.Data, b.Data) && (a.Data == nil) == (b.Data == nil) &&
		slices.Equal(a.ACL, b.ACL) && slices.Equal(a.Children, b.Children)
}

// SessionID is the id of the follower's session on ZooKeeper now (0 between two).
func (f *Follower) SessionID() int64 {
	if s := f.current(); s != nil {
		return s.id
	}
	return 0
}

func (f *Follower) current() *session {
	f.smu.Lock()
	defer f.smu.Unlock()
	return f.s
}

// connect opens a session, sets the watch, and reads the tree; every transaction up to the
// zxid read after the watch was set is in what it reads, and every later one either fires the
// watch or moves a ReplyHeader's zxid. It returns the newest zxid a reply carried.
func (f *Follower) connect(ctx context.Context) (int64, error) {
	f.smu.Lock()
	f.gen++
	gen := f.gen
	f.smu.Unlock()
	s, err := dial(ctx, &f.cfg, func(n notification) { f.push(item{gen: gen, n: n}) })
	if err != nil {
		return 0, err
	}
	if _, err := s.call(ctx, encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/", Mode: encoding.AddWatchPersistentRecursive}, nil); err != nil {
		s.close()
		return 0, fmt.Errorf("addWatch /: %w", err)
	}
	begin := time.Now()
	start, err := lastZxid(ctx, s)
	if err != nil {
		s.close()
		return 0, err
	}
	nodes, last, err := readTree(ctx, &f.cfg, s, "/")
	if err != nil {
		s.close()
		return 0, err
	}
	f.smu.Lock()
	f.s = s
	f.smu.Unlock()
	if f.nodes == nil {
		f.nodes = nodes
	} else {
		f.replace(nodes)
	}
	f.seen, f.dirty = start, false
	f.settle(start)
	f.lastSweep, f.sweepTook = time.Now(), time.Since(begin)
	return max(start, last), nil
}

// replace reports every difference between what was reported and nodes: new and changed nodes
// parents first, then deleted ones children first.
func (f *Follower) replace(nodes map[string]*zkdata.Node) {
	for _, p := range slices.Sorted(maps.Keys(nodes)) {
		f.set(p, nodes[p])
	}
	gone := slices.Sorted(maps.Keys(f.nodes))
	slices.Reverse(gone)
	for _, p := range gone {
		if nodes[p] == nil && f.nodes[p] != nil {
			f.set(p, nil)
		}
	}
}

// reconnect retries connect, with a growing pause, until it succeeds or ctx ends.
func (f *Follower) reconnect(ctx context.Context) error {
	pause := 100 * time.Millisecond
	for {
		_, err := f.connect(ctx)
		if err == nil {
			f.log.Info("following ZooKeeper again", zap.Int("nodes", len(f.nodes)), zap.String("session", fmt.Sprintf("%#x", f.current().id)))
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrUnreadable) {
			return cmp.Or(ctx.Err(), err)
		}
		f.log.Warn("reconnecting to ZooKeeper", zap.Error(err), zap.Duration("pause", pause))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*2, 5*time.Second)
	}
}

// sweep reads every node's ACL and Stat again (getACL), cfg.Parallel at a time, and reads again
// in full and reports each node whose ACL or Stat differs: what a setACL, which fires no watch,
// changed. Every transaction up to the zxid read before it is then accounted for.
func (f *Follower) sweep(ctx context.Context) error {
	begin := time.Now()
	s := f.current()
	start, err := lastZxid(ctx, s)
	if err != nil {
		return err
	}
	paths := slices.Sorted(maps.Keys(f.nodes))
	var mu sync.Mutex
	var stale []string
	var firstErr error
	next := make(chan string)
	var wg sync.WaitGroup
	for range f.cfg.parallel() {
		wg.Go(func() {
			for p := range next {
				var a encoding.GetACLResponse
				_, err := s.call(ctx, encoding.OpGetACL, &encoding.GetACLRequest{Path: p}, &a)
				mu.Lock()
				switch {
				case isCode(encoding.ErrNoNode)(err):
					stale = append(stale, p)
				case isCode(encoding.ErrNoAuth)(err):
					firstErr = cmp.Or(firstErr, fmt.Errorf("%s: %w: NoAuth with the credentials given", p, ErrUnreadable))
				case err != nil:
					firstErr = cmp.Or(firstErr, fmt.Errorf("%s: %w", p, err))
				case a.Stat != f.nodes[p].Stat || !slices.Equal(a.ACL, f.nodes[p].ACL):
					stale = append(stale, p)
				}
				mu.Unlock()
			}
		})
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	slices.Sort(stale)
	for _, p := range stale {
		if err := f.refresh(ctx, p); err != nil {
			return err
		}
	}
	// Events of transactions up to start are queued and find seen past them: their gaps, if
	// any, were setACLs this sweep has read.
	f.seen = max(f.seen, start)
	f.dirty = false
	f.lastSweep, f.sweepTook = time.Now(), time.Since(begin)
	return nil
}

package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
)

// The watch requests of an etcdSession: the wait for a reply's events (AwaitEvents),
// setWatches' catch-up, addWatch, checkWatches and removeWatches. A read's watch is armed with
// the read, under the replica's lock (readNode). The registry itself is internal/watch; the
// feed that fires it is feed.go.

// The watch requests, and the reads that set watches, keep a watch under the path the request
// names, as ZooKeeper does, while the reads themselves map "" onto the root (znode.NormalizeRead):
// a watch on "" is found by "" (checkWatches, removeWatches, wchp) and no change fires it, since
// changes to the root fire "/"; setWatches' catch-up compares it with the root's state, and the
// events it fires then name "".

func (s *etcdSession) AwaitEvents(ctx context.Context, zxid encoding.Zxid) error {
	if zxid <= 0 || !s.b.watches.Watching(s.watcher) {
		return nil
	}
	return s.b.awaitRevision(ctx, revOf(zxid))
}

// awaitRevision waits until the watch feed has handed over every event of revision rev and
// before (and so the replica has applied them, feed.go). The feed fires a revision's events
// together, so a zxid's revision is what a wait for its events needs (zxid.go).
func (b *Store) awaitRevision(ctx context.Context, rev int64) error {
	asked := false
	for {
		if revOf(b.watches.ProgressZxid()) >= rev {
			return nil // without the channel a wait needs
		}
		progress, moved := b.watches.Progress()
		if revOf(progress) >= rev {
			return nil
		}
		t := time.NewTimer(progressRequestDelay)
		select {
		case <-moved:
			t.Stop()
		case <-t.C:
			if !asked {
				// Revisions made outside the prefix produce no event; etcd's progress
				// notification tells the feed it has seen everything up to now.
				asked = true
				if err := b.requestProgress(ctx); err != nil && !errors.Is(err, context.Canceled) {
					return fmt.Errorf("request watch progress: %w", err)
				}
			}
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// watchList is one watch list of a setWatches request; nil is a null list.
type watchList struct {
	kind  watch.Kind
	paths []string
}

// setWatches re-arms the lists in the request's order, as ZooKeeper does: the standard watches
// with catch-up from rel (events with zxid -1), the persistent ones from now on. rel compares
// with the Stats as they show (nodeKeys.statZxids): after a migration's cutover, a client's zxid
// from ZooKeeper with ZooKeeper's zxids, one zetcd gave out with zetcd's own, above them.
// ZooKeeper walks the lists in order and fails on a null one with MarshallingError, keeping what the lists
// before it set; so does this. The reply carries etcd's current revision, which is also where
// the persistent watches are armed: the feed's progress may lag it.
func (s *etcdSession) setWatches(ctx context.Context, rel encoding.Zxid, lists []watchList) (encoding.Zxid, error) {
	var result error
	if i := slices.IndexFunc(lists, func(l watchList) bool { return l.paths == nil }); i >= 0 {
		lists, result = lists[:i], encoding.ErrMarshallingError
	}
	rev, err := s.armRevision(ctx)
	if err != nil {
		return s.etcdFailure("setWatches", "", err)
	}
	var regs []watch.Registration
	for _, l := range lists {
		if l.kind.OneShot() {
			for _, p := range l.paths {
				regs = append(regs, watch.Registration{Watcher: s.watcher, Kind: l.kind, Path: p, Since: rel})
			}
		}
	}
	if err := s.b.catchUp(ctx, regs, -1, rev); err != nil {
		return s.etcdFailure("setWatches", "", err)
	}
	for _, l := range lists {
		if !l.kind.OneShot() {
			for _, p := range l.paths {
				s.b.watches.Register(s.watcher, l.kind, p, s.b.tree.stateZxid(rev))
			}
		}
	}
	return s.zxid(rev), result
}

// armRevision is the revision a watch set now is armed at: etcd's current one (currentRevision,
// one round trip). A read-only session, cut off from etcd, arms at the replica's, the newest
// state it is answered from.
func (s *etcdSession) armRevision(ctx context.Context) (int64, error) {
	if s.readOnly {
		return s.b.tree.revision(), nil
	}
	return s.b.currentRevision(ctx)
}

func (s *etcdSession) SetWatches(ctx context.Context, req *encoding.SetWatches) (encoding.Zxid, error) {
	return s.setWatches(ctx, req.RelativeZxid, []watchList{
		{watch.Data, req.DataWatches}, {watch.Exist, req.ExistWatches}, {watch.Child, req.ChildWatches},
	})
}

func (s *etcdSession) SetWatches2(ctx context.Context, req *encoding.SetWatches2) (encoding.Zxid, error) {
	return s.setWatches(ctx, req.RelativeZxid, []watchList{
		{watch.Data, req.DataWatches}, {watch.Exist, req.ExistWatches}, {watch.Child, req.ChildWatches},
		{watch.Persistent, req.PersistentWatches}, {watch.PersistentRecursive, req.PersistentRecursiveWatches},
	})
}

// AddWatch arms a persistent or persistent-recursive watch; the node need not exist. It takes
// one etcd round trip to learn the current revision: arming at the feed's progress instead would
// let a change another client was already answered about fire the new watch.
func (s *etcdSession) AddWatch(ctx context.Context, req *encoding.AddWatchRequest) (encoding.Zxid, error) {
	kind := watch.Persistent
	switch req.Mode {
	case encoding.AddWatchPersistent:
	case encoding.AddWatchPersistentRecursive:
		kind = watch.PersistentRecursive
	default:
		// ZooKeeper's AddWatchMode.fromValue refuses it while decoding the request.
		return s.zxid(0), encoding.ErrMarshallingError
	}
	rev, err := s.armRevision(ctx)
	if err != nil {
		return s.etcdFailure("addWatch", req.Path, err)
	}
	s.b.watches.Register(s.watcher, kind, req.Path, s.b.tree.stateZxid(rev))
	return s.zxid(rev), nil
}

// watchKindsOf maps a checkWatches/removeWatches WatcherType onto the tables it covers
// (WatcherType, WatchManager).
func watchKindsOf(t encoding.WatcherType) ([]watch.Kind, bool) {
	switch t {
	case encoding.WatcherChildren:
		return []watch.Kind{watch.Child}, true
	case encoding.WatcherData:
		return []watch.Kind{watch.Data, watch.Exist}, true
	case encoding.WatcherAny:
		return []watch.Kind{watch.Data, watch.Exist, watch.Child, watch.Persistent, watch.PersistentRecursive}, true
	case encoding.WatcherPersistent:
		return []watch.Kind{watch.Persistent}, true
	case encoding.WatcherPersistentRecursive:
		return []watch.Kind{watch.PersistentRecursive}, true
	}
	return nil, false
}

func (s *etcdSession) checkOrRemove(path string, t encoding.WatcherType, dryRun bool) (encoding.Zxid, error) {
	kinds, ok := watchKindsOf(t)
	if !ok {
		// ZooKeeper's WatcherType.fromInt refuses it while decoding the request.
		return s.zxid(0), encoding.ErrMarshallingError
	}
	if !s.b.watches.RemoveKinds(s.watcher, path, kinds, dryRun) {
		return s.zxid(0), encoding.ErrNoWatcher
	}
	return s.zxid(0), nil
}

func (s *etcdSession) CheckWatches(ctx context.Context, req *encoding.CheckWatchesRequest) (encoding.Zxid, error) {
	return s.checkOrRemove(req.Path, req.Type, true)
}

func (s *etcdSession) RemoveWatches(ctx context.Context, req *encoding.RemoveWatchesRequest) (encoding.Zxid, error) {
	return s.checkOrRemove(req.Path, req.Type, false)
}

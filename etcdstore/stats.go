package etcdstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/zetcd"
)

// The Store's StatsSource: the replica's counters, no etcd request (replica.go).

var _ zetcd.StatsSource = (*Store)(nil)

// Stats counts the znodes and the sessions (of every zetcd process), from the replica once it
// has every write this process acknowledged. While it cannot get there (etcd unreachable, the
// feed restarting), or the feed has heard nothing from etcd for feedStall (cut off: the counts
// may be stale by any amount), it fails with ErrNotServing, and the four-letter words answer as
// a ZooKeeper server that is not serving, as a follower without a leader does.
func (b *Store) Stats(ctx context.Context) (zetcd.BackendStats, error) {
	if err := b.awaitCurrent(ctx); err != nil {
		return zetcd.BackendStats{}, fmt.Errorf("stats: %w", err)
	}
	return b.tree.backendStats(), nil
}

// TreeStats is Stats with the data size and every session's ephemeral nodes.
func (b *Store) TreeStats(ctx context.Context) (zetcd.TreeStats, error) {
	if err := b.awaitCurrent(ctx); err != nil {
		return zetcd.TreeStats{}, fmt.Errorf("tree stats: %w", err)
	}
	ts := b.tree.stats()
	// Paths within a session read better sorted.
	for _, paths := range ts.Ephemerals {
		sort.Strings(paths)
	}
	return ts, nil
}

// awaitCurrent waits for the replica to reach every write this process acknowledged, and fails
// with ErrNotServing if it does not or if the feed has heard nothing from etcd for feedStall.
func (b *Store) awaitCurrent(ctx context.Context) error {
	if quiet := time.Since(time.Unix(0, b.feedHeard.Load())); quiet > feedStall {
		return fmt.Errorf("the watch feed has heard nothing from etcd for %v: %w", quiet.Round(time.Millisecond), zetcd.ErrNotServing)
	}
	return b.awaitFloor(ctx, 0)
}

// Watches lists the watches of every connection of this process.
func (b *Store) Watches() []zetcd.WatchInfo {
	ws := b.watches.List()
	out := make([]zetcd.WatchInfo, len(ws))
	for i, w := range ws {
		out[i] = zetcd.WatchInfo{Session: w.Session, Path: w.Path, Kind: watchKindNames[w.Kind]}
	}
	return out
}

// watchKindNames maps the registry's kinds onto the exported names.
var watchKindNames = [watch.NumKinds]zetcd.WatchKind{
	watch.Data:                zetcd.WatchData,
	watch.Exist:               zetcd.WatchExist,
	watch.Child:               zetcd.WatchChild,
	watch.Persistent:          zetcd.WatchPersistent,
	watch.PersistentRecursive: zetcd.WatchPersistentRecursive,
}

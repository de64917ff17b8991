package etcdstore

import (
	"context"
	"errors"
	"sort"

	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/zetcd"
)

// The Store's StatsSource: the replica's counters, no etcd request (replica.go).

var _ zetcd.StatsSource = (*Store)(nil)

// errStatsBehind is what the stats answer while the replica cannot reach what this process has
// acknowledged (etcd unreachable, the feed restarting): the four-letter words then answer as a
// server that is not serving.
var errStatsBehind = errors.New("zetcd: stats: the replica of the tree is behind etcd")

// Stats counts the znodes and the sessions (of every zetcd process), from the replica once it
// has every write this process acknowledged.
func (b *Store) Stats(ctx context.Context) (zetcd.BackendStats, error) {
	if !b.treeReached(ctx, 0) {
		return zetcd.BackendStats{}, errStatsBehind
	}
	return b.tree.backendStats(), nil
}

// TreeStats is Stats with the data size and every session's ephemeral nodes.
func (b *Store) TreeStats(ctx context.Context) (zetcd.TreeStats, error) {
	if !b.treeReached(ctx, 0) {
		return zetcd.TreeStats{}, errStatsBehind
	}
	ts := b.tree.stats()
	// Paths within a session read better sorted.
	for _, paths := range ts.Ephemerals {
		sort.Strings(paths)
	}
	return ts, nil
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

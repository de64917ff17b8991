package zetcd

import (
	"context"
	"sort"

	"github.com/zetcd/zetcd/encoding"
)

// StatsSource is implemented by a Backend that can report what ZooKeeper's four-letter words and
// zetcd's metrics show about the tree, the sessions and the watches. A Server asks for it with
// statsSourceOf; without one, those numbers read as zero.
type StatsSource interface {
	// Stats reports the numbers that cost one bounded backend request (count-only ranges, no
	// data transferred).
	Stats(ctx context.Context) (BackendStats, error)
	// TreeStats reads the whole tree once (ephemeral nodes, data size). It is for the commands
	// that need it (mntr, dump), never for a hot path.
	TreeStats(ctx context.Context) (TreeStats, error)
	// Watches lists every watch registered in this process, from memory.
	Watches() []WatchInfo
}

// BackendStats are a backend's cheap numbers.
type BackendStats struct {
	// Zxid is the newest zxid of the backend (etcd's revision).
	Zxid encoding.Zxid
	// NodeCount counts the znodes as ZooKeeper's DataTree does: one more than there are, since
	// it holds the root under both "" and "/".
	NodeCount int64
	// Sessions counts the sessions in the backend, whichever zetcd process serves them
	// (ZooKeeper's global sessions).
	Sessions int64
}

// TreeStats are the numbers read from the whole tree at one zxid.
type TreeStats struct {
	Zxid      encoding.Zxid
	NodeCount int64 // as BackendStats.NodeCount
	// Ephemerals lists the ephemeral nodes of every session that has any, paths sorted.
	Ephemerals map[encoding.SessionID][]string
	// EphemeralCount is the number of paths in Ephemerals.
	EphemeralCount int64
	// ApproximateDataSize is ZooKeeper's approximate data size: the length of every node's
	// path plus the length of its data.
	ApproximateDataSize int64
}

// WatchKind names the kind of a watch, as zetcd's metrics label it.
type WatchKind string

const (
	WatchData                WatchKind = "data"                // getData, or exists on a present node
	WatchExist               WatchKind = "exist"               // exists on an absent node
	WatchChild               WatchKind = "child"               // getChildren, getChildren2
	WatchPersistent          WatchKind = "persistent"          // addWatch mode 0
	WatchPersistentRecursive WatchKind = "persistentRecursive" // addWatch mode 1
)

// WatchKinds lists every WatchKind.
var WatchKinds = []WatchKind{WatchData, WatchExist, WatchChild, WatchPersistent, WatchPersistentRecursive}

// WatchInfo is one registered watch.
type WatchInfo struct {
	Session encoding.SessionID
	Path    string
	Kind    WatchKind
}

// unwrapper is implemented by Backend decorators, so that the Server can find the StatsSource
// beneath them.
type unwrapper interface {
	Unwrap() Backend
}

// statsSourceOf returns the StatsSource for b: cfg.Stats if set, else the first Backend that
// implements StatsSource down b's chain of decorators (Unwrap).
func statsSourceOf(cfg Config, b Backend) (StatsSource, bool) {
	if cfg.Stats != nil {
		return cfg.Stats, true
	}
	for b != nil {
		if s, ok := b.(StatsSource); ok {
			return s, true
		}
		u, ok := b.(unwrapper)
		if !ok {
			return nil, false
		}
		b = u.Unwrap()
	}
	return nil, false
}

// watchSummary is what the four-letter words tell of the watches. ZooKeeper keeps two
// watch tables: data watches (getData, exists, persistent and persistent-recursive watches)
// and child watches (getChildren, persistent watches: a persistent watch is in both). Within a
// table a connection has at most one watch per path. wchs, wchc and wchp show the data table
// only; zk_watch_count counts both.
type watchSummary struct {
	byPath    map[string][]encoding.SessionID // data table: path → sessions, sorted
	bySession map[encoding.SessionID][]string // data table: session → paths, sorted
	dataCount int                             // entries of the data table
	total     int                             // entries of both tables (zk_watch_count)
}

func summarizeWatches(ws []WatchInfo) watchSummary {
	type entry struct {
		s encoding.SessionID
		p string
	}
	data := map[entry]bool{}
	child := map[entry]bool{}
	for _, w := range ws {
		e := entry{w.Session, w.Path}
		switch w.Kind {
		case WatchData, WatchExist, WatchPersistentRecursive:
			data[e] = true
		case WatchChild:
			child[e] = true
		case WatchPersistent:
			data[e] = true
			child[e] = true
		}
	}
	sum := watchSummary{
		byPath:    map[string][]encoding.SessionID{},
		bySession: map[encoding.SessionID][]string{},
		dataCount: len(data),
		total:     len(data) + len(child),
	}
	for e := range data {
		sum.byPath[e.p] = append(sum.byPath[e.p], e.s)
		sum.bySession[e.s] = append(sum.bySession[e.s], e.p)
	}
	for _, ids := range sum.byPath {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	for _, paths := range sum.bySession {
		sort.Strings(paths)
	}
	return sum
}

// sortedSessions returns the keys of m in ascending order.
func sortedSessions[V any](m map[encoding.SessionID]V) []encoding.SessionID {
	ids := make([]encoding.SessionID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

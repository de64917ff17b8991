package zetcd

import (
	"sort"

	"github.com/zetcd/zetcd/encoding"
)

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

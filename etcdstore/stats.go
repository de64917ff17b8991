package etcdstore

import (
	"context"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/zetcd"
)

// The Store's StatsSource. Stats is one Txn of two count-only ranges (etcd counts in its index
// and sends a number), labelled "stats"; TreeStats reads the replica.

var _ zetcd.StatsSource = (*Store)(nil)

// dataKeysPrefix is the common prefix of every data key (keys.go: "P n/<d><path>"), and
// sessionKeysPrefix of every session key ("P s/<id>").
func (k keySchema) dataKeysPrefix() string    { return k.prefix + "n/" }
func (k keySchema) sessionKeysPrefix() string { return k.prefix + "s/" }

// Stats counts the znodes and the sessions in one Txn.
func (b *Store) Stats(ctx context.Context) (zetcd.BackendStats, error) {
	r, err := b.kv.Txn(zetcd.WithOpLabel(ctx, zetcd.OpLabelStats)).Then(
		clientv3.OpGet(b.keys.dataKeysPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(b.keys.sessionKeysPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return zetcd.BackendStats{}, fmt.Errorf("zetcd: stats: %w", err)
	}
	return zetcd.BackendStats{
		Zxid:      encoding.Zxid(r.Header.Revision),
		NodeCount: rangeCount(r, 0) + 1,
		Sessions:  rangeCount(r, 1),
	}, nil
}

// TreeStats reads the replica, once it has every write this process acknowledged: no etcd
// request.
func (b *Store) TreeStats(ctx context.Context) (zetcd.TreeStats, error) {
	b.treeReached(ctx, 0)
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

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

// The Store's StatsSource. Its etcd requests are bounded: Stats is one Txn of two
// count-only ranges (etcd counts in its index and sends a number); TreeStats reads the data
// keys once, in pages, at one revision. Every round trip is labelled "stats".

var _ zetcd.StatsSource = (*Store)(nil)

// treeScanPage is how many data keys one TreeStats request reads. Values are read too (for the
// data size), so a page is at most treeScanPage × the largest znode.
const treeScanPage = 256

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

// TreeStats reads every data key, in pages of treeScanPage at the revision of the first page.
func (b *Store) TreeStats(ctx context.Context) (zetcd.TreeStats, error) {
	ctx = zetcd.WithOpLabel(ctx, zetcd.OpLabelStats)
	prefix := b.keys.dataKeysPrefix()
	end := clientv3.GetPrefixRangeEnd(prefix)
	ts := zetcd.TreeStats{NodeCount: 1, Ephemerals: map[encoding.SessionID][]string{}}
	var rev int64
	for from := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(treeScanPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := b.kv.Get(ctx, from, opts...)
		if err != nil {
			return zetcd.TreeStats{}, fmt.Errorf("zetcd: tree stats: %w", err)
		}
		if rev == 0 {
			rev = r.Header.Revision
		}
		for _, kv := range r.Kvs {
			path, ok := b.keys.pathOfDataKey(string(kv.Key))
			if !ok {
				continue
			}
			ts.NodeCount++
			ts.ApproximateDataSize += int64(len(path) + max(0, len(kv.Value)-dataHeaderLen))
			if kv.Lease != 0 {
				id := encoding.SessionID(kv.Lease)
				ts.Ephemerals[id] = append(ts.Ephemerals[id], path)
				ts.EphemeralCount++
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			break
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
	ts.Zxid = encoding.Zxid(rev)
	// Keys sort by depth first; paths within a session read better sorted by path.
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

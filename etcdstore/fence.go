package etcdstore

import (
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The fence key (keys.go): one compare that stands for every node a batch read, while this is
// the only zetcd writing to the tree (Config.FenceGuards).

// fenceOp is the put of the fence key (keys.go) that goes with every transaction that puts or
// deletes data or meta keys.
func (b *Store) fenceOp() clientv3.Op { return b.fenceWrite().op() }

func (b *Store) fenceWrite() txnWrite {
	return txnWrite{key: b.keys.fence(), value: strconv.FormatUint(b.process.id, 16)}
}

// fenceHoldoff is how long the committer guards znode by znode after a batch failed its fence
// guard: another writer is at work (another zetcd on this etcd; this one's setACL, session ends
// or reaper), with whose writes a fence conflicts though they touch other znodes.
const fenceHoldoff = 5 * time.Second

// fenceGuardsNow reports whether the committer's next batch is guarded by the fence. A batch
// that fails its fence guard is checked again and guarded znode by znode (commitBatch), so a
// fence costs at most one transaction more, and none during fenceHoldoff after it did.
func (b *Store) fenceGuardsNow() bool {
	return b.fenceGuards.Load() && time.Now().UnixNano() >= b.fenceResumes.Load()
}

// fenceConflict records that a batch failed its fence guard.
func (b *Store) fenceConflict() {
	b.fenceResumes.Store(time.Now().Add(fenceHoldoff).UnixNano())
}

// fenceWatch turns fence guards off for good when the revision rev puts a data or meta key
// without the fence key: a writer that does not put it (another program, or a zetcd that does
// not know the fence key) would otherwise go unseen by the guards. A revision of deletes alone
// is an expiring lease's, which the guards cover by the znodes' own compares.
func (b *Store) fenceWatch(rev int64, evs []*clientv3.Event) {
	if !b.fenceGuards.Load() {
		return
	}
	fence, unfenced := b.keys.fence(), ""
	for _, ev := range evs {
		if string(ev.Kv.Key) == fence { // compared without a copy
			return
		}
		if ev.Type != mvccpb.PUT || unfenced != "" {
			continue
		}
		key := string(ev.Kv.Key)
		if _, ok := b.keys.pathOfDataKey(key); ok {
			unfenced = key
		} else if _, _, ok := b.keys.pathOfMetaKey(key); ok {
			unfenced = key
		}
	}
	if unfenced != "" {
		b.fenceGuards.Store(false)
		b.log.Warn("a znode was written without zetcd's fence key: write batches are guarded znode by znode from now on",
			zap.Int64("revision", rev), zap.String("key", unfenced))
	}
}

package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

// The replica is this process's copy of the tree, as a ZooKeeper follower keeps one: every
// znode's keys (data key and meta keys, keys.go) with their values decoded (replicaNode, a
// compact nodeKeys), and its children's names, at one revision. It is loaded at the revision
// the watch feed starts after (paginated: a large tree is never one huge response), then every
// revision the feed receives is applied to it before the feed fires that revision's watches and
// advances its progress, so the replica's revision is the feed's progress. The committer applies
// its own revisions ahead of the feed when it can (own.go). It is the only copy of the tree
// zetcd reads: reads are answered from it (read.go) once it has reached what the session must
// not go behind, and not served while it cannot get there (ErrNotServing); a Stat is derived
// from the node's keys by nodeKeys.node alone. Writes are checked on it (multi.go, commit.go),
// setWatches catches up on it (feed.go), the reaper picks its candidates on it (reaper.go), and
// the four-letter words read its counters.
//
// Lost history (a compacted watch) reloads the whole replica at etcd's current revision.

// replicaPageSize is how many keys one range of the load returns at most (about 2.5 MB of
// znodes of 128 bytes). etcd counts the rest of the range for each page: see load.
const replicaPageSize = 10000

// replica is the in-memory tree. mu guards everything; the feed goroutine writes (apply,
// advance, load), readers read under RLock.
type replica struct {
	keys     keySchema
	log      *zap.Logger
	pageSize int // keys per range of a load: replicaPageSize, fewer in tests

	mu  sync.RWMutex
	rev int64 // the last revision applied
	t   *tree
	// batches holds the index of the last write of the revisions applied since batchesFrom
	// that hold several writes (commit.go puts it in the error key's value): the zxid of the
	// state at such a revision (stateZxid). At most maxBatchesKept, the oldest forgotten first
	// (batchOrder).
	batches     map[int64]uint16
	batchOrder  []int64
	batchesFrom int64
	// zxid is the zxid of the state at rev (stateZxid), stored whenever rev moves (setRev), so
	// that a read's reply, almost always at rev, takes its zxid without the lock.
	zxid atomic.Int64
	// migrated is the table of a migration's cutover, by which Stats show ZooKeeper's zxids
	// (nodeKeys.statZxids); nil without one. Set before the replica serves, never changed.
	migrated *zxidTable
	// alterOwn, set by tests only, changes the events applyOwn makes, as a bug would.
	alterOwn func([]*clientv3.Event) []*clientv3.Event
}

// setRev records that the replica is at revision rev; r.mu held.
func (r *replica) setRev(rev int64) {
	r.rev = rev
	r.zxid.Store(int64(zxidOf(rev, int(r.batches[rev]))))
}

// maxBatchesKept bounds the revisions whose last write index the replica remembers.
const maxBatchesKept = 1 << 14

// stateZxid is the zxid of the state at revision rev, as ZooKeeper answers its
// lastProcessedZxid: the zxid of the last write of rev. For a revision the replica has not
// applied, or has forgotten, it is zxidAt(rev), which follows every write of rev all the same.
func (r *replica) stateZxid(rev int64) encoding.Zxid {
	if z := encoding.Zxid(r.zxid.Load()); revOf(z) == rev {
		return z
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if rev <= 0 || rev > r.rev || rev < r.batchesFrom {
		return zxidAt(rev)
	}
	return zxidOf(rev, int(r.batches[rev]))
}

// recordBatch remembers that the last write of revision rev is numbered last; r.mu held.
func (r *replica) recordBatch(rev int64, last uint16) {
	if last == 0 {
		return
	}
	if r.batches == nil {
		r.batches = map[int64]uint16{}
	}
	r.batches[rev] = last
	r.batchOrder = append(r.batchOrder, rev)
	if len(r.batchOrder) > maxBatchesKept {
		oldest := r.batchOrder[0]
		delete(r.batches, oldest)
		r.batchOrder = r.batchOrder[1:]
		r.batchesFrom = oldest + 1
	}
}

// tree is the replica's content: apply changes it in place, load builds a new one.
type tree struct {
	nodes map[string]*replicaNode
	acls  aclTable // the ACL lists the nodes share
	// Kept by every change, for the four-letter words and getEphemerals: no scan of the tree.
	sessions   int64                         // the session keys: the sessions of every zetcd process
	count      int64                         // the nodes that exist
	dataSize   int64                         // ZooKeeper's approximate data size: every node's path and data length
	ephemerals map[int64]map[string]struct{} // lease (session) → the paths of its ephemeral nodes
	quotas     quotaSet                      // the quota'd paths: those with a limits node (quota.go)
	// loading is the parent whose children a load is putting (loadByParent), so that each
	// child finds it without a lookup; empty outside a load, during which nothing is deleted.
	loading struct {
		path string
		node *replicaNode
	}
}

// newTree returns an empty tree with room for about size nodes.
func newTree(size int) *tree {
	return &tree{nodes: make(map[string]*replicaNode, size), ephemerals: map[int64]map[string]struct{}{}}
}

func newReplica(keys keySchema, log *zap.Logger) *replica {
	return &replica{keys: keys, log: log, pageSize: replicaPageSize, t: newTree(0)}
}

// load reads every data, meta and session key under the prefix at revision rev, in pages, and
// replaces the replica's content with them.
//
// etcd answers each page of a range with the number of keys left in the whole range, which it
// counts by walking them: paging through one range of n keys costs it about n²/(2 × pageSize)
// steps (two and a half minutes for a million znodes in pages of 1,000). So the tree is read
// parent by parent, breadth first: the data keys and then the meta keys of one parent's
// children are one range each (keys.go: the keys of a node's children, and nothing deeper,
// share a prefix), and a node whose meta keys include its child-create key (written with every
// child) is expanded in turn; the system nodes, written without one, always are. Each key is
// then counted once or twice. If the nodes read that way are not all the data keys etcd holds at
// rev (a key layout this load does not expect), the whole prefix is read again in plain pages.
func (r *replica) load(ctx context.Context, kv clientv3.KV, rev int64) error {
	total, err := countKeys(ctx, kv, r.keys.dataKeysPrefix(), rev)
	var t *tree
	if err == nil {
		t, err = r.loadByParent(ctx, kv, rev, total)
	}
	if err == nil && total != t.count {
		r.log.Warn("replica: loading parent by parent missed data keys; reading them all",
			zap.Int64("read", t.count), zap.Int64("etcd", total))
		t, err = r.loadAll(ctx, kv, rev, total)
	}
	if err != nil {
		return fmt.Errorf("load the tree at revision %d: %w", rev, err)
	}
	last, err := lastWriteIndex(ctx, kv, r.keys, rev)
	if err != nil {
		return fmt.Errorf("load the tree at revision %d: %w", rev, err)
	}
	r.mu.Lock()
	r.t = t
	clear(r.batches)
	r.batchOrder, r.batchesFrom = r.batchOrder[:0], rev
	r.recordBatch(rev, last)
	r.setRev(rev)
	r.mu.Unlock()
	return nil
}

// lastWriteIndex reads the index of the last write of revision rev from the error key, within
// replicaPageTimeout whatever ctx's deadline: it comes at the end of a load.
func lastWriteIndex(ctx context.Context, kv clientv3.KV, k keySchema, rev int64) (uint16, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replicaPageTimeout)
	defer cancel()
	r, err := kv.Get(ctx, k.errorKey(), clientv3.WithRev(rev))
	if err != nil || len(r.Kvs) == 0 || r.Kvs[0].ModRevision != rev {
		return 0, err
	}
	return decodeIndexValue(r.Kvs[0].Value)
}

// loadByParent reads the tree breadth first (load). The ranges of the next parents in the
// queue are read while one parent's keys go into the tree (readAhead of them at once): etcd's
// side of a page and the tree's take about as long each, and the tree is built on one
// goroutine. size is the number of data keys etcd holds: the tree's map is made that large
// at once, not grown (and rehashed) a doubling at a time.
func (r *replica) loadByParent(ctx context.Context, kv clientv3.KV, rev, size int64) (*tree, error) {
	t := newTree(int(size))
	put := func(kv *mvccpb.KeyValue) { t.putLoaded(r.keys, kv) }
	for _, p := range []string{r.keys.data("/"), r.keys.metaPrefix("/"), r.keys.sessionKeysPrefix()} {
		if err := rangePages(ctx, kv, p, rev, r.pageSize, put); err != nil {
			return nil, err
		}
	}
	// stop ends the reads ahead when the load ends early; ctx's deadline does not (rangePages).
	stop, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var queue []*parentRead
	queued := map[string]bool{}
	enqueue := func(p string) {
		if !queued[p] {
			queued[p] = true
			queue = append(queue, newParentRead(p))
		}
	}
	for _, p := range znode.SystemPaths {
		enqueue(p)
	}
	started := 0
	for i := 0; i < len(queue); i++ {
		for ; started < len(queue) && started <= i+readAhead; started++ {
			go queue[started].read(ctx, stop, kv, r.keys, rev, r.pageSize)
		}
		pr := queue[i]
		t.loading.path, t.loading.node = pr.path, t.nodes[pr.path]
		for page := range pr.pages {
			for _, kv := range page {
				t.putLoaded(r.keys, kv)
				if child, name, ok := r.keys.pathOfMetaKey(keyView(kv)); ok && name == 'c' {
					enqueue(strings.Clone(child))
				}
			}
		}
		if pr.err != nil {
			return nil, pr.err
		}
		queue[i] = nil // its keys are in the tree
	}
	t.loading.path, t.loading.node = "", nil
	return t, nil
}

// readAhead is how many parents' ranges loadByParent reads ahead of the one it puts in the tree.
const readAhead = 4

// parentRead reads the data keys and then the meta keys of one parent's children, a page at a
// time into pages, which it closes once done (err set if it failed). A page waits in pages until
// taken: the keys read ahead are a few pages, whatever the number of children.
type parentRead struct {
	path  string
	pages chan []*mvccpb.KeyValue
	err   error
}

func newParentRead(path string) *parentRead {
	return &parentRead{path: path, pages: make(chan []*mvccpb.KeyValue, 1)}
}

// read reads the pages; ctx's cancellation or stop's ends it.
func (pr *parentRead) read(ctx, stop context.Context, kv clientv3.KV, k keySchema, rev int64, pageSize int) {
	defer close(pr.pages)
	send := func(page []*mvccpb.KeyValue) bool {
		select {
		case pr.pages <- page:
			return true
		case <-stop.Done():
			return false
		}
	}
	for _, prefix := range []string{k.childrenPrefix(pr.path), k.childrenMetaPrefix(pr.path)} {
		if pr.err = forEachPage(ctx, kv, prefix, rev, pageSize, send); pr.err != nil {
			return
		}
	}
}

// loadAll reads every data, meta and session key in plain pages of the whole prefix.
func (r *replica) loadAll(ctx context.Context, kv clientv3.KV, rev, size int64) (*tree, error) {
	t := newTree(int(size))
	for _, prefix := range []string{r.keys.dataKeysPrefix(), r.keys.prefix + "m/", r.keys.sessionKeysPrefix()} {
		err := rangePages(ctx, kv, prefix, rev, r.pageSize, func(kv *mvccpb.KeyValue) {
			t.putLoaded(r.keys, kv)
		})
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// countKeys counts the keys with the prefix at revision rev.
func countKeys(ctx context.Context, kv clientv3.KV, prefix string, rev int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replicaPageTimeout)
	defer cancel()
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// replicaPageTimeout bounds each page of a load. A load as a whole is not bounded by its
// caller's deadline (a start's): a large tree takes as long as its pages do, and a load fails
// only when one page cannot be read.
const replicaPageTimeout = 30 * time.Second

// rangePages calls f for every key with the prefix at revision rev, in key order (forEachPage).
func rangePages(ctx context.Context, kv clientv3.KV, prefix string, rev int64, pageSize int, f func(*mvccpb.KeyValue)) error {
	return forEachPage(ctx, kv, prefix, rev, pageSize, func(page []*mvccpb.KeyValue) bool {
		for _, kv := range page {
			f(kv)
		}
		return true
	})
}

// errPagesStopped is forEachPage's error when f stopped it.
var errPagesStopped = errors.New("zetcd: range stopped")

// forEachPage calls f with the keys with the prefix at revision rev, in key order, one page of
// pageSize keys per request, each within replicaPageTimeout, until f returns false; ctx's
// cancellation, not its deadline, stops it between pages.
func forEachPage(ctx context.Context, kv clientv3.KV, prefix string, rev int64, pageSize int, f func([]*mvccpb.KeyValue) bool) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		pageCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replicaPageTimeout)
		resp, err := kv.Get(pageCtx, from, clientv3.WithRange(end), clientv3.WithRev(rev),
			clientv3.WithLimit(int64(pageSize)), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		cancel()
		if err != nil {
			return err
		}
		if len(resp.Kvs) > 0 && !f(resp.Kvs) {
			return errPagesStopped
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// aclsBefore are the ACLs of the nodes whose data or ACL key a revision puts or deletes, as they
// were before it (nil for a node that did not exist): what the watch feed needs of a node the
// revision deletes, or deletes and creates again, once the replica has applied it.
type aclsBefore map[string][]encoding.ACL

// apply applies the events of one revision (all of them, as etcd delivers them together), and
// returns the ACLs the revision replaces.
func (r *replica) apply(rev int64, evs []*clientv3.Event) aclsBefore {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applyLocked(rev, evs)
}

// applyLocked is apply with r.mu held.
func (r *replica) applyLocked(rev int64, evs []*clientv3.Event) aclsBefore {
	var before aclsBefore
	for _, ev := range evs {
		path, ok := aclChanges(r.keys, ev)
		if !ok {
			continue
		}
		if before == nil {
			before = aclsBefore{}
		}
		if _, seen := before[path]; !seen {
			before[path] = nil
			if n := r.t.nodes[path]; n != nil && (n.exists() || n.keys().acl.mod != 0) {
				before[path] = n.aclList()
			}
		}
	}
	errorKey := r.keys.errorKey()
	for _, ev := range evs {
		switch {
		case ev.Type == mvccpb.DELETE:
			r.t.delete(r.keys, string(ev.Kv.Key))
		case string(ev.Kv.Key) == errorKey:
			if last, err := decodeIndexValue(ev.Kv.Value); err == nil {
				r.recordBatch(rev, last)
			}
		default:
			r.t.put(r.keys, ev.Kv)
		}
	}
	r.setRev(max(r.rev, rev))
	return before
}

// aclChanges reports whether the event may change the ACL of the node at path: a delete of its
// data key, or a put or delete of its ACL key or offsets key (a node created again by the
// revision that deleted it puts its offsets key, keys.go). A setData's put of the data key
// leaves the ACL as it was.
func aclChanges(k keySchema, ev *clientv3.Event) (path string, ok bool) {
	if n := len(ev.Kv.Key); ev.Type == mvccpb.PUT && (n < 2 || ev.Kv.Key[n-2] != 0 || ev.Kv.Key[n-1] != 'a' && ev.Kv.Key[n-1] != 'o') {
		return "", false // not a meta key's put (paths hold no NUL), or not the ACL or offsets key's
	}
	key := string(ev.Kv.Key)
	if ev.Type == mvccpb.DELETE {
		if path, ok := k.pathOfDataKey(key); ok {
			return path, true
		}
	}
	path, name, ok := k.pathOfMetaKey(key)
	return path, ok && (name == 'a' || name == 'o')
}

// advance records that etcd has no change under the prefix up to rev (a progress notification).
func (r *replica) advance(rev int64) {
	r.mu.Lock()
	r.setRev(max(r.rev, rev))
	r.mu.Unlock()
}

// revision is the last revision applied, without the lock (every read and every session's
// ReadyToRead asks): setRev stores it, under mu, once the revision's changes are in, so a reader
// that sees it and then takes mu sees them.
func (r *replica) revision() int64 {
	return revOf(encoding.Zxid(r.zxid.Load()))
}

// entry returns the node's entry, creating it. A new entry's path is copied: path may be part
// of an etcd key, which the tree does not keep.
func (t *tree) entry(path string) *replicaNode {
	n, _ := t.entryKey(path)
	return n
}

// entryKey is entry, and for a new entry also the copy of path the tree keeps ("" for an entry
// that was there): a new child's name in its parent's set is the end of that copy, not a copy
// of its own.
func (t *tree) entryKey(path string) (*replicaNode, string) {
	if n := t.nodes[path]; n != nil {
		return n, ""
	}
	n, kept := &replicaNode{}, strings.Clone(path)
	t.nodes[kept] = n
	return n, kept
}

// parentEntry is entry(parent), without a lookup for the parent a load is putting children of.
func (t *tree) parentEntry(parent string) *replicaNode {
	if t.loading.node != nil && parent == t.loading.path {
		return t.loading.node
	}
	return t.entry(parent)
}

// put records a put of a data, meta or session key the watch feed applies; other keys are not
// the tree's.
//
// The tree keeps no part of kv: the strings it keeps of the key are copied (entry, addChild,
// countIn, the quotas) and so is the data (replicaNode.store).
func (t *tree) put(keys keySchema, kv *mvccpb.KeyValue) {
	key := keyView(kv)
	if _, ok := keys.sessionOfKey(key); ok {
		if kv.Version == 1 { // created, not rewritten by a resume elsewhere
			t.sessions++
		}
		return
	}
	if path, ok := keys.pathOfDataKey(key); ok {
		n, kept := t.entryKey(path)
		if n.exists() {
			t.uncount(path, n)
		} else if path != "/" {
			parent, name := splitPath(path)
			if kept != "" {
				_, name = splitPath(kept)
			} else {
				name = strings.Clone(name)
			}
			t.parentEntry(parent).addChild(name)
		}
		n.putData(kv, &t.acls)
		t.countIn(path, n)
		if q, ok := quotaOf(path, quotaLimitNode); ok {
			t.quotas = t.quotas.with(strings.Clone(q))
		}
		return
	}
	if path, name, ok := keys.pathOfMetaKey(key); ok {
		n := t.entry(path)
		t.changeMeta(path, n, name, func() { n.putMeta(name, kv, &t.acls) })
	}
}

// keyView is kv's key as a string without a copy, for a caller that keeps no part of it.
func keyView(kv *mvccpb.KeyValue) string { return unsafe.String(unsafe.SliceData(kv.Key), len(kv.Key)) }

// changeMeta runs change, a put or delete of the node's meta key name, keeping the counters
// right when the key holds the node's data (the stats key).
func (t *tree) changeMeta(path string, n *replicaNode, name byte, change func()) {
	if name != 's' || !n.exists() {
		change()
		return
	}
	t.uncount(path, n)
	change()
	t.countIn(path, n)
}

// putLoaded records a key a load read: a session key counts whatever its version (a session
// resumed since its creation has rewritten it), as each live key is read once.
func (t *tree) putLoaded(keys keySchema, kv *mvccpb.KeyValue) {
	if _, ok := keys.sessionOfKey(keyView(kv)); ok {
		t.sessions++
		return
	}
	t.put(keys, kv)
}

// delete records a delete of a data, meta or session key.
func (t *tree) delete(keys keySchema, key string) {
	if _, ok := keys.sessionOfKey(key); ok {
		t.sessions--
		return
	}
	if path, ok := keys.pathOfDataKey(key); ok {
		n := t.nodes[path]
		if n == nil || !n.exists() {
			return
		}
		t.uncount(path, n)
		n.deleteData()
		t.forgetIfEmpty(path, n)
		if q, ok := quotaOf(path, quotaLimitNode); ok {
			t.quotas = t.quotas.without(q)
		}
		if path != "/" {
			parent, name := splitPath(path)
			if p := t.nodes[parent]; p != nil {
				p.removeChild(name)
				t.forgetIfEmpty(parent, p)
			}
		}
		return
	}
	if path, name, ok := keys.pathOfMetaKey(key); ok {
		if n := t.nodes[path]; n != nil {
			t.changeMeta(path, n, name, func() { n.deleteMeta(name) })
			t.forgetIfEmpty(path, n)
		}
	}
}

func (t *tree) forgetIfEmpty(path string, n *replicaNode) {
	if n.empty() && n.numChildren() == 0 {
		delete(t.nodes, path)
	}
}

// countIn adds the existing node n at path to the counters; uncount takes it out.
func (t *tree) countIn(path string, n *replicaNode) {
	t.count++
	t.dataSize += int64(len(path) + len(n.dataNow()))
	if lease := n.lease; lease != 0 {
		paths := t.ephemerals[lease]
		if paths == nil {
			paths = map[string]struct{}{}
			t.ephemerals[lease] = paths
		}
		paths[strings.Clone(path)] = struct{}{}
	}
}

func (t *tree) uncount(path string, n *replicaNode) {
	t.count--
	t.dataSize -= int64(len(path) + len(n.dataNow()))
	if lease := n.lease; lease != 0 {
		delete(t.ephemerals[lease], path)
		if len(t.ephemerals[lease]) == 0 {
			delete(t.ephemerals, lease)
		}
	}
}

// splitPath splits a path other than "/" into its parent and its last component.
func splitPath(path string) (parent, name string) {
	parent, _ = znode.Parent(path)
	return parent, path[strings.LastIndexByte(path, '/')+1:]
}

// replicaView reads the replica at one revision; it is valid only inside read's callback.
type replicaView struct{ r *replica }

// read calls f with a view of the replica at one revision, under its read lock (f must not
// block), and returns that revision.
func (r *replica) read(f func(v replicaView)) int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f(replicaView{r})
	return r.rev
}

// zxid is the zxid of the state the view reads (replica.stateZxid of its revision).
func (v replicaView) zxid() encoding.Zxid { return encoding.Zxid(v.r.zxid.Load()) }

// nodeAt is the overlay's node for path as the replica holds it, read if the replica is at
// rev; nil if it is not, or if the node's keys do not decode (the overlay then assumes the node
// absent and guards that, and the check after a conflict reads it for real).
func (r *replica) nodeAt(path string, rev int64) *mnode {
	var n *mnode
	r.read(func(v replicaView) {
		if v.r.rev != rev {
			return
		}
		if n = new(mnode); v.overlayNode(n, path) != nil {
			n = nil
		}
	})
	return n
}

// overlayNode makes n the overlay's node for path as the view holds it: read, and absent if
// the tree has no entry for it. err when the node's keys do not decode.
func (v replicaView) overlayNode(n *mnode, path string) error {
	if rn := v.r.t.nodes[path]; rn != nil {
		return n.fromKeys(path, rn.keys(), int64(rn.numChildren()), v.r.migrated)
	}
	*n = mnode{path: path, read: true}
	return nil
}

// node derives the node at path (ok false when it does not exist; err when its keys do not
// decode), and its children's names if childNames. The node's data and ACL list are shared:
// apply replaces, never changes, them; so are its children's names (childSet.names).
func (v replicaView) node(path string, childNames bool) (n node, children []string, ok bool, err error) {
	rn := v.r.t.nodes[path]
	if rn == nil || !rn.exists() {
		return node{}, nil, false, nil
	}
	keys := rn.keys()
	if n, err = keys.node(path, int64(rn.numChildren()), v.r.migrated); err != nil {
		return node{}, nil, true, err
	}
	if childNames {
		children = rn.childNames()
	}
	return n, children, true, nil
}

// acl returns the node's ACL and the revision since which it has been the node's: its ACL key's
// last put, or the node's creation (0 when the node does not exist).
func (v replicaView) acl(path string) ([]encoding.ACL, int64) {
	rn := v.r.t.nodes[path]
	if rn == nil || !rn.exists() {
		return nil, 0
	}
	keys := rn.keys()
	czxid, _, _ := keys.zxids()
	return rn.aclList(), max(keys.acl.mod, revOf(czxid))
}

// descendants counts the nodes below path (not path itself), walking the children lists.
func (v replicaView) descendants(path string) int64 {
	var total int64
	stack := []string{path}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := v.r.t.nodes[p]
		if n == nil {
			continue
		}
		total += int64(n.numChildren())
		n.eachChild(func(c string) { stack = append(stack, childPath(p, c)) })
	}
	return total
}

// subtree counts the nodes at and below path and their data bytes (DataTree.getCounts).
func (v replicaView) subtree(path string) subtreeRead {
	st := subtreeRead{path: path}
	if n := v.r.t.nodes[path]; n != nil {
		st.created = n.create
	}
	stack := []string{path}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := v.r.t.nodes[p]
		if n == nil || !n.exists() {
			continue
		}
		st.count++
		st.bytes += int64(len(n.dataNow()))
		st.deepest = max(st.deepest, depth(p))
		n.eachChild(func(c string) { stack = append(stack, childPath(p, c)) })
	}
	return st
}

// ephemerals lists the paths of the nodes attached to lease, unsorted.
func (v replicaView) ephemerals(lease int64) []string {
	var paths []string
	for p := range v.r.t.ephemerals[lease] {
		paths = append(paths, p)
	}
	return paths
}

// childPath joins a parent's path and a child's name.
func childPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// node reads one node (replicaView.node) and the revision it was read at.
func (r *replica) node(path string, childNames bool) (n node, children []string, rev int64, ok bool, err error) {
	rev = r.read(func(v replicaView) { n, children, ok, err = v.node(path, childNames) })
	return n, children, rev, ok, err
}

// aclAt returns the node's ACL at revision rev if the replica knows it: the node has had that
// ACL since rev or before (the replica has applied everything since, or it would not hold the
// node as it is), and rev is not past what the replica has applied.
func (r *replica) aclAt(path string, rev int64) (acl []encoding.ACL, ok bool) {
	r.read(func(v replicaView) {
		var since int64
		acl, since = v.acl(path)
		ok = since != 0 && since <= rev && rev <= v.r.rev
	})
	return acl, ok
}

// watchedStates returns what the watch registry needs to know of each of paths (watch.State)
// to settle the watches on them, and the revision they were read at.
func (r *replica) watchedStates(paths []string) (map[string]watch.State, int64) {
	states := make(map[string]watch.State, len(paths))
	rev := r.read(func(v replicaView) {
		for _, p := range paths {
			rn := v.r.t.nodes[znode.NormalizeRead(p)]
			if rn == nil || !rn.exists() {
				states[p] = watch.State{}
				continue
			}
			keys := rn.keys()
			z, err := keys.statZxids(p, r.migrated)
			if err != nil {
				// Reads of the node fail with err; its watches fire rather than miss a change.
				z = [3]encoding.Zxid{r.migrated.last, r.migrated.last, r.migrated.last}
			}
			states[p] = watch.State{Exists: true, Czxid: z[0], Mzxid: z[1], Pzxid: z[2], ACL: rn.aclList()}
		}
	})
	return states, rev
}

// backendStats returns the replica's counts of znodes (the root counted twice, as ZooKeeper
// counts it), sessions and ephemeral nodes, and its data size: one look at each session with
// ephemeral nodes, no walk of the tree.
func (r *replica) backendStats() zetcd.BackendStats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st := zetcd.BackendStats{Zxid: encoding.Zxid(r.zxid.Load()), NodeCount: r.t.count + 1, Sessions: r.t.sessions,
		ApproximateDataSize: r.t.dataSize}
	for _, paths := range r.t.ephemerals {
		st.EphemeralCount += int64(len(paths))
	}
	return st
}

// stats returns the replica's counters (the root counted twice, as ZooKeeper counts it) and
// the ephemeral nodes of each session: no walk of the tree.
func (r *replica) stats() zetcd.TreeStats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ts := zetcd.TreeStats{
		Zxid:                encoding.Zxid(r.zxid.Load()),
		NodeCount:           r.t.count + 1,
		ApproximateDataSize: r.t.dataSize,
		Ephemerals:          make(map[encoding.SessionID][]string, len(r.t.ephemerals)),
	}
	for lease, paths := range r.t.ephemerals {
		list := make([]string, 0, len(paths))
		for p := range paths {
			list = append(list, p)
		}
		ts.Ephemerals[encoding.SessionID(lease)] = list
		ts.EphemeralCount += int64(len(list))
	}
	return ts
}

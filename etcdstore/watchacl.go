package etcdstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
)

// ACL enforcement on etcd without an extra round trip (docs/design.md, "Watches"):
//
//   - Reads check the ACL of the node they read, from the replica (or from etcd, with the node).
//   - Creates, deletes, setData, setACL and multis decide on the ACLs of the committer's overlay
//     of the replica (commit.go, multi.go), whose guards pin every node read, ACL keys included.
//   - The watch feed needs a node's ACL at the revision of a change to decide whether its event
//     may be delivered: the replica's, which has applied that revision, or for a node the
//     revision deleted (or deleted and created again), its ACL from before, which the replica
//     returns as it applies the revision (aclsBefore); etcd, read at the revision, for a change
//     older than what the replica holds.

// metaOfKVs decodes the meta (ctime, mode, TTL, ACL) of the existing node at path from its data
// key and its ACL key (nil if absent) as a read returned them.
func metaOfKVs(path string, data, acl *mvccpb.KeyValue) (aclValue, error) {
	var nk nodeKeys
	if acl != nil {
		nk.putMeta('a', acl, nil)
	}
	nk.putData(data, nil)
	if err := nk.decodeErr(); err != nil {
		return aclValue{}, fmt.Errorf("%s: %w", path, err)
	}
	return nk.meta, nil
}

// aclAtChange returns the ACL of path for the watch feed, at revision rev, or just before it if
// src.before: from the ACLs the revision replaced, the replica, else read from etcd. ok is
// false if it cannot be known (the revision is compacted, or etcd fails); the event is then not
// delivered.
func (b *Store) aclAtChange(src aclSource) ([]encoding.ACL, bool) {
	path, rev := src.path, src.rev
	if src.before {
		if acl, replaced := src.replaced[path]; replaced {
			return acl, acl != nil
		}
		// Its ACL just before rev: the replica's if the node has had it since rev-1 or
		// earlier. (A change of the ACL at rev is in replaced; this does not rest on it.)
		rev--
	}
	if acl, ok := b.tree.aclAt(path, rev); ok {
		return acl, true
	}
	ctx, cancel := context.WithTimeout(b.bgCtx, 10*time.Second)
	defer cancel()
	r, err := b.kv.Txn(ctx).Then(
		clientv3.OpGet(b.keys.data(path), clientv3.WithRev(rev)),
		clientv3.OpGet(b.keys.acl(path), clientv3.WithRev(rev)),
	).Commit()
	if err != nil {
		b.log.Warn("watch feed: cannot read the ACL that decides whether to deliver an event; not delivering it",
			zap.String("path", path), zap.Int64("revision", rev), zap.Error(err))
		return nil, false
	}
	if firstKV(r, 0) == nil {
		b.log.Warn("watch feed: node missing at its change; not delivering the event",
			zap.String("path", path), zap.Int64("revision", rev))
		return nil, false
	}
	meta, err := metaOfKVs(path, firstKV(r, 0), firstKV(r, 1))
	if err != nil {
		b.log.Warn("watch feed: undecodable ACL; not delivering the event", zap.String("path", path), zap.Error(err))
		return nil, false
	}
	return meta.ACL, true
}

// The watch feed's side: each change fired gets a resolver of the ACLs that decide its delivery
// (watch.Change.ACL), from the replica and the ACLs its revision replaced.

// aclSource says where the ACL of one node at a change comes from: known (from a multi's
// journal), or path's at revision rev (just before it if before; replaced holds the ACLs the
// revision replaced).
type aclSource struct {
	known    bool
	acl      []encoding.ACL
	path     string
	rev      int64
	before   bool
	replaced aclsBefore
}

// aclResolver resolves the ACLs of one change (watch.ACLSource) from the sources of its node's
// ACL and its parent's, memoized: each is looked up at most once, and only if a delivery needs
// it. The resolvers of a revision's changes are made in one slice (aclResolvers).
type aclResolver struct {
	b    *Store
	src  [2]aclSource // the node's, the parent's
	mu   sync.Mutex
	done [2]bool
	ok   [2]bool
	acls [2][]encoding.ACL
}

func (r *aclResolver) ACL(isParent bool) ([]encoding.ACL, bool) {
	i := 0
	if isParent {
		i = 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done[i] {
		r.done[i] = true
		if src := r.src[i]; src.known {
			r.acls[i], r.ok[i] = src.acl, true
		} else {
			r.acls[i], r.ok[i] = r.b.aclAtChange(src)
		}
	}
	return r.acls[i], r.ok[i]
}

// aclResolvers makes n resolvers for the changes of one revision, in one allocation.
func (b *Store) aclResolvers(n int) []aclResolver {
	rs := make([]aclResolver, n)
	for i := range rs {
		rs[i].b = b
	}
	return rs
}

// keyEventACLs resolves, with r, the ACLs of a change made by a single-op revision (not a
// multi): a deleted node's ACL as it was before the revision, anything else's at it.
func keyEventACLs(c watch.Change, replaced aclsBefore, r *aclResolver) watch.Change {
	rev := revOf(c.Zxid)
	parent, _ := znode.Parent(c.Path)
	r.src = [2]aclSource{
		{path: c.Path, rev: rev, before: c.Kind == watch.Deleted, replaced: replaced},
		{path: parent, rev: rev, replaced: replaced},
	}
	c.ACL = r
	return c
}

// journalACLs resolves the ACLs of a multi's changes, in op order: a node the multi created has
// the ACL its create gave it (until the multi deletes it), any other node the ACL it had before
// the multi (a multi cannot set ACLs).
func (b *Store) journalACLs(changes []watch.Change, replaced aclsBefore) {
	created := map[string][]encoding.ACL{}
	source := func(path string, rev int64) aclSource {
		if acl, ok := created[path]; ok {
			return aclSource{known: true, acl: acl}
		}
		return aclSource{path: path, rev: rev, before: true, replaced: replaced}
	}
	rs := b.aclResolvers(len(changes))
	for i, c := range changes {
		rev := revOf(c.Zxid)
		parent, _ := znode.Parent(c.Path)
		node := source(c.Path, rev)
		if c.Kind == watch.Created {
			node = aclSource{path: c.Path, rev: rev, replaced: replaced}
			if c.CreatedACL != nil {
				node = aclSource{known: true, acl: c.CreatedACL}
				created[c.Path] = c.CreatedACL
			}
		}
		rs[i].src = [2]aclSource{node, source(parent, rev)}
		changes[i].ACL = &rs[i]
		if c.Kind == watch.Deleted {
			delete(created, c.Path)
		}
	}
}

// firstKV is the first key of the i-th range of a read-only Txn (aclAtChange), nil if none.
func firstKV(r *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if kvs := r.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
		return kvs[0]
	}
	return nil
}

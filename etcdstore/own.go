package etcdstore

import (
	"bytes"
	"strings"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The committer's own revisions. A batch the committer commits is applied to the replica, and
// its watches fired, by the committer itself as soon as etcd answers the transaction, as a
// ZooKeeper leader applies its own proposals, rather than after etcd's watch stream has carried
// the revision back to the feed. The next batch is checked on it at once, and its watch events
// and replies leave one hop sooner.
//
// The committer knows what its transaction wrote (txnWrite) and the replica knows the keys as
// they were, so the events etcd reports for the revision follow (replica.ownEvents). That holds
// only if the replica is at the revision just before: else a revision it has not applied (made
// elsewhere, or a lease's expiry) comes first, and the feed applies both in order.
// applyMu makes "apply a revision to the replica, fire its watches" one step, whoever takes it.
//
// The feed still receives every revision, and checks the events of those the committer applied
// against etcd's (checkOwn): a difference is a bug, logged as an error, and the replica is
// loaded again from etcd (as after lost history), so that it never stays wrong.

// maxOwnKept and maxOwnBytes bound the revisions, and their keys and values, kept for the
// feed's check: the committer does not wait for the feed, which may fall behind (etcd's watch
// stream slow); the revisions applied meanwhile go unchecked.
const (
	maxOwnKept  = 4096
	maxOwnBytes = 16 << 20
)

// ownRevisions holds the events of the revisions the committer applied until the feed checks
// them against etcd's, and counts them. Guarded by Store.applyMu.
type ownRevisions struct {
	events                     map[int64][]*clientv3.Event
	bytes                      int // the keys and values in events
	applied, checked, differed int64
}

// keep keeps the events of revision rev for the feed's check, if there is room.
func (o *ownRevisions) keep(rev int64, evs []*clientv3.Event) {
	n := eventBytes(evs)
	if len(o.events) >= maxOwnKept || o.bytes+n > maxOwnBytes {
		return
	}
	if o.events == nil {
		o.events = map[int64][]*clientv3.Event{}
	}
	o.events[rev] = evs
	o.bytes += n
}

// take removes the events kept for revision rev and returns them.
func (o *ownRevisions) take(rev int64) ([]*clientv3.Event, bool) {
	evs, ok := o.events[rev]
	if ok {
		delete(o.events, rev)
		o.bytes -= eventBytes(evs)
	}
	return evs, ok
}

// forget drops every revision kept: the feed will not see them (it resumes after a reload).
func (o *ownRevisions) forget() {
	clear(o.events)
	o.bytes = 0
}

func eventBytes(evs []*clientv3.Event) int {
	n := 0
	for _, ev := range evs {
		n += len(ev.Kv.Key) + len(ev.Kv.Value)
	}
	return n
}

// applyOwn applies revision rev, which the committer's transaction of writes made, to the
// replica and fires its watches, if the replica is at rev-1; else the feed will. journal is
// the journal writes put, as the committer made it: fired without decoding it again. It never waits
// for the feed: while the feed holds applyMu (applying a revision, or reloading the replica,
// which takes as long as reading the whole tree from etcd) it leaves rev to the feed too, and
// the writes are answered at once all the same.
func (b *Store) applyOwn(rev int64, writes []txnWrite, journal []journalChange) {
	if !b.applyMu.TryLock() {
		return
	}
	defer b.applyMu.Unlock()
	evs, before, ok := b.tree.applyOwn(rev, writes)
	if !ok {
		return
	}
	b.fireRevision(evs, before, journal)
	b.watches.Advance(b.tree.stateZxid(rev))
	b.own.keep(rev, evs)
	b.own.applied++
	b.metrics.ObserveOwnRevision(false)
}

// checkOwn compares etcd's events of revision rev with those the committer applied for it, if
// it did; applyMu held. It reports false, having logged the difference, when they differ.
func (b *Store) checkOwn(rev int64, evs []*clientv3.Event) bool {
	mine, ok := b.own.take(rev)
	if !ok {
		return true
	}
	b.own.checked++
	theirs := make([]*clientv3.Event, 0, len(evs))
	for _, ev := range evs {
		if b.keys.ownEventKey(string(ev.Kv.Key)) {
			theirs = append(theirs, ev)
		}
	}
	if i, same := sameEvents(mine, theirs); !same {
		b.own.differed++
		b.metrics.ObserveOwnRevision(true)
		b.log.Error("replica: a revision this process applied differs from etcd's events; reloading the replica",
			zap.Int64("revision", rev), zap.Int("event", i), zap.Int("applied", len(mine)), zap.Int("etcd", len(theirs)))
		return false
	}
	return true
}

// sameEvents compares two revisions' events on the keys ownEvents makes events for; if they
// differ, i is the first that does.
func sameEvents(mine, theirs []*clientv3.Event) (i int, same bool) {
	for i = 0; i < min(len(mine), len(theirs)); i++ {
		a, b := mine[i], theirs[i]
		if a.Type != b.Type || !bytes.Equal(a.Kv.Key, b.Kv.Key) || a.Kv.ModRevision != b.Kv.ModRevision {
			return i, false
		}
		if a.Type == mvccpb.PUT && (!bytes.Equal(a.Kv.Value, b.Kv.Value) || a.Kv.Lease != b.Kv.Lease ||
			a.Kv.Version != 0 && (a.Kv.Version != b.Kv.Version || a.Kv.CreateRevision != b.Kv.CreateRevision)) {
			return i, false
		}
	}
	return i, len(mine) == len(theirs)
}

// applyOwn applies revision rev, made of writes, if the replica is at rev-1: the events etcd
// reports for it (ownEvents), and the ACLs it replaces (as apply).
func (r *replica) applyOwn(rev int64, writes []txnWrite) ([]*clientv3.Event, aclsBefore, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rev != rev-1 {
		return nil, nil, false
	}
	evs := r.ownEvents(rev, writes)
	if r.alterOwn != nil {
		evs = r.alterOwn(evs)
	}
	return evs, r.applyLocked(rev, evs), true
}

// ownEvents makes the events of revision rev, made of writes, on the keys ownEventKey names,
// as etcd reports them: in the order of the writes, a prefix's keys in key order, a delete
// of a key that does not exist none. The replica at rev-1 knows each key's creation revision
// and version; r.mu held. The journal and error keys' are not known, nor needed (Version 0).
func (r *replica) ownEvents(rev int64, writes []txnWrite) []*clientv3.Event {
	evs := make([]*clientv3.Event, 0, len(writes))
	k := r.keys
	for _, w := range writes {
		if w.del && w.prefix {
			// The only prefix the committer deletes is a node's meta prefix: its meta keys.
			path, _, _ := k.pathOfMetaKey(w.key + "a")
			for _, name := range r.t.metaNames(path) {
				evs = append(evs, deleteEvent(w.key+string(name), rev))
			}
			continue
		}
		path, name, nodeKey := k.pathOfNodeKey(w.key)
		if !nodeKey && !k.recordKey(w.key) {
			continue // not an ownEventKey (parsed once here)
		}
		var prev keyRevs
		known := false
		if nodeKey {
			prev, known = r.t.keyRevs(path, name)
		}
		if w.del {
			if prev.mod != 0 {
				evs = append(evs, deleteEvent(w.key, rev))
			}
			continue
		}
		kv := &mvccpb.KeyValue{Key: stringBytes(w.key), Value: stringBytes(w.value), ModRevision: rev, Lease: w.lease}
		if known {
			kv.CreateRevision, kv.Version = rev, 1
			if prev.mod != 0 {
				kv.CreateRevision, kv.Version = prev.create, prev.version+1
			}
		}
		evs = append(evs, &clientv3.Event{Type: mvccpb.PUT, Kv: kv})
	}
	return evs
}

func deleteEvent(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: stringBytes(key), ModRevision: rev}}
}

// stringBytes is s as bytes, without a copy: the replica and the feed only read an event's key
// and value.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// keyRevs returns the revisions of the node's key of that name ('n' for the data key) as the
// tree holds it (mod 0: absent), and whether the tree keeps keys of that name.
func (t *tree) keyRevs(path string, name byte) (keyRevs, bool) {
	n := t.nodes[path]
	if n == nil {
		return keyRevs{}, name == dataKeyName || strings.IndexByte(metaKeyNames, name) >= 0
	}
	if name == dataKeyName {
		return n.dataRevs(), true
	}
	keys := n.keys()
	return keys.metaRevs(name)
}

// metaNames lists the names of the meta keys the node at path has, in key order.
func (t *tree) metaNames(path string) []byte {
	n := t.nodes[path]
	if n == nil {
		return nil
	}
	keys := n.keys()
	var names []byte
	for i := range len(metaKeyNames) {
		if revs, _ := keys.metaRevs(metaKeyNames[i]); revs.mod != 0 {
			names = append(names, metaKeyNames[i])
		}
	}
	return names
}

package etcdstore

// This file is the whole mapping of the ZooKeeper tree onto etcd keys: the key layout, key
// building and parsing, as pure functions; values.go holds the value layouts and Stat derivation.
//
// Keys, all under the configured prefix P (default "/zk/"); d is the depth of a path ("/" is 0,
// "/a" is 1, "/a/b" is 2) in decimal:
//
//	P n/<d><path>          data key: one per znode, and most znodes have no other key. Value:
//	                       dataValue: mtime, the data, and the node's meta (ctime, create mode,
//	                       TTL, and the ACL list it was created with). etcd's own metadata gives
//	                       czxid and mzxid (CreateRevision and ModRevision, with the indexes of
//	                       the writes in their revisions that the value holds, zxid.go),
//	                       version (Version-1) and ephemeralOwner (Lease: an ephemeral node is
//	                       attached to its session's lease). The children of /a/b are exactly the keys with prefix
//	                       "P n/3/a/b/", so one range lists (or counts) them and nothing deeper.
//	P m/<d><path>\x00a     ACL key, absent until a setACL puts it: the node's meta with the ACL
//	                       the setACL gave (aclValue), so that mzxid does not move on setACL.
//	                       Its Version is aversion. An ACL key is deleted only with its data
//	                       key; a node created again in the revision that deleted it puts the
//	                       old one's ACL key again.
//	P m/<d><path>\x00c     child-create key: rewritten on every child create, its value the
//	                       index of that write in its revision (encodeIndexValue). Its Version is ZooKeeper's per-node create counter C, which
//	                       names sequential children; ZooKeeper reports cversion = 2C - numChildren.
//	P m/<d><path>\x00d     child-delete key: rewritten on every child delete (value as the c
//	                       key's), so that pzxid (the newest of czxid and the zxids of the c and
//	                       d keys' last puts) moves.
//	P m/<d><path>\x00o     offsets key, absent unless one transaction (a multi, or a batch of
//	                       writes, commit.go) changed a node more than once, since one etcd Txn
//	                       can put a key only once. Value: offsetsValue, the corrections from
//	                       etcd's counters to ZooKeeper's (create then setData in one multi:
//	                       data Version 1 is ZooKeeper version 1; two child creates: c Version
//	                       +1 is C + 2; delete then create again: the surviving keys keep their
//	                       old CreateRevision and Versions). Attached to the session's lease for
//	                       an ephemeral node, so it never outlives the node.
//	P m/<d><path>\x00s     stats key, absent unless quota statistics (quota.go) were put in the
//	                       node's data since its data key was last put: the node's data, which
//	                       ZooKeeper changes without moving its version or mzxid (the data
//	                       key's counters). Deleted when the data key is put again. Attached
//	                       to the session's lease for an ephemeral node.
//	P r<path>              reap index key, one per container and TTL node (empty value): written
//	                       with the node, deleted with it, so that the reaper (reaper.go)
//	                       finds its candidates with one range instead of a scan of the tree.
//	P e/reaper/            election prefix of the one zetcd process per cluster that reaps.
//	P s/<session id hex>   session key, attached to the session's lease: password, timeout and
//	                       the process id of the zetcd serving it (sessionValue).
//	P p/<process id hex>   process key, one per live zetcd process, attached to a short lease
//	                       of its own. Value: the client addresses the process advertises
//	                       (Config.AdvertiseClientAddrs, one a line; empty: none), which the
//	                       leader publishes in /zookeeper/config (ensemble.go). A session whose serving process has no
//	                       process key is orphaned, and the elected leader ends it at its
//	                       timeout (orphans.go).
//	P t/<process id hex>   taken key of a zetcd process, no lease (empty value): the process puts
//	                       it as it registers, and whoever takes a session from it (resumes it,
//	                       ends it as an orphan) puts it again in that transaction. Each of the
//	                       process's write transactions compares its CreateRevision (the one
//	                       the process put) and that its ModRevision is no newer than the
//	                       revision the writes were checked at, so a write on its way when one
//	                       of its sessions moved fails (commit.go), and so does one whose
//	                       taken key was deleted. The elected leader deletes the taken keys of
//	                       processes with neither process key nor sessions (orphans.go).
//	P x                    error key: a failed write puts it so that it consumes a zxid (revision)
//	                       as a failed write does in ZooKeeper; a batch of several writes
//	                       (commit.go) puts it with the index of its last write (zxid.go) as
//	                       value (encodeIndexValue).
//	P f                    fence key: every transaction that puts a data or meta key puts it too
//	                       (value: the writing process's id), so that "no znode has changed
//	                       since revision r" is one compare, ModRevision(P f) <= r (commit.go,
//	                       fence guards). Deletes by an expiring lease alone go without it.
//	P q                    quota key (empty value): put by every transaction that creates or
//	                       deletes a quota's limits node (quota.go), so that a batch checked
//	                       on a set of quota'd paths that has changed since fails its compare
//	                       of it (commit.go) and is checked again.
//	P j                    journal key: a multi, or a batch of several writes (commit.go), puts
//	                       their per-op changes here (value: journalValue) in its revision. A
//	                       transaction writes each key once, its net change, so the data-key
//	                       events of its revision can differ from ZooKeeper's per-op watch
//	                       triggers (delete then create one node, two writes' setData); the
//	                       watch feed fires the journal instead, each change at its write's zxid.
//	P c                    ensemble key (empty value): present while /zookeeper/config holds the
//	                       list of processes a leader with Config.PublishEnsemble wrote
//	                       (ensemble.go), so that a leader without it empties the node.
//	P i                    import marker: present while `zetcd import` (import.go) writes a
//	                       ZooKeeper data directory into the prefix, which it also puts as
//	                       padding to move etcd's revision, and while a mirror (mirror.go)
//	                       keeps a copy of a running ZooKeeper there; New refuses to start
//	                       while it exists. Value: what is being imported or copied.
//	P a/                   migration agreement: the keys by which the zetcd processes of one
//	                       migration (docs/migration.md, "Several processes") elect the copier
//	                       and agree on the cutover, written by cmd/zetcd. An import or a
//	                       mirror's load finds the prefix empty with them (storeRanges).
//	P z                    migrated zxids' head: put by a migration's cutover (cutover.go), or
//	                       a renumbered import (import.go), in the transaction that deletes
//	                       the import marker. Value: ZooKeeper's last zxid, the copy's last
//	                       zetcd zxid and the number of chunks (ZxidTable.encode). With it,
//	                       every Stat shows the ZooKeeper zxid a zetcd zxid of the copy stands
//	                       for (nodeKeys.statZxids).
//	P z/<i as 8 hex>       migrated zxids' chunk i, from 0: put before the head, while the
//	                       marker is there, each within about 1 MiB. Value: every ZooKeeper
//	                       zxid the copy wrote and its zetcd zxid, in order, as steps.
//
// The meta keys of a node share the prefix "P m/<d><path>\x00" (paths never contain NUL), so one
// range reads them all. A node's own c and d keys are absent until it has had a child: C=0.
// Ephemeral nodes never get c or d keys (they cannot have children).

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
)

// keySchema builds the etcd keys of a tree stored under one prefix.
type keySchema struct {
	prefix string
}

// depth is the number of path components: "/" is 0, "/a" is 1. Any string is accepted; an
// invalid path gets some depth and simply names a key that never exists.
func depth(path string) int {
	if path == "/" {
		return 0
	}
	return strings.Count(path, "/")
}

func (k keySchema) data(path string) string {
	return k.prefix + "n/" + strconv.Itoa(depth(path)) + path
}

// childrenPrefix is the prefix of the data keys of path's direct children.
func (k keySchema) childrenPrefix(path string) string {
	if path == "/" {
		return k.prefix + "n/1/"
	}
	return k.prefix + "n/" + strconv.Itoa(depth(path)+1) + path + "/"
}

// descendantsAt is the prefix of the data keys (space "n/") or meta keys (space "m/") of the
// nodes below path, path not "/", at depth d.
func (k keySchema) descendantsAt(space, path string, d int) string {
	return k.prefix + space + strconv.Itoa(d) + path + "/"
}

// dataKeysPrefix is the common prefix of every data key.
func (k keySchema) dataKeysPrefix() string { return k.prefix + "n/" }

// childrenMetaPrefix is the prefix of the meta keys of path's direct children.
func (k keySchema) childrenMetaPrefix(path string) string {
	if path == "/" {
		return k.prefix + "m/1/"
	}
	return k.prefix + "m/" + strconv.Itoa(depth(path)+1) + path + "/"
}

// metaPrefix is the common prefix of a node's ACL, child-create and child-delete keys.
func (k keySchema) metaPrefix(path string) string {
	return k.prefix + "m/" + strconv.Itoa(depth(path)) + path + "\x00"
}

func (k keySchema) acl(path string) string          { return k.metaPrefix(path) + "a" }
func (k keySchema) childCreates(path string) string { return k.metaPrefix(path) + "c" }
func (k keySchema) childDeletes(path string) string { return k.metaPrefix(path) + "d" }
func (k keySchema) offsets(path string) string      { return k.metaPrefix(path) + "o" }
func (k keySchema) stats(path string) string        { return k.metaPrefix(path) + "s" }

// reapIndex is the reap index key of a container or TTL node; reapIndexPrefix lists them all.
func (k keySchema) reapIndex(path string) string { return k.prefix + "r" + path }
func (k keySchema) reapIndexPrefix() string      { return k.prefix + "r/" }

// pathOfReapIndex inverts reapIndex.
func (k keySchema) pathOfReapIndex(key string) (string, bool) {
	p, ok := strings.CutPrefix(key, k.prefix+"r")
	return p, ok && strings.HasPrefix(p, "/")
}

// reaperElection is the election prefix of the reaper (client/v3/concurrency, which puts a
// candidate's key at the prefix, "/", and its lease in hex).
func (k keySchema) reaperElection() string { return k.prefix + "e/reaper" }

func (k keySchema) session(id encoding.SessionID) string {
	return k.prefix + "s/" + fmt.Sprintf("%016x", uint64(id))
}

// sessionKeysPrefix is the common prefix of every session key.
func (k keySchema) sessionKeysPrefix() string { return k.prefix + "s/" }

// sessionOfKey inverts session: the session id of a session key.
func (k keySchema) sessionOfKey(key string) (encoding.SessionID, bool) {
	hex, ok := strings.CutPrefix(key, k.prefix+"s/")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, false
	}
	return encoding.SessionID(v), true
}

// process is the process key of a zetcd process; processKeysPrefix lists them all.
func (k keySchema) process(id uint64) string  { return k.processKeysPrefix() + fmt.Sprintf("%016x", id) }
func (k keySchema) processKeysPrefix() string { return k.prefix + "p/" }

// taken is the taken key of a zetcd process; takenKeysPrefix lists them all.
func (k keySchema) taken(id uint64) string  { return k.takenKeysPrefix() + fmt.Sprintf("%016x", id) }
func (k keySchema) takenKeysPrefix() string { return k.prefix + "t/" }

// processOfKey inverts process.
func (k keySchema) processOfKey(key string) (uint64, bool) {
	return processIDIn(key, k.processKeysPrefix())
}

// processOfTakenKey inverts taken.
func (k keySchema) processOfTakenKey(key string) (uint64, bool) {
	return processIDIn(key, k.takenKeysPrefix())
}

// processIDIn parses the process id that follows prefix in key.
func processIDIn(key, prefix string) (uint64, bool) {
	hex, ok := strings.CutPrefix(key, prefix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	return v, err == nil
}

func (k keySchema) errorKey() string { return k.prefix + "x" }

func (k keySchema) journal() string { return k.prefix + "j" }

func (k keySchema) fence() string { return k.prefix + "f" }

func (k keySchema) quota() string { return k.prefix + "q" }

func (k keySchema) importMarker() string { return k.prefix + "i" }

// migration is the prefix of a migration's agreement keys, which the processes of the migration
// write before its copy loads.
func (k keySchema) migration() string { return k.prefix + "a/" }

// storeRanges are the key ranges [from, end) of the prefix but its migration agreement.
func (k keySchema) storeRanges() [][2]string {
	return [][2]string{{k.prefix, k.migration()}, {clientv3.GetPrefixRangeEnd(k.migration()), clientv3.GetPrefixRangeEnd(k.prefix)}}
}

// emptyStore compares that the prefix holds no key but its migration agreement.
func (k keySchema) emptyStore() []clientv3.Cmp {
	var cmps []clientv3.Cmp
	for _, rg := range k.storeRanges() {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(rg[0]), "=", 0).WithRange(rg[1]))
	}
	return cmps
}

// MigrationKeys is the prefix under prefix (a store's) of a migration's agreement keys.
func MigrationKeys(prefix string) string {
	return keySchema{prefix: cmp.Or(prefix, "/zk/")}.migration()
}

func (k keySchema) ensemble() string { return k.prefix + "c" }

// pathOfMetaKey inverts the meta keys (acl, childCreates, childDeletes, offsets, stats): it
// returns the znode path of any of a node's meta keys, and the key's name, its last byte ('a',
// 'c', 'd', 'o' or 's').
func (k keySchema) pathOfMetaKey(key string) (path string, name byte, ok bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"m/")
	if !ok {
		return "", 0, false
	}
	i, j := strings.IndexByte(rest, '/'), strings.LastIndexByte(rest, 0)
	if i <= 0 || j < i {
		return "", 0, false
	}
	return rest[i:j], key[len(key)-1], true
}

// dataKeyName is what pathOfNodeKey names a data key.
const dataKeyName = 'n'

// pathOfNodeKey inverts data and the meta keys: the znode path of a data or meta key, and the
// key's name (dataKeyName, or a meta key's as pathOfMetaKey).
func (k keySchema) pathOfNodeKey(key string) (path string, name byte, ok bool) {
	if path, ok := k.pathOfDataKey(key); ok {
		return path, dataKeyName, true
	}
	return k.pathOfMetaKey(key)
}

// pathOfDataKey inverts data: it returns the znode path of a data key.
func (k keySchema) pathOfDataKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"n/")
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", false
	}
	return rest[i:], true
}

// ownEventKey reports whether ownEvents makes the events of key: the keys the replica and the
// feed read (data, meta, error and journal keys) and no other the committer writes (the fence
// and reap index keys).
func (k keySchema) ownEventKey(key string) bool {
	_, _, ok := k.pathOfNodeKey(key)
	return ok || k.recordKey(key)
}

// recordKey reports whether key is one of the keys that record a revision's writes rather than
// a znode's state: the error and journal keys.
func (k keySchema) recordKey(key string) bool { return key == k.errorKey() || key == k.journal() }

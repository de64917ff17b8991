package etcdstore

import (
	"bytes"
	"errors"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/zetcd/zetcd/encoding"
)

// replicaNode is one znode as the replica keeps it: its keys (nodeKeys) in fixed-width fields,
// what few nodes have (the ACL key after a setACL, a TTL, the child-create, child-delete,
// offsets and stats keys) behind one pointer, and its data in one allocation of its own, copied
// out of the etcd value it came in (that value also holds the node's meta, which the fields
// hold decoded). Per znode this is most of the replica's size: see docs/design.md "The replica
// and its feed". A node exists when its data key does; an entry with no key and no children is
// removed.
//
// nodeKeys is the one form a Stat is derived from (stat.go): keys expands a replicaNode into
// it, and putData, putMeta, deleteData and deleteMeta change it.
type replicaNode struct {
	create, mod, version int64 // the data key's revisions and version (keyRevs); mod 0: absent
	lease                int64 // the data key's lease: the ephemeral owner
	mtime, ctime         int64
	ix                   zxidIndexes
	mode                 int16 // the create mode (encoding.CreateMode, whose values fit)
	null                 bool  // the data is null, as opposed to empty
	// data is the node's data key's data, never changed in place (dataBytes lends it out).
	data string
	acl  *[]encoding.ACL // the node's ACL list, shared (aclTable.ref); nil for none
	more *replicaMore    // nil while the node has none of it
	// children holds the names of the node's children; nil while it has none.
	children *childSet
}

// replicaMore is what a replicaNode holds of the keys most nodes lack: its ACL key (after a
// setACL), the TTL of a TTL node, and its moreKeys. Replaced, never changed in place.
type replicaMore struct {
	acl  keyRevs
	ttl  int64
	keys *moreKeys
}

// errCorruptMode is a node's error when its meta holds a create mode no znode has.
var errCorruptMode = errors.New("zetcd: corrupt meta: create mode out of range")

// dataBytes is the node's data (nil for null data), shared: the caller must not change it.
func (n *replicaNode) dataBytes() []byte {
	if n.null {
		return nil
	}
	if n.data == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(n.data), len(n.data))
}

// keys expands the node into nodeKeys; the data, ACL list and moreKeys are shared.
func (n *replicaNode) keys() nodeKeys {
	k := nodeKeys{
		data:  keyRevs{create: n.create, mod: n.mod, version: n.version},
		lease: n.lease,
		mtime: n.mtime,
		ix:    n.ix,
		value: n.dataBytes(),
		meta:  aclValue{Ctime: n.ctime, Mode: encoding.CreateMode(n.mode), ACL: n.aclList()},
	}
	if m := n.more; m != nil {
		k.acl, k.meta.TTL, k.more = m.acl, m.ttl, m.keys
	}
	return k
}

// putData, putMeta, deleteData and deleteMeta record a change of one of the node's keys
// (nodeKeys' methods of those names). A data or stats key's value, which aliases an etcd
// response, is copied into an allocation of the node's own.
func (n *replicaNode) putData(kv *mvccpb.KeyValue, acls *aclTable) {
	before := n.keys()
	k := before
	k.putData(kv, acls)
	n.store(&k, &before, acls)
}

func (n *replicaNode) putMeta(name byte, kv *mvccpb.KeyValue, acls *aclTable) {
	before := n.keys()
	k := before
	k.putMeta(name, kv, acls)
	n.store(&k, &before, acls)
}

func (n *replicaNode) deleteData() {
	before := n.keys()
	k := before
	k.deleteData()
	n.store(&k, &before, nil)
}

func (n *replicaNode) deleteMeta(name byte) {
	before := n.keys()
	k := before
	k.deleteMeta(name)
	n.store(&k, &before, nil)
}

// store makes k the node's keys, before being what keys returned; a new ACL list is shared
// through acls.
func (n *replicaNode) store(k, before *nodeKeys, acls *aclTable) {
	n.create, n.mod, n.version = k.data.create, k.data.mod, k.data.version
	n.lease, n.mtime, n.ix, n.ctime = k.lease, k.mtime, k.ix, k.meta.Ctime
	if !sameList(k.meta.ACL, before.meta.ACL) {
		n.acl = acls.ref(k.meta.ACL)
	}
	if !sameBytes(k.value, before.value) {
		n.data, n.null = string(k.value), k.value == nil
	}
	more := k.more
	n.mode = int16(k.meta.Mode)
	if encoding.CreateMode(n.mode) != k.meta.Mode {
		m := k.moreOrZero()
		m.err = errCorruptMode
		more = &m
	}
	if more != before.more && more != nil && more.statsData != nil {
		m := *more
		m.statsData = bytes.Clone(m.statsData)
		more = &m
	}
	// m stays on the stack: most nodes have no more, and a put that leaves it as it was
	// allocates nothing.
	switch m := (replicaMore{acl: k.acl, ttl: k.meta.TTL, keys: more}); {
	case m == (replicaMore{}):
		n.more = nil
	case n.more == nil || *n.more != m:
		n.more = new(replicaMore)
		*n.more = m
	}
}

// aclList is the node's ACL list, shared.
func (n *replicaNode) aclList() []encoding.ACL {
	if n.acl == nil {
		return nil
	}
	return *n.acl
}

// sameList reports whether a and b are the same list (not merely equal ones), nil and empty
// told apart.
func sameList(a, b []encoding.ACL) bool {
	return len(a) == len(b) && (a == nil) == (b == nil) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// sameBytes reports whether a and b are the same slice (not merely equal contents), nil and
// empty told apart.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (a == nil) == (b == nil) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// exists reports whether the node's data key exists.
func (n *replicaNode) exists() bool { return n.mod != 0 }

// empty reports whether no key of the node is known.
func (n *replicaNode) empty() bool { return n.mod == 0 && n.more == nil }

// dataNow is the node's data: its stats key's value if it has one, else its data key's.
func (n *replicaNode) dataNow() []byte {
	if n.more != nil && n.more.keys != nil && n.more.keys.stats.mod != 0 {
		return n.more.keys.statsData
	}
	return n.dataBytes()
}

// dataRevs are the data key's revisions and version.
func (n *replicaNode) dataRevs() keyRevs {
	return keyRevs{create: n.create, mod: n.mod, version: n.version}
}

// numChildren is how many children the node has.
func (n *replicaNode) numChildren() int {
	if n.children == nil {
		return 0
	}
	return n.children.len()
}

// addChild records a child's name; removeChild forgets it, and the child set once empty.
func (n *replicaNode) addChild(name string) {
	if n.children == nil {
		n.children = &childSet{}
	}
	n.children.add(name)
}

func (n *replicaNode) removeChild(name string) {
	if n.children == nil {
		return
	}
	n.children.remove(name)
	if n.children.len() == 0 {
		n.children = nil
	}
}

// childNames returns the children's names, sorted (childSet.names); nil when there are none.
func (n *replicaNode) childNames() []string {
	if n.children == nil {
		return nil
	}
	return n.children.names()
}

// eachChild calls f for every child's name, in no particular order.
func (n *replicaNode) eachChild(f func(name string)) {
	if n.children != nil {
		n.children.each(f)
	}
}

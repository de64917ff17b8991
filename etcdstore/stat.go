package etcdstore

import (
	"fmt"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// A znode's etcd keys decoded (nodeKeys), and its Stat, data and ACL derived from them (node):
// pure, in one place for the replica, the committer's overlay and reads from etcd.

// aversionOffset: ZooKeeper reports aversion -1 for /zookeeper/config on a fresh server.
func aversionOffset(path string) int32 {
	if path == "/zookeeper/config" {
		return -1
	}
	return 0
}

// keyRevs is what the derivation of a Stat uses of one etcd key: its revisions and version.
// The zero value stands for an absent key (etcd's revisions start at 1).
type keyRevs struct{ create, mod, version int64 }

func revsOf(kv *mvccpb.KeyValue) keyRevs {
	if kv == nil {
		return keyRevs{}
	}
	return keyRevs{create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version}
}

// nodeKeys is one znode's etcd keys with their values decoded: everything its Stat, data and
// ACL derive from (node). It is what the replica keeps per znode, and what a node read from
// etcd is decoded into, so that a Stat is derived in one place. The data and the ACL list are
// shared, never changed in place.
type nodeKeys struct {
	data  keyRevs // the data key; data.mod is 0 when the node does not exist
	lease int64   // the data key's lease: the ephemeral owner
	mtime int64
	ix    zxidIndexes // from the data key's value
	value []byte      // the node's data (nil for null data)
	acl   keyRevs     // the ACL key: absent unless a setACL put it
	// meta is the node's ctime, mode, TTL and ACL: the ACL key's value if there is one, else
	// the data key's.
	meta aclValue
	// more holds the keys a node usually lacks; nil when it has none. Replaced, never changed
	// in place, when one of them changes.
	more *moreKeys
}

// moreKeys are the child-create, child-delete and offsets keys of a node (keys.go), and what
// went wrong decoding any of its keys (a corrupt value: reads of the node fail with it).
type moreKeys struct {
	creates, deletes, offsets keyRevs
	createsIx, deletesIx      uint16       // the child-create and child-delete keys' values
	offs                      offsetsValue // the offsets key's value
	// stats is the stats key, statsData its value: the node's data when present (quota.go).
	stats     keyRevs
	statsData []byte
	err       error
}

// dataNow is the node's data: its stats key's value if it has one, else its data key's.
func (n *nodeKeys) dataNow() []byte {
	if n.more != nil && n.more.stats.mod != 0 {
		return n.more.statsData
	}
	return n.value
}

func (n *nodeKeys) moreOrZero() moreKeys {
	if n.more == nil {
		return moreKeys{}
	}
	return *n.more
}

// setMore replaces the node's moreKeys with m (nil when m holds nothing).
func (n *nodeKeys) setMore(m moreKeys) {
	if m.creates == (keyRevs{}) && m.deletes == (keyRevs{}) && m.offsets == (keyRevs{}) && m.stats == (keyRevs{}) &&
		m.createsIx == 0 && m.deletesIx == 0 && m.offs == (offsetsValue{}) && m.statsData == nil && m.err == nil {
		n.more = nil
		return
	}
	n.more = &m
}

// putMeta records one of the node's meta keys (name: the key's last byte, keys.go) as put in
// kv; a value that does not decode is recorded as the node's error.
func (n *nodeKeys) putMeta(name byte, kv *mvccpb.KeyValue, acls *aclTable) {
	m := n.moreOrZero()
	switch name {
	case 'a':
		v, err := decodeACLValue(kv.Value, acls)
		if err != nil {
			m.err = err
			break
		}
		n.acl, n.meta = revsOf(kv), v
	case 'c', 'd':
		ix, err := decodeIndexValue(kv.Value)
		if err != nil {
			m.err = err
			break
		}
		if name == 'c' {
			m.creates, m.createsIx = revsOf(kv), ix
		} else {
			m.deletes, m.deletesIx = revsOf(kv), ix
		}
	case 'o':
		offs, err := decodeOffsetsValue(kv.Value)
		if err != nil {
			m.err = err
			break
		}
		m.offsets, m.offs = revsOf(kv), offs
	case 's':
		m.stats, m.statsData = revsOf(kv), kv.Value
	}
	n.setMore(m)
}

// metaKeyNames are the names of a node's meta keys (keys.go), in key order.
const metaKeyNames = "acdos"

// metaRevs returns the revisions of the node's meta key of that name (mod 0: absent), and
// whether name is one of metaKeyNames.
func (n *nodeKeys) metaRevs(name byte) (keyRevs, bool) {
	m := n.moreOrZero()
	switch name {
	case 'a':
		return n.acl, true
	case 'c':
		return m.creates, true
	case 'd':
		return m.deletes, true
	case 'o':
		return m.offsets, true
	case 's':
		return m.stats, true
	}
	return keyRevs{}, false
}

// deleteMeta records the delete of one of the node's meta keys.
func (n *nodeKeys) deleteMeta(name byte) {
	m := n.moreOrZero()
	switch name {
	case 'a':
		n.acl, n.meta = keyRevs{}, aclValue{}
	case 'c':
		m.creates, m.createsIx = keyRevs{}, 0
	case 'd':
		m.deletes, m.deletesIx = keyRevs{}, 0
	case 'o':
		m.offsets, m.offs = keyRevs{}, offsetsValue{}
	case 's':
		m.stats, m.statsData = keyRevs{}, nil
	}
	n.setMore(m)
}

// putData records the node's data key as put in kv, sharing ACL lists through acls. The meta
// in the value stands for the node's unless an ACL key does (putMeta, whichever comes first:
// an ACL key is deleted only with its data key).
func (n *nodeKeys) putData(kv *mvccpb.KeyValue, acls *aclTable) {
	data, mtime, ix, meta, err := decodeDataValue(kv.Value)
	if err == nil && n.acl.mod == 0 {
		n.meta, err = decodeACLValue(meta, acls)
	}
	if err != nil {
		m := n.moreOrZero()
		m.err = err
		n.setMore(m)
	}
	n.data, n.lease, n.mtime, n.ix, n.value = revsOf(kv), kv.Lease, mtime, ix, data
}

// deleteData records the delete of the node's data key.
func (n *nodeKeys) deleteData() {
	n.data, n.lease, n.mtime, n.ix, n.value = keyRevs{}, 0, 0, zxidIndexes{}, nil
	if n.acl.mod == 0 {
		n.meta = aclValue{}
	}
}

// exists reports whether the node's data key exists.
func (n *nodeKeys) exists() bool { return n.data.mod != 0 }

// empty reports whether no key of the node is known.
func (n *nodeKeys) empty() bool { return !n.exists() && n.acl.mod == 0 && n.more == nil }

// zxids derives the node's czxid, mzxid and pzxid (zxid.go):
//
//	czxid = zxidOf(data.CreateRevision, ix.czxid), or as the offsets key corrects it
//	mzxid = zxidOf(data.ModRevision, ix.mzxid)
//	pzxid = max(czxid, the zxids of the child-create and child-delete keys' last puts)
func (n *nodeKeys) zxids() (czxid, mzxid, pzxid encoding.Zxid) {
	m := n.moreOrZero()
	switch {
	case m.offs.Czxid < 0 && m.offsets.mod != 0:
		czxid = zxidOf(m.offsets.mod, int(-1-m.offs.Czxid))
	case m.offs.Czxid > 0:
		czxid = encoding.Zxid(m.offs.Czxid)
	default:
		czxid = zxidOf(n.data.create, int(n.ix.czxid))
	}
	pzxid = czxid
	if m.creates.mod != 0 {
		pzxid = max(pzxid, zxidOf(m.creates.mod, int(m.createsIx)))
	}
	if m.deletes.mod != 0 {
		pzxid = max(pzxid, zxidOf(m.deletes.mod, int(m.deletesIx)))
	}
	return czxid, zxidOf(n.data.mod, int(n.ix.mzxid)), pzxid
}

// node is one znode decoded from etcd.
type node struct {
	Stat encoding.Stat
	Data []byte // nil for null data
	Meta aclValue
}

// decodeErr is the error met decoding the node's keys, if any.
func (n *nodeKeys) decodeErr() error {
	if n.more == nil {
		return nil
	}
	return n.more.err
}

// node derives the znode's Stat (as DataTree keeps it), data and ACL from its keys:
//
//	czxid, mzxid, pzxid: statZxids                                  version = data.Version-1
//	ctime = meta                       mtime = data value            aversion = acl.Version
//	C = creates.Version (0 if absent)  cversion = 2C - numChildren   numChildren = counted
//	ephemeralOwner = data.Lease (0 for persistent, container and TTL nodes)
//
// corrected by the offsets key where a multi left one (offsetsValue). migrated is the table
// of a migration's cutover (cutover.go), nil without one.
func (n *nodeKeys) node(path string, numChildren int64, migrated *zxidTable) (node, error) {
	m := n.moreOrZero()
	switch {
	case m.err != nil:
		return node{}, fmt.Errorf("%s: %w", path, m.err)
	case !n.exists():
		return node{}, fmt.Errorf("zetcd: %s: data key missing", path)
	}
	zxids, err := n.statZxids(path, migrated)
	if err != nil {
		return node{}, err
	}
	c := m.offs.Creates + m.creates.version
	return node{
		Data: n.dataNow(),
		Meta: n.meta,
		Stat: encoding.Stat{
			Czxid:          zxids[0],
			Mzxid:          zxids[1],
			Ctime:          n.meta.Ctime,
			Mtime:          n.mtime,
			Version:        int32(n.data.version - 1 - m.offs.Version),
			Cversion:       int32(2*c - numChildren),
			Aversion:       int32(n.acl.version-m.offs.Aversion) + aversionOffset(path),
			EphemeralOwner: encoding.SessionID(n.lease),
			DataLength:     int32(len(n.dataNow())),
			NumChildren:    int32(numChildren),
			Pzxid:          zxids[2],
		},
	}, nil
}

// statZxids are the czxid, mzxid and pzxid a Stat of the existing node shows: nodeKeys.zxids,
// where
//
//   - a system node's zxid equal to its own create revision is the bootstrap transaction's
//     and shows 0, as a fresh ZooKeeper shows it;
//   - after a migration's cutover, a zxid the copy wrote shows as the ZooKeeper zxid it stands
//     for (migrated, the cutover's table; nil without one), zetcd's own later ones as they are,
//     all above ZooKeeper's. A zxid of the copy the table lacks is a corrupt table.
//
// Every Stat a client sees or a watch's catch-up compares is made of these, so that a
// client's zxids from ZooKeeper compare with them as on ZooKeeper.
func (n *nodeKeys) statZxids(path string, migrated *zxidTable) ([3]encoding.Zxid, error) {
	czxid, mzxid, pzxid := n.zxids()
	zxids := [3]encoding.Zxid{czxid, mzxid, pzxid}
	boot := encoding.Zxid(-1)
	if znode.IsSystem(path) {
		boot = zxidOf(n.data.create, 0)
	}
	for i, z := range zxids {
		if z == boot {
			zxids[i] = 0
			continue
		}
		zk, ok := migrated.zooKeeper(z)
		if !ok {
			return zxids, fmt.Errorf("zetcd: %s: zxid %#x lies in the migrated copy (up to %#x) but its %w lacks it", path, z, migrated.copyLast, errCorruptZxidTable)
		}
		zxids[i] = zk
	}
	return zxids, nil
}

// aclTable shares one ACL list among the nodes that have the same one (most do), keyed by its
// encoding, as ZooKeeper's ReferenceCountedACLCache does. Bounded: when full, it starts again (lists already
// shared stay shared). Not safe for concurrent use.
type aclTable struct {
	m map[string][]encoding.ACL
	// refs holds one pointer to each shared list (ref), by its first element.
	refs map[*encoding.ACL]*[]encoding.ACL
}

// lookup returns the shared list whose encoding is raw, if there is one.
func (t *aclTable) lookup(raw []byte) ([]encoding.ACL, bool) {
	if t == nil {
		return nil, false
	}
	shared, ok := t.m[string(raw)]
	return shared, ok
}

// share returns the shared list whose encoding is raw, recording acl as that list if none is.
// A nil table shares nothing.
func (t *aclTable) share(raw []byte, acl []encoding.ACL) []encoding.ACL {
	if t == nil {
		return acl
	}
	if shared, ok := t.m[string(raw)]; ok {
		return shared
	}
	if t.m == nil || len(t.m) >= maxInternedACLs {
		t.m = map[string][]encoding.ACL{}
	}
	t.m[string(raw)] = acl
	return acl
}

// maxInternedACLs bounds the ACL lists the replica shares (aclTable).
const maxInternedACLs = 1 << 10

// ref returns a pointer to acl, the same one for every caller with the same shared list, so
// that the replica keeps one word per node for its ACL rather than the list's slice header.
// nil for a nil list. Bounded as the lists are: when full, it starts again (pointers already
// handed out stay valid). A nil table shares nothing.
func (t *aclTable) ref(acl []encoding.ACL) *[]encoding.ACL {
	if acl == nil {
		return nil
	}
	if t == nil {
		return &acl
	}
	first := unsafe.SliceData(acl)
	if r, ok := t.refs[first]; ok && len(*r) == len(acl) {
		return r
	}
	if t.refs == nil || len(t.refs) >= 2*maxInternedACLs {
		t.refs = map[*encoding.ACL]*[]encoding.ACL{}
	}
	r := &acl
	t.refs[first] = r
	return r
}

package etcdstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The values of the keys of keys.go, and a node's Stat derived from its keys: pure codecs,
// tested by round trips (keys_test.go).

// journalValue is the value of the journal key: for each change in op order, its kind (one
// byte), the length of its path (big-endian uint32) and the path. A create's kind byte has bit
// 0x80 set and is followed by the ACL it gave the node (length as uint32, then the ACL list as
// in aclValue), which the watch feed needs for the READ check of events (a node created and
// deleted by one multi leaves no ACL key behind). A kind byte with bit 0x40 set is followed by
// the index of the change's write in its revision (big-endian uint16, zxid.go); without it the
// index is 0.
const (
	journalACLFollows   = 0x80
	journalIndexFollows = 0x40
)

// journalChange is one change of the journal: what changed, and the index of the write that
// changed it in its revision (zxid.go).
type journalChange struct {
	watch.Change
	index uint16
}

func encodeJournal(changes []journalChange) string {
	var b []byte
	for _, c := range changes {
		kind := byte(c.Kind)
		if c.Kind == watch.Created && c.CreatedACL != nil {
			kind |= journalACLFollows
		}
		if c.index != 0 {
			kind |= journalIndexFollows
		}
		b = append(b, kind)
		if c.index != 0 {
			b = binary.BigEndian.AppendUint16(b, c.index)
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.Path)))
		b = append(b, c.Path...)
		if kind&journalACLFollows != 0 {
			acl := encoding.AppendRecord(nil, &encoding.SetACLRequest{ACL: c.CreatedACL})
			b = binary.BigEndian.AppendUint32(b, uint32(len(acl)))
			b = append(b, acl...)
		}
	}
	return string(b)
}

// decodeJournal returns the changes of a journal value written in revision rev, with their zxids.
func decodeJournal(v []byte, rev int64) ([]watch.Change, error) {
	var out []watch.Change
	for len(v) > 0 {
		kind := watch.ChangeKind(v[0] &^ (journalACLFollows | journalIndexFollows))
		if kind > watch.DataChanged {
			return nil, errors.New("zetcd: corrupt journal value")
		}
		hasACL := v[0]&journalACLFollows != 0
		index := 0
		if v[0]&journalIndexFollows != 0 {
			if len(v) < 3 {
				return nil, errors.New("zetcd: corrupt journal value: short index")
			}
			index = int(binary.BigEndian.Uint16(v[1:3]))
			v = v[2:]
		}
		if len(v) < 5 {
			return nil, errors.New("zetcd: corrupt journal value")
		}
		n := binary.BigEndian.Uint32(v[1:5])
		if uint64(len(v)-5) < uint64(n) {
			return nil, errors.New("zetcd: corrupt journal value: short path")
		}
		c := watch.Change{Kind: kind, Path: string(v[5 : 5+n]), Zxid: zxidOf(rev, index)}
		v = v[5+n:]
		if hasACL {
			if len(v) < 4 || uint64(len(v)-4) < uint64(binary.BigEndian.Uint32(v)) {
				return nil, errors.New("zetcd: corrupt journal value: short ACL")
			}
			m := binary.BigEndian.Uint32(v)
			var rec encoding.SetACLRequest
			if err := encoding.DecodeRecord(v[4:4+m], &rec); err != nil {
				return nil, fmt.Errorf("zetcd: corrupt journal value: %w", err)
			}
			c.CreatedACL = rec.ACL
			v = v[4+m:]
		}
		out = append(out, c)
	}
	return out, nil
}

// dataValue is the value of a data key: one flags byte (bit 0: data is null, as opposed to
// empty; bit 1: indexes follow; bit 2: the node's meta follows), the mtime in ms (big-endian
// int64), if bit 1 is set the node's zxidIndexes (two big-endian uint16: czxid's, then
// mzxid's), if bit 2 is set the length of the meta (big-endian uint32) and the meta as an ACL
// key's value (aclValue: ctime, mode, TTL and the ACL list the node was created with), then the
// data. zetcd sets bit 2 on every data value it writes; a value without it does not decode.
const (
	dataHeaderLen        = 9
	dataFlagNull         = 1
	dataFlagIndexes      = 2
	dataFlagMeta         = 4
	dataIndexesLen       = 4
	dataHeaderLenIndexes = dataHeaderLen + dataIndexesLen
)

// zxidIndexes are the low bits of a node's czxid and mzxid (zxid.go): the index of the write
// that created the node, and of the one that last set its data, in their revisions.
type zxidIndexes struct{ czxid, mzxid uint16 }

// encodeDataValue encodes a data key's value.
func encodeDataValue(data []byte, mtime int64, ix zxidIndexes, meta aclValue) string {
	header := dataHeaderLen
	if ix != (zxidIndexes{}) {
		header = dataHeaderLenIndexes
	}
	var h [dataHeaderLenIndexes + 4]byte
	if data == nil {
		h[0] = dataFlagNull
	}
	binary.BigEndian.PutUint64(h[1:9], uint64(mtime))
	if ix != (zxidIndexes{}) {
		h[0] |= dataFlagIndexes
		binary.BigEndian.PutUint16(h[9:11], ix.czxid)
		binary.BigEndian.PutUint16(h[11:13], ix.mzxid)
	}
	h[0] |= dataFlagMeta
	metaLen := aclValueLen(meta)
	header += 4 // the meta's length, written once the meta is
	// One allocation, handed out as the string without a copy (as strings.Builder does): b is
	// never written after.
	b := make([]byte, 0, header+metaLen+len(data))
	b = append(b, h[:header]...)
	b = appendACLValue(b, meta)
	binary.BigEndian.PutUint32(b[header-4:], uint32(len(b)-header))
	b = append(b, data...)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// decodeDataValue returns the node's data (nil for null data, non-nil empty for empty data),
// mtime, zxid indexes and its meta as encoded (decodeACLValue decodes it). The returned slices
// alias v.
func decodeDataValue(v []byte) (data []byte, mtime int64, ix zxidIndexes, meta []byte, err error) {
	if len(v) < dataHeaderLen {
		return nil, 0, ix, nil, errors.New("zetcd: corrupt data value: too short")
	}
	mtime = int64(binary.BigEndian.Uint64(v[1:9]))
	rest := v[dataHeaderLen:]
	if v[0]&dataFlagIndexes != 0 {
		if len(rest) < dataIndexesLen {
			return nil, 0, ix, nil, errors.New("zetcd: corrupt data value: short indexes")
		}
		ix = zxidIndexes{czxid: binary.BigEndian.Uint16(rest[0:2]), mzxid: binary.BigEndian.Uint16(rest[2:4])}
		rest = rest[dataIndexesLen:]
	}
	if v[0]&dataFlagMeta == 0 {
		return nil, 0, ix, nil, errors.New("zetcd: corrupt data value: no meta")
	}
	if len(rest) < 4 || uint64(len(rest)-4) < uint64(binary.BigEndian.Uint32(rest)) {
		return nil, 0, ix, nil, errors.New("zetcd: corrupt data value: short meta")
	}
	n := 4 + int(binary.BigEndian.Uint32(rest))
	meta, rest = rest[4:n:n], rest[n:]
	if v[0]&dataFlagNull != 0 {
		return nil, mtime, ix, meta, nil
	}
	return rest[:len(rest):len(rest)], mtime, ix, meta, nil
}

// The child-create and child-delete keys' value is the index of the write that last put them
// in their revision (a big-endian uint16), or empty for index 0.
func encodeIndexValue(index uint16) string {
	if index == 0 {
		return ""
	}
	return string(binary.BigEndian.AppendUint16(nil, index))
}

func decodeIndexValue(v []byte) (uint16, error) {
	switch len(v) {
	case 0:
		return 0, nil
	case 2:
		return binary.BigEndian.Uint16(v), nil
	}
	return 0, errors.New("zetcd: corrupt index value")
}

// aclValue is the value of an ACL key: format byte 1, ctime (int64), create mode (int32),
// TTL in ms (int64, 0 unless a TTL node), then the ACL list as the jute record SetACLRequest
// with empty path and version 0, which reuses the encoding package's bounded vector<ACL> codec.
type aclValue struct {
	Ctime int64
	Mode  encoding.CreateMode
	TTL   int64
	ACL   []encoding.ACL
}

func encodeACLValue(v aclValue) string { return string(appendACLValue(nil, v)) }

// aclListOffset is where the ACL list starts in an ACL value.
const aclListOffset = 21

// aclValueLen is the length of v's encoding (appendACLValue).
func aclValueLen(v aclValue) int {
	n := aclListOffset + 12 // the record's empty path, the list's length, the record's version
	for _, a := range v.ACL {
		n += 4 + 4 + len(a.ID.Scheme) + 4 + len(a.ID.ID)
	}
	return n
}

func appendACLValue(b []byte, v aclValue) []byte {
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(v.Ctime))
	b = binary.BigEndian.AppendUint32(b, uint32(v.Mode))
	b = binary.BigEndian.AppendUint64(b, uint64(v.TTL))
	return encoding.AppendRecord(b, &encoding.SetACLRequest{ACL: v.ACL})
}

// decodeACLValue decodes an ACL value, its list shared through acls (nil: not shared).
func decodeACLValue(b []byte, acls *aclTable) (aclValue, error) {
	var v aclValue
	if len(b) < aclListOffset || b[0] != 1 {
		return v, errors.New("zetcd: corrupt ACL value")
	}
	v.Ctime = int64(binary.BigEndian.Uint64(b[1:9]))
	v.Mode = encoding.CreateMode(int32(binary.BigEndian.Uint32(b[9:13])))
	v.TTL = int64(binary.BigEndian.Uint64(b[13:21]))
	if shared, ok := acls.lookup(b[aclListOffset:]); ok {
		v.ACL = shared
		return v, nil
	}
	var rec encoding.SetACLRequest
	if err := encoding.DecodeRecord(b[aclListOffset:], &rec); err != nil {
		return v, fmt.Errorf("zetcd: corrupt ACL value: %w", err)
	}
	v.ACL = acls.share(b[aclListOffset:], rec.ACL)
	return v, nil
}

// sessionValue is the value of a session key: the 16-byte password, the negotiated timeout in
// ms (int32), then the process id of the zetcd serving the session (uint64). Values written
// before the process id existed (20 bytes) decode with process id 0, which names no process.
type sessionValue struct {
	passwd    []byte
	timeoutMs int32
	owner     uint64
}

const (
	sessionValueLen       = 28
	sessionValueLenNoProc = 20
)

func encodeSessionValue(v sessionValue) string {
	b := make([]byte, sessionValueLen)
	copy(b, v.passwd)
	binary.BigEndian.PutUint32(b[16:], uint32(v.timeoutMs))
	binary.BigEndian.PutUint64(b[20:], v.owner)
	return string(b)
}

func decodeSessionValue(b []byte) (sessionValue, error) {
	if len(b) != sessionValueLen && len(b) != sessionValueLenNoProc {
		return sessionValue{}, errors.New("zetcd: corrupt session value")
	}
	v := sessionValue{passwd: b[:16:16], timeoutMs: int32(binary.BigEndian.Uint32(b[16:20]))}
	if len(b) == sessionValueLen {
		v.owner = binary.BigEndian.Uint64(b[20:])
	}
	return v, nil
}

// aversionOffset: ZooKeeper reports aversion -1 for /zookeeper/config on a fresh server.
func aversionOffset(path string) int32 {
	if path == "/zookeeper/config" {
		return -1
	}
	return 0
}

// offsetsValue is the value of an offsets key: the differences between etcd's counters and
// ZooKeeper's for one node (see the offsets key above). The zero value changes nothing.
type offsetsValue struct {
	Version  int64 // ZooKeeper version  = data Version - 1 - Version
	Aversion int64 // ZooKeeper aversion = ACL Version - Aversion
	Creates  int64 // create counter C   = child-create Version + Creates
	// Czxid replaces the czxid derived from the data key after a multi deleted the node and
	// created it again (the data key survived the pair): negative means the offsets key's own
	// ModRevision (the offsets key was written by that multi) with index -Czxid-1 (czxidOwn(i)),
	// a positive value is the czxid itself.
	Czxid int64
}

// czxidOwn is the offsetsValue.Czxid of a node recreated by the write numbered index in the
// revision that writes the offsets key.
func czxidOwn(index uint16) int64 { return -1 - int64(index) }

// offsetsValue is a format byte and four big-endian int64s. Format 2 holds Czxid as above;
// format 1, written before zxids had indexes, holds a positive Czxid as a revision.
const offsetsValueLen = 33

func encodeOffsetsValue(o offsetsValue) string {
	b := make([]byte, 1, offsetsValueLen)
	b[0] = 2
	for _, v := range []int64{o.Version, o.Aversion, o.Creates, o.Czxid} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return string(b)
}

func decodeOffsetsValue(b []byte) (offsetsValue, error) {
	if len(b) != offsetsValueLen || b[0] != 1 && b[0] != 2 {
		return offsetsValue{}, errors.New("zetcd: corrupt offsets value")
	}
	f := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	o := offsetsValue{Version: f(0), Aversion: f(1), Creates: f(2), Czxid: f(3)}
	if b[0] == 1 && o.Czxid > 0 {
		o.Czxid = int64(zxidOf(o.Czxid, 0))
	}
	return o, nil
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
	err                       error
}

func (n *nodeKeys) moreOrZero() moreKeys {
	if n.more == nil {
		return moreKeys{}
	}
	return *n.more
}

// setMore replaces the node's moreKeys with m (nil when m holds nothing).
func (n *nodeKeys) setMore(m moreKeys) {
	if m == (moreKeys{}) {
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
	}
	n.setMore(m)
}

// metaKeyNames are the names of a node's meta keys (keys.go), in key order.
const metaKeyNames = "acdo"

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

// aclTable shares one ACL list among the nodes that have the same one (most do), keyed by its
// encoding, as ZooKeeper's ReferenceCountedACLCache does. Bounded: when full, it starts again (lists already
// shared stay shared). Not safe for concurrent use.
type aclTable struct{ m map[string][]encoding.ACL }

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

// node derives the znode's Stat (PROTOCOL.md §4.1), data and ACL from its keys:
//
//	czxid, mzxid, pzxid: nodeKeys.zxids                             version = data.Version-1
//	ctime = meta                       mtime = data value            aversion = acl.Version
//	C = creates.Version (0 if absent)  cversion = 2C - numChildren   numChildren = counted
//	ephemeralOwner = data.Lease (0 for persistent, container and TTL nodes)
//
// corrected by the offsets key where a multi left one (offsetsValue).
//
// System nodes were written by the bootstrap transaction; a zxid equal to their own create
// revision is that bootstrap and is reported as 0, as a fresh ZooKeeper reports it.
func (n *nodeKeys) node(path string, numChildren int64) (node, error) {
	m := n.moreOrZero()
	switch {
	case m.err != nil:
		return node{}, fmt.Errorf("%s: %w", path, m.err)
	case !n.exists():
		return node{}, fmt.Errorf("zetcd: %s: data key missing", path)
	}
	czxid, mzxid, pzxid := n.zxids()
	zx := func(z encoding.Zxid) encoding.Zxid { return z }
	if znode.IsSystem(path) {
		boot := zxidOf(n.data.create, 0)
		zx = func(z encoding.Zxid) encoding.Zxid {
			if z == boot {
				return 0
			}
			return z
		}
	}
	c := m.offs.Creates + m.creates.version
	return node{
		Data: n.value,
		Meta: n.meta,
		Stat: encoding.Stat{
			Czxid:          zx(czxid),
			Mzxid:          zx(mzxid),
			Ctime:          n.meta.Ctime,
			Mtime:          n.mtime,
			Version:        int32(n.data.version - 1 - m.offs.Version),
			Cversion:       int32(2*c - numChildren),
			Aversion:       int32(n.acl.version-m.offs.Aversion) + aversionOffset(path),
			EphemeralOwner: encoding.SessionID(n.lease),
			DataLength:     int32(len(n.value)),
			NumChildren:    int32(numChildren),
			Pzxid:          zx(pzxid),
		},
	}, nil
}

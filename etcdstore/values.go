package etcdstore

import (
	"encoding/binary"
	"errors"
	"fmt"

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
// deleted by one multi leaves no ACL key behind).
const journalACLFollows = 0x80

func encodeJournal(changes []watch.Change) string {
	var b []byte
	for _, c := range changes {
		kind := byte(c.Kind)
		if c.Kind == watch.Created && c.CreatedACL != nil {
			kind |= journalACLFollows
		}
		b = append(b, kind)
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

// decodeJournal returns the changes of a journal value, with zxid set to rev.
func decodeJournal(v []byte, rev int64) ([]watch.Change, error) {
	var out []watch.Change
	for len(v) > 0 {
		kind := watch.ChangeKind(v[0] &^ journalACLFollows)
		if len(v) < 5 || kind > watch.DataChanged {
			return nil, errors.New("zetcd: corrupt journal value")
		}
		hasACL := v[0]&journalACLFollows != 0
		n := binary.BigEndian.Uint32(v[1:5])
		if uint64(len(v)-5) < uint64(n) {
			return nil, errors.New("zetcd: corrupt journal value: short path")
		}
		c := watch.Change{Kind: kind, Path: string(v[5 : 5+n]), Zxid: encoding.Zxid(rev)}
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
// empty), the mtime in ms (big-endian int64), then the data.
const (
	dataHeaderLen = 9
	dataFlagNull  = 1
)

func encodeDataValue(data []byte, mtime int64) string {
	b := make([]byte, dataHeaderLen+len(data))
	if data == nil {
		b[0] = dataFlagNull
	}
	binary.BigEndian.PutUint64(b[1:9], uint64(mtime))
	copy(b[dataHeaderLen:], data)
	return string(b)
}

// decodeDataValue returns the node's data (nil for null data, non-nil empty for empty data) and
// mtime. The returned slice aliases v.
func decodeDataValue(v []byte) (data []byte, mtime int64, err error) {
	if len(v) < dataHeaderLen {
		return nil, 0, errors.New("zetcd: corrupt data value: too short")
	}
	mtime = int64(binary.BigEndian.Uint64(v[1:9]))
	if v[0]&dataFlagNull != 0 {
		return nil, mtime, nil
	}
	return v[dataHeaderLen:len(v):len(v)], mtime, nil
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

func encodeACLValue(v aclValue) string {
	b := make([]byte, 0, 32+16*len(v.ACL))
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(v.Ctime))
	b = binary.BigEndian.AppendUint32(b, uint32(v.Mode))
	b = binary.BigEndian.AppendUint64(b, uint64(v.TTL))
	b = encoding.AppendRecord(b, &encoding.SetACLRequest{ACL: v.ACL})
	return string(b)
}

func decodeACLValue(b []byte) (aclValue, error) {
	var v aclValue
	if len(b) < 21 || b[0] != 1 {
		return v, errors.New("zetcd: corrupt ACL value")
	}
	v.Ctime = int64(binary.BigEndian.Uint64(b[1:9]))
	v.Mode = encoding.CreateMode(int32(binary.BigEndian.Uint32(b[9:13])))
	v.TTL = int64(binary.BigEndian.Uint64(b[13:21]))
	var rec encoding.SetACLRequest
	if err := encoding.DecodeRecord(b[21:], &rec); err != nil {
		return v, fmt.Errorf("zetcd: corrupt ACL value: %w", err)
	}
	v.ACL = rec.ACL
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

// nodeKVs is what etcd returns for one znode: its data key, the keys under its meta prefix, and
// the number of its children.
type nodeKVs struct {
	path        string
	data        *mvccpb.KeyValue
	meta        []*mvccpb.KeyValue
	numChildren int64
}

// metaKeys sorts the keys read from a node's meta prefix into the ACL, child-create and
// child-delete keys; absent ones are nil.
func (k keySchema) metaKeys(path string, kvs []*mvccpb.KeyValue) (acl, creates, deletes *mvccpb.KeyValue) {
	p := k.metaPrefix(path)
	for _, kv := range kvs {
		switch string(kv.Key[len(p):]) {
		case "a":
			acl = kv
		case "c":
			creates = kv
		case "d":
			deletes = kv
		}
	}
	return acl, creates, deletes
}

// offsetsKV returns the node's offsets key among the keys read from its meta prefix, or nil.
func (k keySchema) offsetsKV(path string, kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	p := k.metaPrefix(path)
	for _, kv := range kvs {
		if string(kv.Key[len(p):]) == "o" {
			return kv
		}
	}
	return nil
}

// offsetsValue is the value of an offsets key: the differences between etcd's counters and
// ZooKeeper's for one node (see the offsets key above). The zero value changes nothing.
type offsetsValue struct {
	Version  int64 // ZooKeeper version  = data Version - 1 - Version
	Aversion int64 // ZooKeeper aversion = ACL Version - 1 - Aversion
	Creates  int64 // create counter C   = child-create Version + Creates
	// Czxid replaces the data key's CreateRevision after a multi deleted the node and created
	// it again (the data key survived the pair): czxidOwn means the offsets key's own
	// ModRevision (the offsets key was written by that multi), a positive value is the czxid.
	Czxid int64
}

const czxidOwn = -1

// offsetsValue is format byte 1 and four big-endian int64s.
const offsetsValueLen = 33

func encodeOffsetsValue(o offsetsValue) string {
	b := make([]byte, 1, offsetsValueLen)
	b[0] = 1
	for _, v := range []int64{o.Version, o.Aversion, o.Creates, o.Czxid} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return string(b)
}

func decodeOffsetsValue(b []byte) (offsetsValue, error) {
	if len(b) != offsetsValueLen || b[0] != 1 {
		return offsetsValue{}, errors.New("zetcd: corrupt offsets value")
	}
	f := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	return offsetsValue{Version: f(0), Aversion: f(1), Creates: f(2), Czxid: f(3)}, nil
}

// czxidOf applies an offsets value to the data key's CreateRevision.
func (o offsetsValue) czxidOf(data, offsets *mvccpb.KeyValue) int64 {
	switch {
	case o.Czxid == czxidOwn && offsets != nil:
		return offsets.ModRevision
	case o.Czxid > 0:
		return o.Czxid
	}
	return data.CreateRevision
}

// nodeZxidsResult is what nodeZxids derives.
type nodeZxidsResult struct {
	offsets      offsetsValue
	czxid, pzxid int64
}

// nodeZxids derives a node's czxid and pzxid from its data key and the keys of its meta prefix
// (with values: the offsets key's value corrects czxid):
//
//	pzxid = max(czxid, child-create key's ModRevision, child-delete key's ModRevision)
func (k keySchema) nodeZxids(path string, data *mvccpb.KeyValue, meta []*mvccpb.KeyValue) (nodeZxidsResult, error) {
	var z nodeZxidsResult
	offsKV := k.offsetsKV(path, meta)
	if offsKV != nil {
		var err error
		if z.offsets, err = decodeOffsetsValue(offsKV.Value); err != nil {
			return z, fmt.Errorf("%s: %w", path, err)
		}
	}
	z.czxid = z.offsets.czxidOf(data, offsKV)
	z.pzxid = z.czxid
	_, creates, deletes := k.metaKeys(path, meta)
	for _, kv := range []*mvccpb.KeyValue{creates, deletes} {
		if kv != nil {
			z.pzxid = max(z.pzxid, kv.ModRevision)
		}
	}
	return z, nil
}

// node is one znode decoded from etcd.
type node struct {
	Stat encoding.Stat
	Data []byte // nil for null data
	Meta aclValue
	// aclRev is the ACL key's ModRevision, the guard for a read-modify-write of the ACL.
	aclRev int64
}

// decodeNode derives a znode's Stat, data and ACL from its etcd keys (PROTOCOL.md §4.1):
//
//	czxid = data.CreateRevision       mzxid = data.ModRevision      version = data.Version-1
//	ctime = ACL value                  mtime = data value            aversion = acl.Version-1
//	C = creates.Version (0 if absent)  cversion = 2C - numChildren   numChildren = counted
//	pzxid = max(czxid, creates.ModRevision, deletes.ModRevision)
//	ephemeralOwner = data.Lease (0 for persistent, container and TTL nodes)
//
// corrected by the offsets key where a multi left one (offsetsValue).
//
// System nodes were written by the bootstrap transaction; a zxid equal to their own create
// revision is that bootstrap and is reported as 0, as a fresh ZooKeeper reports it.
func (k keySchema) decodeNode(n nodeKVs) (node, error) {
	var out node
	if n.data == nil {
		return out, errors.New("zetcd: decodeNode of a missing node")
	}
	data, mtime, err := decodeDataValue(n.data.Value)
	if err != nil {
		return out, fmt.Errorf("%s: %w", n.path, err)
	}
	aclKV, creates, _ := k.metaKeys(n.path, n.meta)
	if aclKV == nil {
		return out, fmt.Errorf("zetcd: %s: ACL key missing", n.path)
	}
	meta, err := decodeACLValue(aclKV.Value)
	if err != nil {
		return out, fmt.Errorf("%s: %w", n.path, err)
	}
	z, err := k.nodeZxids(n.path, n.data, n.meta)
	if err != nil {
		return out, err
	}
	offs, czxid, pzxid := z.offsets, z.czxid, z.pzxid
	c := offs.Creates
	if creates != nil {
		c += creates.Version
	}
	zx := func(rev int64) encoding.Zxid { return encoding.Zxid(rev) }
	if znode.IsSystem(n.path) {
		boot := n.data.CreateRevision
		zx = func(rev int64) encoding.Zxid {
			if rev == boot {
				return 0
			}
			return encoding.Zxid(rev)
		}
	}
	out.Data = data
	out.Meta = meta
	out.aclRev = aclKV.ModRevision
	out.Stat = encoding.Stat{
		Czxid:          zx(czxid),
		Mzxid:          zx(n.data.ModRevision),
		Ctime:          meta.Ctime,
		Mtime:          mtime,
		Version:        int32(n.data.Version - 1 - offs.Version),
		Cversion:       int32(2*c - n.numChildren),
		Aversion:       int32(aclKV.Version-1-offs.Aversion) + aversionOffset(n.path),
		EphemeralOwner: encoding.SessionID(n.data.Lease),
		DataLength:     int32(len(data)),
		NumChildren:    int32(n.numChildren),
		Pzxid:          zx(pzxid),
	}
	return out, nil
}

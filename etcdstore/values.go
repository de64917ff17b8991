package etcdstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
)

// The values of the keys of keys.go: pure codecs, tested by round trips (values_test.go). A
// node's Stat derived from its keys is stat.go.

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
	n := 0
	for _, c := range changes {
		n += 7 + len(c.Path) // kind, index, length, path
	}
	b := make([]byte, 0, n)
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
			// The record's length goes before it, once it is appended.
			at := len(b)
			b = binary.BigEndian.AppendUint32(b, 0)
			b = encoding.AppendACLRecord(b, c.CreatedACL)
			binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
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
	b := make([]byte, 0, dataHeaderLenIndexes+4+aclValueLen(meta)+len(data))
	b = appendDataValue(b, data, mtime, ix, meta)
	// b is never written after: the string shares its bytes (as strings.Builder does).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendDataValue appends a data key's value to b.
func appendDataValue(b, data []byte, mtime int64, ix zxidIndexes, meta aclValue) []byte {
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
	header += 4 // the meta's length, written once the meta is
	start := len(b)
	b = append(b, h[:header]...)
	b = appendACLValue(b, meta)
	binary.BigEndian.PutUint32(b[start+header-4:], uint32(len(b)-start-header))
	return append(b, data...)
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
func encodeIndexValue(index uint16) string { return string(appendIndexValue(nil, index)) }

func appendIndexValue(b []byte, index uint16) []byte {
	if index == 0 {
		return b
	}
	return binary.BigEndian.AppendUint16(b, index)
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
	return encoding.AppendACLRecord(b, v.ACL)
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
// ms (int32), then the process id of the zetcd serving the session (uint64). A 20-byte
// value, without the process id, decodes with process id 0, which names no process.
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
// format 1 holds a positive Czxid as a revision (its write's index 0).
const offsetsValueLen = 33

func encodeOffsetsValue(o offsetsValue) string {
	return string(appendOffsetsValue(make([]byte, 0, offsetsValueLen), o))
}

func appendOffsetsValue(b []byte, o offsetsValue) []byte {
	b = append(b, 2)
	for _, v := range []int64{o.Version, o.Aversion, o.Creates, o.Czxid} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
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

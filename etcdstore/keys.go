package etcdstore

// This file is the whole mapping of the ZooKeeper tree onto etcd keys: key building and parsing,
// value layouts and Stat derivation, as pure functions. Change the schema here and only here.
//
// Keys, all under the configured prefix P (default "/zk/"); d is the depth of a path ("/" is 0,
// "/a" is 1, "/a/b" is 2) in decimal:
//
//	P n/<d><path>          data key: one per znode. Value: dataValue. etcd's own metadata gives
//	                       czxid (CreateRevision), mzxid (ModRevision), version (Version-1) and
//	                       ephemeralOwner (Lease: an ephemeral node is attached to its session's
//	                       lease). The children of /a/b are exactly the keys with prefix
//	                       "P n/3/a/b/", so one range lists (or counts) them and nothing deeper.
//	P m/<d><path>\x00a     ACL key: ctime, create mode, TTL and ACL list. Version-1 is aversion.
//	                       Rewritten only by setACL, so mzxid does not move on setACL.
//	P m/<d><path>\x00c     child-create key: rewritten (blind put, empty value) on every child
//	                       create. Its Version is ZooKeeper's per-node create counter C, which
//	                       names sequential children; ZooKeeper reports cversion = 2C - numChildren.
//	P m/<d><path>\x00d     child-delete key: rewritten on every child delete, so that pzxid (the
//	                       newest of czxid and the ModRevisions of the c and d keys) moves.
//	P m/<d><path>\x00o     offsets key, usually absent: written only by a multi (multi.go)
//	                       whose ops change a node more than once, since one etcd Txn can put a
//	                       key only once. Value: offsetsValue, the corrections from etcd's
//	                       counters to ZooKeeper's (create then setData in one multi: data
//	                       Version 1 is ZooKeeper version 1; two child creates: c Version +1 is
//	                       C + 2; delete then create again: the surviving keys keep their old
//	                       CreateRevision and Versions). Attached to the session's lease for an
//	                       ephemeral node, so it never outlives the node. Single-op writes whose
//	                       compare depends on these counters (setData/delete with a version, a
//	                       sequential create) read or guard it.
//	P r<path>              reap index key, one per container and TTL node (empty value): written
//	                       with the node, deleted with it, so that the reaper (reaper.go)
//	                       finds its candidates with one range instead of a scan of the tree.
//	P e/reaper/            election prefix of the one zetcd process per cluster that reaps.
//	P s/<session id hex>   session key, attached to the session's lease: password, timeout and
//	                       the process id of the zetcd serving it (sessionValue).
//	P p/<process id hex>   process key, one per live zetcd process, attached to a short lease
//	                       of its own (empty value): a session whose serving process has no
//	                       process key is orphaned, and the elected leader ends it at its
//	                       timeout (orphans.go).
//	P x                    error key: a failed write puts it so that it consumes a zxid (revision)
//	                       as a failed write does in ZooKeeper.
//	P j                    journal key: a successful multi puts its per-op changes here (value:
//	                       journalValue) in its own revision. A multi writes each key once, its
//	                       net change, so the data-key events of its revision can differ from
//	                       ZooKeeper's per-op watch triggers (delete then create one node); the
//	                       watch feed fires the journal instead.
//
// The meta keys of a node share the prefix "P m/<d><path>\x00" (paths never contain NUL), so one
// range reads them all. A node's own c and d keys are absent until it has had a child: C=0.
// Ephemeral nodes never get c or d keys (they cannot have children).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
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

// childName extracts a child's name from its data key, given childrenPrefix of the parent.
func childName(key []byte, childrenPrefix string) string {
	return string(key[len(childrenPrefix):])
}

// metaPrefix is the common prefix of a node's ACL, child-create and child-delete keys.
func (k keySchema) metaPrefix(path string) string {
	return k.prefix + "m/" + strconv.Itoa(depth(path)) + path + "\x00"
}

func (k keySchema) acl(path string) string          { return k.metaPrefix(path) + "a" }
func (k keySchema) childCreates(path string) string { return k.metaPrefix(path) + "c" }
func (k keySchema) childDeletes(path string) string { return k.metaPrefix(path) + "d" }
func (k keySchema) offsets(path string) string      { return k.metaPrefix(path) + "o" }

// reapIndex is the reap index key of a container or TTL node; reapIndexPrefix lists them all.
func (k keySchema) reapIndex(path string) string { return k.prefix + "r" + path }
func (k keySchema) reapIndexPrefix() string      { return k.prefix + "r/" }

// pathOfReapIndex inverts reapIndex.
func (k keySchema) pathOfReapIndex(key string) (string, bool) {
	p, ok := strings.CutPrefix(key, k.prefix+"r")
	return p, ok && strings.HasPrefix(p, "/")
}

// reaperElection is the election prefix of the reaper (client/v3/concurrency).
func (k keySchema) reaperElection() string { return k.prefix + "e/reaper/" }

func (k keySchema) session(id encoding.SessionID) string {
	return k.prefix + "s/" + fmt.Sprintf("%016x", uint64(id))
}

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

// processOfKey inverts process.
func (k keySchema) processOfKey(key string) (uint64, bool) {
	hex, ok := strings.CutPrefix(key, k.processKeysPrefix())
	if !ok || len(hex) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	return v, err == nil
}

func (k keySchema) errorKey() string { return k.prefix + "x" }

func (k keySchema) journal() string { return k.prefix + "j" }

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

// pathOfACLKey inverts acl: it returns the znode path of an ACL key.
func (k keySchema) pathOfACLKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"m/")
	if !ok {
		return "", false
	}
	rest, ok = strings.CutSuffix(rest, "\x00a")
	i := strings.IndexByte(rest, '/')
	if !ok || i <= 0 {
		return "", false
	}
	return rest[i:], true
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

package etcdstore

import (
	"context"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
)

// The multi engine: the overlay on which every create, delete, setData and multi is checked and
// from which its etcd writes are made; the committer (commit.go) runs it for a batch of writes.
//
//  1. Every node the ops touch (the op paths and the parents of creates and deletes) is read
//     from the replica at one revision (its keys as nodeKeys, and its number of children), once
//     the replica has reached the writes' floors; from etcd in one read Txn if it cannot.
//  2. The ops are simulated in order on an in-memory overlay of that state with ZooKeeper's
//     per-op checks (PROTOCOL.md §3.2), so every op sees the effects of the earlier ones. The
//     outcome is either the failing op and its code, or each op's result and the final state of
//     every touched node.
//  3. The commit's compares pin every key that was read (its ModRevision, 0 for an absent key;
//     the child-create and child-delete keys of a parent move on every child create and delete,
//     so they pin its children too), and its writes are the difference between the state read
//     and the final state. A failed write changes nothing but consumes its zxid, as in
//     ZooKeeper. Either way the answer rests on a state etcd confirmed: a compare failing means
//     the state read was behind (a replica that had not applied a concurrent write yet): read
//     again once the replica has reached the failed commit's revision, and retry.
//
// A multi is one zxid for all its ops. A sequential create's name depends on its parent's create
// counter, so it is not known before the read: the check reads it from the replica while that is
// still at the revision of the read (multiState.lookup), and otherwise assumes it absent and
// guards that like a read key (and reads it for real after a conflict).

// pendingZxid stands for the zxid of the write numbered index in the commit's revision, in the
// Stats of simulated nodes, until the revision is known (patchZxid).
func pendingZxid(index uint16) encoding.Zxid { return encoding.Zxid(-1 - int64(index)) }

// mop is one op of a write multi as ZooKeeper 3.9 decodes it (see parseMulti), or a setACL,
// which is never one of a multi's ops (the committer gives it a batch of its own).
type mop struct {
	op      encoding.Op // OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpSetData, OpCheck or OpSetACL
	path    string
	data    []byte
	acl     []encoding.ACL
	flags   encoding.CreateMode
	ttl     int64 // -1 unless op is OpCreateTTL
	version int32
}

// multiRefusal says why ZooKeeper refuses a whole multi request with MarshallingError before
// looking at the tree, and whether the refusal consumes a zxid.
type multiRefusal int

const (
	multiAccepted multiRefusal = iota
	// multiRefusedTxn: ZooKeeper logs an error txn (one zxid), like a failed write.
	multiRefusedTxn
	// multiRefusedEarly: ZooKeeper fails before assigning a zxid.
	multiRefusedEarly
)

// parseMulti turns a multi's ops into mops the way ZooKeeper 3.9's MultiOperationRecord does,
// op by op, which retypes create ops by their flags (checked against ZooKeeper 3.9.6):
//   - create, create2, createContainer: invalid flags refuse the request (error txn); then a
//     null ACL list refuses it before any txn; then TTL flags refuse it (error txn); container
//     flags make a createContainer; else the opcode is kept.
//   - createTTL: TTL flags keep it; container flags make a createContainer; any other flags
//     (also invalid ones, which the create checks then refuse) make a plain create, ttl dropped.
//   - getData, getChildren: a read op among write ops, or a multi of read ops only, refuses the
//     request (error txn).
//
// The first refused op decides; then a null path in any op refuses the request (error txn).
func parseMulti(ops []encoding.MultiOp) ([]mop, multiRefusal) {
	out := make([]mop, 0, len(ops))
	reads := 0
	for _, o := range ops {
		m := mop{op: o.Op, ttl: -1, version: -1}
		switch r := o.Record.(type) {
		case *encoding.CreateRequest:
			switch {
			case !r.Flags.Valid():
				return nil, multiRefusedTxn
			case r.ACL == nil:
				return nil, multiRefusedEarly
			case r.Flags.IsTTL():
				return nil, multiRefusedTxn
			case r.Flags.IsContainer():
				m.op = encoding.OpCreateContainer
			}
			m.path, m.data, m.acl, m.flags = r.Path, r.Data, r.ACL, r.Flags
		case *encoding.CreateTTLRequest:
			m.path, m.data, m.acl, m.flags = r.Path, r.Data, r.ACL, r.Flags
			switch {
			case r.Flags.IsTTL():
				m.ttl = r.TTL
			case r.Flags.IsContainer():
				m.op = encoding.OpCreateContainer
			default:
				m.op = encoding.OpCreate
			}
		case *encoding.DeleteRequest:
			m.path, m.version = r.Path, r.Version
		case *encoding.SetDataRequest:
			m.path, m.data, m.version = r.Path, r.Data, r.Version
		case *encoding.CheckVersionRequest:
			m.path, m.version = r.Path, r.Version
		default: // getData, getChildren
			if len(out) > 0 {
				return nil, multiRefusedTxn
			}
			reads++
			continue
		}
		if reads > 0 {
			return nil, multiRefusedTxn
		}
		out = append(out, m)
	}
	if reads > 0 {
		return nil, multiRefusedTxn
	}
	// ZooKeeper looks up every op's path before it checks the first op, which a null path
	// (encoding.NullString) fails with MarshallingError, in an error txn.
	for _, m := range out {
		if m.path == encoding.NullString {
			return nil, multiRefusedTxn
		}
	}
	return out, multiAccepted
}

// mnode is one znode in a multi's overlay: the keys read at the read revision, and its state
// after the ops simulated so far.
type mnode struct {
	path string
	// read is false for a node that was not read (a sequential name): it is assumed absent,
	// and the commit guards that.
	read bool
	// keys are the node's keys as read (nodeKeys.exists false: the data key is absent).
	keys nodeKeys

	// Simulated state. stat.Cversion is derived from c when a Stat is handed out.
	exists bool
	stat   encoding.Stat
	c      int64 // create counter C
	data   []byte
	meta   aclValue

	touched      bool // changed by an op (or a parent of a changed node)
	created      bool // (re)created by this multi: czxid is the commit's revision
	dataWrites   int  // setData ops since it was read or created
	aclWrites    int  // setACL ops since it was read or created
	childCreates int  // children created since it was read or created
	childDeletes int  // children deleted since it was read or created
	// The indexes (zxid.go) of the writes that last created the node, put its data (setData or
	// create), created a child and deleted a child, for the values that keep them (values.go).
	createdIx, dataIx, createsIx, deletesIx uint16
}

// statNow returns the node's Stat after the ops simulated so far.
func (n *mnode) statNow() encoding.Stat {
	st := n.stat
	st.Cversion = int32(2*n.c - int64(st.NumChildren))
	return st
}

// multiState is a multi's overlay of the tree.
type multiState struct {
	keys keySchema
	// rev is the replica's revision the overlay was read at, with no node read too: every
	// change of the tree and of the session keys up to rev is in what the check saw
	// (observeSessionKeys runs before the replica shows a revision), so guards compare
	// against it.
	rev   int64
	nodes map[string]*mnode
	// lookup reads a node the read set could not name (a sequential create's name) at rev, or
	// returns nil: the replica has moved past rev. A node it cannot read is assumed absent,
	// and the commit guards its absence.
	lookup func(path string) *mnode
	// auth is the identities of the connection running the multi, for the ACL checks;
	// providers says which optional schemes ACLs may name (znode.FixupACL).
	auth      *znode.Identities
	providers znode.Providers
	// room is what the ops may add (spaceMonitor.room); growth how much the ops simulated so
	// far grow the data (negative: shrink it), puts how many bytes of data they put.
	room         room
	growth, puts int64
	// index numbers the write being simulated in the commit's revision (zxid.go).
	index uint16
	// undo holds, by path, the index in saved of the node as it was before the write being
	// simulated changed or looked at it (-1: not in nodes), and undoGrowth, undoPuts growth
	// and puts; nil undo: the simulation cannot be rolled back (begin). saved is reused from
	// write to write: a batch copies its nodes into one array rather than one object each.
	undo                 map[string]int
	saved                []mnode
	undoGrowth, undoPuts int64
}

// begin starts the simulation of one write, which rollback can undo.
func (m *multiState) begin() {
	if m.undo == nil {
		m.undo = map[string]int{}
	}
	clear(m.undo)
	m.saved = m.saved[:0]
	m.undoGrowth, m.undoPuts = m.growth, m.puts
}

// rollback undoes the write simulated since begin. A node the write looked at without having
// been read stays, reset to absent and unread: the commit guards its absence, which the
// write's failure may rest on.
func (m *multiState) rollback() {
	for p, i := range m.undo {
		if i < 0 {
			*m.nodes[p] = mnode{path: p}
			continue
		}
		*m.nodes[p] = m.saved[i]
	}
	clear(m.undo)
	m.growth, m.puts = m.undoGrowth, m.undoPuts
}

// grow accounts an op that puts put bytes of data and changes the data by delta bytes:
// QuotaExceeded if it grows the data past the room there is, or puts data without shrinking
// any past the file's hard limit (space.go). ZooKeeper checks its quota after an op's other
// checks.
func (m *multiState) grow(delta, put int64) encoding.ErrCode {
	if delta > 0 && m.growth+delta > m.room.grow || delta >= 0 && put > 0 && m.puts+put > m.room.put {
		return encoding.ErrQuotaExceeded
	}
	m.growth += delta
	m.puts += put
	return 0
}

// node returns the overlay's node for path; a path that was not read is assumed absent.
func (m *multiState) node(path string) *mnode {
	n := m.nodes[path]
	if m.undo != nil {
		if _, saved := m.undo[path]; !saved {
			m.undo[path] = -1
			if n != nil {
				m.saved = append(m.saved, *n)
				m.undo[path] = len(m.saved) - 1
			}
		}
	}
	if n == nil {
		if m.lookup != nil {
			n = m.lookup(path)
		}
		if n == nil {
			n = &mnode{path: path}
		}
		m.nodes[path] = n
	}
	return n
}

// readSet returns, sorted and each once, extra and the paths the writes' ops need read: the op
// paths and the parents of creates and deletes. A sequential create's own name is not known yet.
func readSet(batch []*pendingWrite, extra []string) []string {
	set := map[string]bool{}
	for _, p := range extra {
		set[p] = true
	}
	for _, w := range batch {
		addReadSet(set, w.ops)
	}
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// addReadSet adds to set the paths ops need read (readSet).
func addReadSet(set map[string]bool, ops []mop) {
	for _, o := range ops {
		switch o.op {
		case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
			if parent, ok := znode.Parent(o.path); ok {
				set[parent] = true
			}
			if !o.flags.IsSequential() {
				set[o.path] = true
			}
		case encoding.OpDelete:
			if parent, ok := znode.Parent(o.path); ok {
				set[parent] = true
			}
			set[o.path] = true
		default:
			set[o.path] = true
		}
	}
}

// readMultiState builds the overlay of paths at one revision, from the replica once it has
// reached floor and everything this process answered (awaitFloor).
func (b *Store) readMultiState(ctx context.Context, paths []string, floor int64) (*multiState, error) {
	m := &multiState{keys: b.keys, nodes: make(map[string]*mnode, len(paths)+4), room: b.space.room()}
	if len(paths) == 0 {
		m.rev = b.tree.revision()
		return m, nil
	}
	if err := b.awaitFloor(ctx, floor); err != nil {
		return nil, err
	}
	var err error
	read := make([]mnode, len(paths)) // one allocation for the nodes read
	m.rev = b.tree.read(func(v replicaView) {
		for i, p := range paths {
			n := &read[i]
			if err = v.overlayNode(n, p); err != nil {
				return
			}
			m.nodes[p] = n
		}
	})
	m.lookup = func(p string) *mnode { return b.tree.nodeAt(p, m.rev) }
	return m, err
}

// fromKeys makes n the overlay's node for the keys read of path.
func (n *mnode) fromKeys(path string, keys nodeKeys, numChildren int64) error {
	*n = mnode{path: path, read: true, keys: keys}
	if !keys.exists() {
		return keys.decodeErr()
	}
	nd, err := keys.node(path, numChildren)
	if err != nil {
		return err
	}
	more := keys.moreOrZero()
	n.exists, n.stat, n.data, n.meta = true, nd.Stat, nd.Data, nd.Meta
	n.c = more.offs.Creates + more.creates.version
	return nil
}

// Node implements znode.View over the overlay: the tree as read, with the ops simulated so far.
// A path the check looks at is recorded (m.node), read or not, so that the commit guards every
// node a decision rested on, also the absence of one that was not read.
func (m *multiState) Node(path string) znode.Node {
	n := m.node(path)
	if !n.exists {
		return znode.Node{}
	}
	return znode.Node{
		Exists: true, Version: n.stat.Version, Aversion: n.stat.Aversion, NumChildren: n.stat.NumChildren,
		EphemeralOwner: n.stat.EphemeralOwner, ACL: n.meta.ACL, Creates: n.c,
	}
}

func (m *multiState) apply(o mop, owner encoding.SessionID, now int64) (encoding.MultiResult, encoding.ErrCode) {
	switch o.op {
	case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
		return m.create(o, owner, now)
	case encoding.OpDelete:
		return m.delete(o)
	case encoding.OpSetData:
		if code := znode.CheckSetData(m, o.path, o.version, m.auth); code != 0 {
			return encoding.MultiResult{}, code
		}
		n := m.node(o.path)
		if code := m.grow(int64(len(o.data))-int64(len(n.data)), int64(len(o.data))); code != 0 {
			return encoding.MultiResult{}, code
		}
		n.touched = true
		n.dataWrites++
		n.data = o.data
		n.stat.Version++
		n.dataIx = m.index
		n.stat.Mzxid, n.stat.Mtime = pendingZxid(m.index), now
		n.stat.DataLength = int32(len(o.data))
		return encoding.MultiResult{Op: encoding.OpSetData, Record: &encoding.SetDataResponse{Stat: n.statNow()}}, 0
	case encoding.OpCheck:
		if code := znode.CheckVersion(m, o.path, o.version, m.auth); code != 0 {
			return encoding.MultiResult{}, code
		}
		return encoding.MultiResult{Op: encoding.OpCheck}, 0
	case encoding.OpSetACL:
		// o.acl is the request's list after znode.FixupACL; mzxid does not move.
		if code := znode.CheckSetACL(m, o.path, o.version, m.auth); code != 0 {
			return encoding.MultiResult{}, code
		}
		n := m.node(o.path)
		n.touched = true
		n.aclWrites++
		n.meta.ACL = o.acl
		n.stat.Aversion++
		return encoding.MultiResult{Op: encoding.OpSetACL, Record: &encoding.SetACLResponse{Stat: n.statNow()}}, 0
	}
	return encoding.MultiResult{}, encoding.ErrBadArguments
}

// create simulates the create variants after znode.CheckCreate, the checks of a single create.
func (m *multiState) create(o mop, owner encoding.SessionID, now int64) (encoding.MultiResult, encoding.ErrCode) {
	name, acl, code := znode.CheckCreate(m, znode.CreateOp{Op: o.op, Path: o.path, ACL: o.acl, Flags: o.flags, TTL: o.ttl}, m.auth, m.providers)
	if code != 0 {
		return encoding.MultiResult{}, code
	}
	if code := m.grow(createBytes(name, o.data), createBytes(name, o.data)); code != 0 {
		return encoding.MultiResult{}, code
	}
	parentP, _ := znode.Parent(o.path)
	parent, n := m.node(parentP), m.node(name)
	kind := znode.Kind(o.op, o.flags)
	var lease encoding.SessionID
	if kind == encoding.ModeEphemeral {
		lease = owner
	}
	ttl := int64(0)
	if kind.IsTTL() {
		ttl = o.ttl
	}
	z := pendingZxid(m.index)
	*n = mnode{
		path: n.path, read: n.read,
		keys:   n.keys,
		exists: true, touched: true, created: true,
		data: o.data,
		meta: aclValue{Ctime: now, Mode: kind, TTL: ttl, ACL: acl},
		stat: encoding.Stat{
			Czxid: z, Mzxid: z, Pzxid: z, Ctime: now, Mtime: now,
			EphemeralOwner: lease, DataLength: int32(len(o.data)),
		},
		createdIx: m.index, dataIx: m.index, createsIx: m.index,
	}
	parent.touched = true
	parent.c++
	parent.childCreates++
	parent.createsIx = m.index
	parent.stat.NumChildren++
	parent.stat.Pzxid = z
	if o.op == encoding.OpCreate {
		return encoding.MultiResult{Op: encoding.OpCreate, Record: &encoding.CreateResponse{Path: name}}, 0
	}
	return encoding.MultiResult{Op: encoding.OpCreate2, Record: &encoding.Create2Response{Path: name, Stat: n.statNow()}}, 0
}

// delete simulates a delete after znode.CheckDelete, the checks of a single delete.
func (m *multiState) delete(o mop) (encoding.MultiResult, encoding.ErrCode) {
	if code := znode.CheckDelete(m, o.path, o.version, m.auth); code != 0 {
		return encoding.MultiResult{}, code
	}
	parentP, _ := znode.Parent(o.path)
	parent, n := m.node(parentP), m.node(o.path)
	m.grow(-createBytes(o.path, n.data), 0)
	*n = mnode{
		path: n.path, read: n.read,
		keys:    n.keys,
		touched: true,
	}
	parent.touched = true
	parent.childDeletes++
	parent.deletesIx = m.index
	parent.stat.NumChildren--
	parent.stat.Pzxid = pendingZxid(m.index)
	return encoding.MultiResult{Op: encoding.OpDelete}, 0
}

// guards returns the compares that pin the state the simulation started from.
//
// With fence, one compare on the fence key stands for the compares of every node read: no
// transaction that puts it (every write to the tree but an expiring lease's, keys.go) has
// committed since the read. A node of a session's lease keeps its own compare, the lease may
// expire; so does a node guarded as absent without being read (a sequential create's name),
// which may have been created before the read.
func (m *multiState) guards(fence bool) []clientv3.Cmp {
	paths := make([]string, 0, len(m.nodes))
	for p := range m.nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var cmps []clientv3.Cmp
	if fence && len(paths) > 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(m.keys.fence()), "<", m.rev+1))
	}
	for _, p := range paths {
		n := m.nodes[p]
		if fence && n.read && n.keys.lease == 0 {
			continue
		}
		if !n.read {
			cmps = append(cmps,
				clientv3.Compare(clientv3.CreateRevision(m.keys.data(p)), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(m.keys.metaPrefix(p)), "=", 0).WithPrefix())
			continue
		}
		// A meta key is written with a revision past the read, or deleted only together with
		// the data key (a node deleted) or while a child-create or data key is put (an
		// offsets key no longer needed), so two compares pin all of a node's keys. A node
		// read with no key at all needs one: whatever makes it exist puts its data key.
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(m.keys.data(p)), "=", n.keys.data.mod))
		if !n.keys.empty() {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(m.keys.metaPrefix(p)), "<", m.rev+1).WithPrefix())
		}
	}
	return cmps
}

// writes returns the etcd writes that turn the state read into the simulated final state. etcd
// lets a Txn write a key once, so each key gets at most one op, and where that leaves etcd's
// counters out of step with ZooKeeper's the offsets key records the difference (keys.go).
func (m *multiState) writes() []txnWrite {
	paths := make([]string, 0, len(m.nodes))
	for p, n := range m.nodes {
		if n.touched {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	// Mostly one or two ops a node; three more for the commit's fence, journal and error keys.
	ops := make([]txnWrite, 0, 2*len(paths)+3)
	k := m.keys
	for _, p := range paths {
		n := m.nodes[p]
		if !n.exists {
			ops = appendDeleteOps(ops, k, p, &n.keys)
			continue
		}
		lease := int64(n.stat.EphemeralOwner)
		recreated := n.created && n.keys.exists()
		more := n.keys.moreOrZero()

		// Data key: a created node gets its lease (or none, detaching a recreated node's old
		// one); a setData keeps the lease read, named rather than kept with WithIgnoreLease,
		// which makes etcd read the key twice more while it applies the transaction (a
		// fifth of its CPU at setData on 64 connections). The guards pin the key, and only
		// a put changes a key's lease; a node of a lease is guarded on its own, so a lease
		// revoked since the read fails the guard rather than the put.
		putData := n.created || n.dataWrites > 0
		if putData {
			dataLease := n.keys.lease
			ix := zxidIndexes{czxid: n.keys.ix.czxid, mzxid: n.dataIx}
			if n.created {
				dataLease, ix.czxid = lease, n.createdIx
			}
			ops = append(ops, txnWrite{key: k.data(p), value: encodeDataValue(n.data, n.stat.Mtime, ix, n.meta), lease: dataLease})
		}
		dataVersion := n.keys.data.version
		if putData {
			dataVersion++
		}
		// The ACL key holds the ACL a setACL gave the node. A node created again over one
		// that had an ACL key puts it too, rather than delete it: an ACL key is deleted only
		// with its data key (nodeKeys.putData). An ephemeral's ACL key shares its lease.
		aclVersion := n.keys.acl.version
		if n.aclWrites > 0 || n.created && n.keys.acl.mod != 0 {
			ops = append(ops, txnWrite{key: k.acl(p), value: encodeACLValue(n.meta), lease: lease})
			aclVersion++
		}
		// A recreated node's old child-create key is put too, so that its counter moves
		// (sequential creates guard on it) while the offsets key resets C. The node's
		// createsIx is its creation's index unless a child was created since.
		createsVersion := more.creates.version
		if n.childCreates > 0 || n.created && more.creates.mod != 0 {
			ops = append(ops, txnWrite{key: k.childCreates(p), value: encodeIndexValue(n.createsIx)})
			createsVersion++
		}
		if n.childDeletes > 0 {
			ops = append(ops, txnWrite{key: k.childDeletes(p), value: encodeIndexValue(n.deletesIx)})
		}
		want := offsetsValue{
			Version:  dataVersion - 1 - int64(n.stat.Version),
			Aversion: aclVersion + int64(aversionOffset(p)) - int64(n.stat.Aversion),
			Creates:  n.c - createsVersion,
		}
		switch {
		case recreated:
			want.Czxid = czxidOwn(n.createdIx)
		case more.offs.Czxid < 0:
			want.Czxid = int64(zxidOf(more.offsets.mod, int(-1-more.offs.Czxid)))
		default:
			want.Czxid = more.offs.Czxid
		}
		// An offsets key written by an earlier recreation keeps its czxid, made explicit if the
		// key is rewritten (its own ModRevision moves).
		sameCounters := want.Version == more.offs.Version && want.Aversion == more.offs.Aversion && want.Creates == more.offs.Creates
		if recreated || !sameCounters {
			if want == (offsetsValue{}) {
				ops = append(ops, txnWrite{key: k.offsets(p), del: true})
			} else {
				ops = append(ops, txnWrite{key: k.offsets(p), value: encodeOffsetsValue(want), lease: lease})
			}
		}
		if n.created {
			if znode.IsReaped(n.meta.Mode) {
				ops = append(ops, txnWrite{key: k.reapIndex(p)})
			} else if recreated {
				ops = append(ops, txnWrite{key: k.reapIndex(p), del: true})
			}
		}
	}
	return ops
}

// appendDeleteOps appends to ops the ops that delete the keys of the node at p, as read (keys):
// the guards pin them, so only the keys read are deleted, each by its own key (etcd finds a key
// faster than it scans a prefix; a delete of a key that is not there costs a lookup all the
// same). The reap index key exists for a container or TTL node only; the meta keys other than
// the ACL key (a node that has had children, or an offsets key) are deleted by their prefix.
func appendDeleteOps(ops []txnWrite, k keySchema, p string, keys *nodeKeys) []txnWrite {
	if keys.exists() {
		ops = append(ops, txnWrite{key: k.data(p), del: true})
		if znode.IsReaped(keys.meta.Mode) {
			ops = append(ops, txnWrite{key: k.reapIndex(p), del: true})
		}
	}
	switch {
	case keys.more != nil:
		ops = append(ops, txnWrite{key: k.metaPrefix(p), del: true, prefix: true})
	case keys.acl.mod != 0:
		ops = append(ops, txnWrite{key: k.acl(p), del: true})
	}
	return ops
}

// patchZxid replaces the pending zxids in a Stat by the zxids of the commit's revision rev.
func patchZxid(st *encoding.Stat, rev int64) {
	for _, f := range []*encoding.Zxid{&st.Czxid, &st.Mzxid, &st.Pzxid} {
		if *f < 0 {
			*f = zxidOf(rev, int(-1-*f))
		}
	}
}

// runMulti executes ops as one write at one zxid, through the committer (commit.go). On
// success failed is 0 and results hold each op's result; when an op fails, failed is its code
// and results are ZooKeeper's error list (0 before it, its code, RuntimeInconsistency after it).
// err is set only when the request could not be served (etcd unreachable; a vanished session
// is SessionExpired).
func (s *etcdSession) runMulti(ctx context.Context, opName string, ops []mop) (results []encoding.MultiResult, failed encoding.ErrCode, z encoding.Zxid, err error) {
	o := s.b.commits.submit(ctx, &pendingWrite{s: s, opName: opName, ops: ops, floor: s.lastRev})
	if o.err != nil {
		path := ""
		if len(ops) > 0 {
			path = ops[0].path
		}
		z, err := s.etcdFailure(opName, path, o.err)
		return nil, 0, z, err
	}
	return o.results, o.failed, s.writeZxid(o.rev, o.index), nil
}

// simulate applies ops to the overlay in order until one fails: the results so far, and the
// index and code of the failed op (-1 and 0 when none failed).
func (m *multiState) simulate(ops []mop, owner encoding.SessionID, now int64) (results []encoding.MultiResult, failedAt int, failed encoding.ErrCode) {
	if len(ops) == 0 {
		return nil, -1, 0 // ZooKeeper answers an empty multi with a null result list
	}
	results = make([]encoding.MultiResult, len(ops))
	for i, o := range ops {
		res, code := m.apply(o, owner, now)
		if code != 0 {
			return results, i, code
		}
		results[i] = res
	}
	return results, -1, 0
}

// unreadPaths lists the overlay's nodes that were guarded as absent without being read.
func (m *multiState) unreadPaths() []string {
	var out []string
	for p, n := range m.nodes {
		if !n.read {
			out = append(out, p)
		}
	}
	return out
}

// errorResults is a failed multi's reply: ok for the ops before the failed one, its code for
// it, RuntimeInconsistency for the ops after it, as ZooKeeper answers.
func errorResults(n, failedAt int, failed encoding.ErrCode) []encoding.MultiResult {
	results := make([]encoding.MultiResult, n)
	for i := range results {
		switch {
		case i < failedAt:
			results[i] = encoding.MultiResult{Op: encoding.OpError, Err: encoding.ErrOK}
		case i == failedAt:
			results[i] = encoding.MultiResult{Op: encoding.OpError, Err: failed}
		default:
			results[i] = encoding.MultiResult{Op: encoding.OpError, Err: encoding.ErrRuntimeInconsistency}
		}
	}
	return results
}

// committedMulti puts the zxids of the commit's revision rev in the Stats of a multi's results.
func committedMulti(results []encoding.MultiResult, rev int64) {
	for i := range results {
		switch rec := results[i].Record.(type) {
		case *encoding.Create2Response:
			patchZxid(&rec.Stat, rev)
		case *encoding.SetDataResponse:
			patchZxid(&rec.Stat, rev)
		case *encoding.SetACLResponse:
			patchZxid(&rec.Stat, rev)
		}
	}
}

// journalOf lists a successful multi's changes in op order, as ZooKeeper fires their watches,
// with the ACL each create gave its node (the ACL fixup again, with the same identities), as the
// changes of the write numbered index in its revision.
func journalOf(ops []mop, results []encoding.MultiResult, index uint16, auth *znode.Identities, p znode.Providers) []journalChange {
	var out []journalChange
	for i, o := range ops {
		switch o.op {
		case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
			path := o.path
			switch r := results[i].Record.(type) {
			case *encoding.CreateResponse:
				path = r.Path
			case *encoding.Create2Response:
				path = r.Path
			}
			acl, _ := auth.FixupACL(o.acl, p)
			out = append(out, journalChange{watch.Change{Kind: watch.Created, Path: path, CreatedACL: acl}, index})
		case encoding.OpDelete:
			out = append(out, journalChange{watch.Change{Kind: watch.Deleted, Path: o.path}, index})
		case encoding.OpSetData:
			out = append(out, journalChange{watch.Change{Kind: watch.DataChanged, Path: o.path}, index})
		}
	}
	return out
}

// Multi runs a write multi (14): all ops or none, at one zxid (PROTOCOL.md §3.4). A failed multi
// is answered with header err 0 and the per-op error list.
func (s *etcdSession) Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	ops, refused := parseMulti(req.Ops)
	switch refused {
	case multiRefusedTxn:
		z, err := s.fail(ctx, "multi", "", encoding.ErrMarshallingError)
		return nil, z, err
	case multiRefusedEarly:
		return nil, s.zxid(0), encoding.ErrMarshallingError
	}
	results, failed, z, err := s.runMulti(ctx, "multi", ops)
	if err != nil {
		return nil, z, err
	}
	if failed == encoding.ErrMarshallingError {
		// An op's check dereferenced a null in ZooKeeper's code (znode.FixupACL): it fails the
		// whole request, at the zxid the failed multi took, not that op alone.
		return nil, z, failed
	}
	return &encoding.MultiResponse{Results: results}, z, nil
}

// singleWrite runs one single-op write through the committer and answers it as the single op.
func (s *etcdSession) singleWrite(ctx context.Context, opName string, o mop) (encoding.MultiResult, encoding.Zxid, error) {
	results, failed, z, err := s.runMulti(ctx, opName, []mop{o})
	if err != nil {
		return encoding.MultiResult{}, z, err
	}
	if failed != 0 {
		return encoding.MultiResult{}, z, failed
	}
	return results[0], z, nil
}

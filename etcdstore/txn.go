package etcdstore

import (
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/internal/znode"
)

// What a batch commits: the guards that pin the state its checks read (multiState.guards) and
// the writes that turn that state into the checked one (multiState.writes), as txnWrites.

// txnWrite is one write of a committer's transaction: a put of value (with lease, 0 for none),
// or a delete of key, or of every key with the prefix key if prefix is set. The committer makes
// its etcd ops of them and, once the transaction commits, the events of its revision.
type txnWrite struct {
	key, value  string
	lease       int64
	del, prefix bool
}

func (w txnWrite) op() clientv3.Op {
	switch {
	case w.del && w.prefix:
		return clientv3.OpDelete(w.key, clientv3.WithPrefix())
	case w.del:
		return clientv3.OpDelete(w.key)
	case w.lease == 0:
		return clientv3.OpPut(w.key, w.value) // no lease is lease 0, without an option made for it
	}
	return clientv3.OpPut(w.key, w.value, clientv3.WithLease(clientv3.LeaseID(w.lease)))
}

func txnOps(writes []txnWrite) []clientv3.Op {
	ops := make([]clientv3.Op, len(writes))
	for i, w := range writes {
		ops[i] = w.op()
	}
	return ops
}

// guards returns the compares that pin the state the simulation started from.
//
// With fence, one compare on the fence key stands for the compares of every node read: no
// transaction that puts it (every write to the tree but an expiring lease's, keys.go) has
// committed since the read. A node of a session's lease keeps its own compare, the lease may
// expire; so does a node guarded as absent without being read (a sequential create's name),
// which may have been created before the read.
func (m *multiState) guards(fence bool) []clientv3.Cmp {
	var fenceCmps []clientv3.Cmp
	if fence {
		fenceCmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(m.keys.fence()), "<", m.rev+1)}
	}
	return m.guardsWith(fence, fenceCmps)
}

// guardsWith is guards with fenceCmps standing for the fence's compares (none: the caller
// adds its own).
func (m *multiState) guardsWith(fence bool, fenceCmps []clientv3.Cmp) []clientv3.Cmp {
	paths := make([]string, 0, len(m.nodes))
	for p := range m.nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var cmps []clientv3.Cmp
	if fence && len(paths) > 0 {
		cmps = append(cmps, fenceCmps...)
	}
	// A stats node created (quota.go) rests on every node of the subtree it counted.
	for _, st := range m.subtrees {
		cmps = append(cmps, m.keys.subtreeGuards(st, m.rev)...)
	}
	if !fence && len(paths) > 0 {
		// The set of quota'd paths the checks used (the fence covers it too).
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(m.keys.quota()), "<", m.rev+1))
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
		// offsets or stats key no longer needed), so two compares pin all of a node's keys. A
		// node read with no key at all needs one: whatever makes it exist puts its data key.
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
		// Quota statistics put in the data (quota.go) go in the stats key unless the data key
		// is put anyway; a put of the data key leaves no stats key behind.
		switch {
		case putData && more.stats.mod != 0:
			ops = append(ops, txnWrite{key: k.stats(p), del: true})
		case !putData && n.statsWrites > 0:
			ops = append(ops, txnWrite{key: k.stats(p), value: string(n.data), lease: lease})
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

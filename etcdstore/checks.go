package etcdstore

import (
	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// ZooKeeper's per-op checks of a write (PrepRequestProcessor), run in op order on a multi's
// overlay (overlay.go): each op sees the effects of the earlier ones, and the first that fails
// stops the multi. The rules themselves are internal/znode's Check* functions.

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

func (m *multiState) apply(o mop, owner encoding.SessionID, now int64) (encoding.MultiResult, encoding.ErrCode) {
	switch o.op {
	case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
		return m.create(o, owner, now)
	case encoding.OpDelete:
		return m.delete(o)
	case encoding.OpSetData:
		// ZooKeeper checks the quota after the ACL and before the version.
		if code := znode.CheckSetData(m, o.path, -1, m.auth); code != 0 {
			return encoding.MultiResult{}, code
		}
		n := m.node(o.path)
		if code := m.checkQuota(o.path, n.data, o.data, 0); code != 0 {
			return encoding.MultiResult{}, code
		}
		if code := znode.CheckSetData(m, o.path, o.version, m.auth); code != 0 {
			return encoding.MultiResult{}, code
		}
		if code := m.grow(int64(len(o.data))-int64(len(n.data)), int64(len(o.data))); code != 0 {
			return encoding.MultiResult{}, code
		}
		m.updateQuotaStat(m.quotas.maxPrefix(o.path), int64(len(o.data)-len(n.data)), 0)
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
	if code := m.checkQuota(name, nil, o.data, 1); code != 0 {
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
	// The reply's Stat is the node's before the quotas change it (DataTree.createNode).
	res := encoding.MultiResult{Op: encoding.OpCreate, Record: &encoding.CreateResponse{Path: name}}
	if o.op != encoding.OpCreate {
		res = encoding.MultiResult{Op: encoding.OpCreate2, Record: &encoding.Create2Response{Path: name, Stat: n.statNow()}}
	}
	m.quotaCreated(name, o.data)
	return res, 0
}

// delete simulates a delete after znode.CheckDelete, the checks of a single delete.
func (m *multiState) delete(o mop) (encoding.MultiResult, encoding.ErrCode) {
	if code := znode.CheckDelete(m, o.path, o.version, m.auth); code != 0 {
		return encoding.MultiResult{}, code
	}
	parentP, _ := znode.Parent(o.path)
	parent, n := m.node(parentP), m.node(o.path)
	m.grow(-createBytes(o.path, n.data), 0)
	data := n.data
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
	m.quotaDeleted(o.path, data)
	return encoding.MultiResult{Op: encoding.OpDelete}, 0
}

package etcdstore

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// Delete deletes a node in one guarded transaction (PROTOCOL.md §3.2: NoNode of the parent,
// NoAuth (DELETE on the parent), NoNode, BadVersion, NotEmpty, in that order).
func (s *etcdSession) Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error) {
	path := req.Path
	parent, ok := znode.Parent(path)
	if !ok || strings.IndexByte(path, 0) >= 0 || znode.IsSystem(path) || path == "" {
		return s.fail(ctx, "delete", path, encoding.ErrBadArguments)
	}
	b := s.b
	nodeKey := b.keys.data(path)
	g := s.guardACL(ctx, parent, encoding.PermDelete)
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		if code, z, err := s.settle(ctx, &g, 0); err != nil || code != 0 {
			if err != nil {
				return s.etcdFailure("delete", path, err)
			}
			return z, code
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(nodeKey), ">", 0),
			// Every child key has CreateRevision > 0; an empty range compares as 0.
			clientv3.Compare(clientv3.CreateRevision(b.keys.childrenPrefix(path)), "=", 0).WithPrefix(),
		}
		cmps = append(cmps, b.versionCmps(path, req.Version)...)
		cmps = append(cmps, g.cmps(b.keys)...)
		r, err := b.kv.Txn(ctx).If(cmps...).Then(
			clientv3.OpDelete(nodeKey),
			clientv3.OpDelete(b.keys.metaPrefix(path), clientv3.WithPrefix()),
			clientv3.OpPut(b.keys.childDeletes(parent), ""),
			clientv3.OpDelete(b.keys.reapIndex(path)), // exists for containers and TTL nodes
		).Else(
			clientv3.OpGet(nodeKey, clientv3.WithKeysOnly()),
			b.putErrorIf(withEach(b.failureCmps(path, req.Version), g.finalConds(b.keys))...),
			clientv3.OpGet(b.keys.acl(parent)),
			clientv3.OpGet(b.keys.childrenPrefix(path), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		if err != nil {
			return s.etcdFailure("delete", path, err)
		}
		z := s.writeZxid(r.Header.Revision, 0)
		if r.Succeeded {
			return z, nil
		}
		if !putRecorded(r.Responses[1]) {
			stale, err := s.staleGuard(&g, firstKV(r, 2))
			if err != nil {
				return z, fmt.Errorf("session %s: delete %q: %w", s.id, path, err)
			}
			if stale {
				continue // the parent's ACL changed since the decision: decide again
			}
			// The node's version is offset (multi.go): the multi engine does the delete.
			_, z, err := s.slowWrite(ctx, "delete", mop{op: encoding.OpDelete, path: path, version: req.Version, ttl: -1})
			return z, err
		}
		p, err := parentFromElse(firstKV(r, 2))
		if err != nil {
			return z, fmt.Errorf("session %s: delete %q: %w", s.id, path, err)
		}
		n, _ := nodeFromElse(firstKV(r, 0), nil, rangeCount(r, 3))
		if code := znode.CheckDelete(znode.Nodes{parent: p, path: n}, path, req.Version, s.auth); code != 0 {
			return z, code
		}
		return z, fmt.Errorf("session %s: delete %q: transaction failed for no known reason", s.id, path)
	}
	return s.zxid(0), fmt.Errorf("session %s: delete %q: too many conflicting retries", s.id, path)
}

// SetData replaces a node's data in one guarded transaction that also reads back what the
// returned Stat needs (PROTOCOL.md §3.2: NoNode, NoAuth (WRITE), BadVersion).
func (s *etcdSession) SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
	path := req.Path
	if !znode.ValidatePath(path) {
		z, err := s.fail(ctx, "setData", path, encoding.ErrBadArguments)
		return nil, z, err
	}
	b := s.b
	if !b.space.fits(int64(len(req.Data))) {
		// It may grow the data past its limit (space.go): the multi engine, which reads the
		// node, knows by how much.
		res, z, err := s.slowWrite(ctx, "setData", mop{op: encoding.OpSetData, path: path, data: req.Data, version: req.Version, ttl: -1})
		if err != nil {
			return nil, z, err
		}
		return res.Record.(*encoding.SetDataResponse), z, nil
	}
	nodeKey := b.keys.data(path)
	g := s.guardACL(ctx, path, encoding.PermWrite)
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		if code, z, err := s.settle(ctx, &g, 0); err != nil || code != 0 {
			if err != nil {
				z, err = s.etcdFailure("setData", path, err)
			}
			return nil, z, orCode(err, code)
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(nodeKey), ">", 0)}
		cmps = append(cmps, b.versionCmps(path, req.Version)...)
		cmps = append(cmps, g.cmps(b.keys)...)
		value := encodeDataValue(req.Data, b.nowMs(), zxidIndexes{})
		r, err := b.kv.Txn(ctx).If(cmps...).Then(
			clientv3.OpPut(nodeKey, value, clientv3.WithIgnoreLease(), clientv3.WithPrevKV()),
			clientv3.OpGet(b.keys.metaPrefix(path), clientv3.WithPrefix()),
			clientv3.OpGet(b.keys.childrenPrefix(path), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Else(
			clientv3.OpGet(nodeKey, clientv3.WithKeysOnly()),
			b.putErrorIf(withEach(b.failureCmps(path, req.Version), g.finalConds(b.keys))...),
			clientv3.OpGet(b.keys.acl(path)),
		).Commit()
		if err != nil {
			return storeErr[encoding.SetDataResponse](s, "setData", path, err)
		}
		z := s.writeZxid(r.Header.Revision, 0)
		if !r.Succeeded && !putRecorded(r.Responses[1]) {
			stale, err := s.staleGuard(&g, firstKV(r, 2))
			if err != nil {
				return nil, z, fmt.Errorf("session %s: setData %q: %w", s.id, path, err)
			}
			if stale {
				continue // the node's ACL changed since the decision: decide again
			}
			// The node's version is offset (multi.go): the multi engine does the write.
			res, z, err := s.slowWrite(ctx, "setData", mop{op: encoding.OpSetData, path: path, data: req.Data, version: req.Version, ttl: -1})
			if err != nil {
				return nil, z, err
			}
			return res.Record.(*encoding.SetDataResponse), z, nil
		}
		if !r.Succeeded {
			n, err := nodeFromElse(firstKV(r, 0), firstKV(r, 2), 0)
			if err != nil {
				return nil, z, fmt.Errorf("session %s: setData %q: %w", s.id, path, err)
			}
			if code := znode.CheckSetData(znode.Nodes{path: n}, path, req.Version, s.auth); code != 0 {
				return nil, z, code
			}
			return nil, z, fmt.Errorf("session %s: setData %q: transaction failed for no known reason", s.id, path)
		}
		prev := r.Responses[0].GetResponsePut().PrevKv
		rev := r.Header.Revision
		now := &mvccpb.KeyValue{
			Key: []byte(nodeKey), Value: []byte(value),
			CreateRevision: prev.CreateRevision, ModRevision: rev, Version: prev.Version + 1, Lease: prev.Lease,
		}
		n, err := b.keys.decodeNode(nodeKVs{path: path, data: now, meta: rangeKVs(r, 1), numChildren: rangeCount(r, 2)})
		if err != nil {
			return nil, z, fmt.Errorf("session %s: setData %q: %w", s.id, path, err)
		}
		return &encoding.SetDataResponse{Stat: n.Stat}, z, nil
	}
	return nil, s.zxid(0), fmt.Errorf("session %s: setData %q: too many conflicting retries", s.id, path)
}

// SetACL reads the node (aversion and the rest of the ACL value are needed) and commits the new
// ACL guarded by the ACL key's ModRevision: two round trips; setACL is rare.
func (s *etcdSession) SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	path := req.Path
	fail := func(code encoding.ErrCode) (*encoding.SetACLResponse, encoding.Zxid, error) {
		z, err := s.fail(ctx, "setACL", path, code)
		return nil, z, err
	}
	if !znode.ValidatePath(path) {
		return fail(encoding.ErrBadArguments)
	}
	acl, err := znode.FixupACL(req.ACL, s.auth.Authenticated(), s.b.providers())
	if err != nil {
		return fail(encoding.ErrInvalidACL)
	}
	b := s.b
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		n, _, z, err := s.readNodeEtcd(ctx, "setACL", path, false)
		if err == encoding.ErrNoNode {
			return fail(encoding.ErrNoNode)
		}
		if err != nil {
			return nil, z, err
		}
		if !s.readAllowed(n, encoding.PermAdmin) {
			// NoAuth as of the ACL read, unless it changes before the refusal is recorded.
			g := aclGuard{path: path, perm: encoding.PermAdmin, rev: n.aclRev}
			code, z, err := s.settle(ctx, &g, 0)
			if err != nil {
				return storeErr[encoding.SetACLResponse](s, "setACL", path, err)
			}
			if code != 0 {
				return nil, z, code
			}
			continue
		}
		if req.Version != -1 && req.Version != n.Stat.Aversion {
			return fail(encoding.ErrBadVersion)
		}
		meta := n.Meta
		meta.ACL = acl
		aclKey := b.keys.acl(path)
		r, err := b.kv.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(aclKey), "=", n.aclRev),
		).Then(
			append([]clientv3.Op{clientv3.OpPut(aclKey, encodeACLValue(meta), clientv3.WithIgnoreLease())}, b.nodeReadOps(path, false)...)...,
		).Commit()
		if err != nil {
			return storeErr[encoding.SetACLResponse](s, "setACL", path, err)
		}
		if !r.Succeeded {
			continue
		}
		z = s.writeZxid(r.Header.Revision, 0)
		n, _, ok, err := b.nodeFromOps(path, r, 1, false)
		if err != nil || !ok {
			return nil, z, fmt.Errorf("session %s: setACL %q: read back: %v", s.id, path, err)
		}
		return &encoding.SetACLResponse{Stat: n.Stat}, z, nil
	}
	return nil, s.zxid(0), fmt.Errorf("session %s: setACL %q: too many conflicting retries", s.id, path)
}

// The nodes a failed write's Else branch read, as a znode.View, so that the write's check
// (znode.Check*) names the error in ZooKeeper's order. They are used only where the failure was
// final (the error key was put): a node's version then has no offset, and ZooKeeper's version
// is etcd's minus one.

// parentFromElse is a parent of which the ACL key alone was read: it exists when that key does.
func parentFromElse(aclKV *mvccpb.KeyValue) (znode.Node, error) {
	if aclKV == nil {
		return znode.Node{}, nil
	}
	meta, err := decodeACLValue(aclKV.Value)
	return znode.Node{Exists: true, ACL: meta.ACL}, err
}

// nodeFromElse is a node of which the data key (keys only) was read, with its ACL key when
// read (else nil) and its number of children: it exists when its data key does.
func nodeFromElse(dataKV, aclKV *mvccpb.KeyValue, children int64) (znode.Node, error) {
	if dataKV == nil {
		return znode.Node{}, nil
	}
	n := znode.Node{Exists: true, Version: int32(dataKV.Version - 1), NumChildren: int32(children)}
	if aclKV != nil {
		meta, err := decodeACLValue(aclKV.Value)
		if err != nil {
			return n, err
		}
		n.ACL = meta.ACL
	}
	return n, nil
}

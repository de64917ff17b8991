package etcdstore

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
	"github.com/zetcd/zetcd/internal/znode"
)

// The Handler of an etcdSession. Every write is one guarded etcd Txn in the common case: the
// compares encode ZooKeeper's preconditions, Then applies the change, and Else reads what is
// needed to pick ZooKeeper's error code and puts the error key so the failed write consumes a
// revision (zxid). Every read is one Txn of ranges.

// zxid records rev as seen by this session and returns it; replies never go back in zxid.
func (s *etcdSession) zxid(rev int64) encoding.Zxid {
	if rev > s.lastRev {
		s.lastRev = rev
	}
	return encoding.Zxid(s.lastRev)
}

// fail answers a failed write that was refused before reaching a transaction: it consumes a
// revision through the error key, as ZooKeeper logs an error txn.
func (s *etcdSession) fail(ctx context.Context, op string, path string, code encoding.ErrCode) (encoding.Zxid, error) {
	put, err := s.b.kv.Put(ctx, s.b.keys.errorKey(), "")
	if err != nil {
		return 0, fmt.Errorf("session %s: %s %q: record failure: %w", s.id, op, path, err)
	}
	return s.zxid(put.Header.Revision), code
}

// etcdFailure wraps a transport error, turning a vanished lease into SessionExpired.
func (s *etcdSession) etcdFailure(op, path string, err error) (encoding.Zxid, error) {
	if isLeaseGone(err) {
		return s.zxid(0), encoding.ErrSessionExpired
	}
	return 0, fmt.Errorf("session %s: %s %q: %w", s.id, op, path, err)
}

func rangeKVs(r *clientv3.TxnResponse, i int) []*mvccpb.KeyValue {
	return r.Responses[i].GetResponseRange().Kvs
}

func firstKV(r *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if kvs := rangeKVs(r, i); len(kvs) > 0 {
		return kvs[0]
	}
	return nil
}

func rangeCount(r *clientv3.TxnResponse, i int) int64 {
	return r.Responses[i].GetResponseRange().Count
}

// nodeReadOps reads a node: data key, meta keys, and the count (or names) of its children.
// opts are added to every range (a serializable read, see read).
func (b *Store) nodeReadOps(path string, childNames bool, opts ...clientv3.OpOption) []clientv3.Op {
	children := clientv3.OpGet(b.keys.childrenPrefix(path), rangeOpts(opts, clientv3.WithPrefix(), clientv3.WithCountOnly())...)
	if childNames {
		children = clientv3.OpGet(b.keys.childrenPrefix(path), rangeOpts(opts, clientv3.WithPrefix(), clientv3.WithKeysOnly())...)
	}
	return []clientv3.Op{
		clientv3.OpGet(b.keys.data(path), opts...),
		clientv3.OpGet(b.keys.metaPrefix(path), rangeOpts(opts, clientv3.WithPrefix())...),
		children,
	}
}

// rangeOpts is fixed followed by opts, in a slice of its own: opts may be shared by several
// ranges, and appending to it could write into another range's options.
func rangeOpts(opts []clientv3.OpOption, fixed ...clientv3.OpOption) []clientv3.OpOption {
	return append(fixed, opts...)
}

// childListOps reads what getChildren needs: the data key's existence, the child keys and the
// ACL key (no Stat). opts as nodeReadOps.
func (b *Store) childListOps(path string, opts ...clientv3.OpOption) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(b.keys.data(path), rangeOpts(opts, clientv3.WithKeysOnly())...),
		clientv3.OpGet(b.keys.childrenPrefix(path), rangeOpts(opts, clientv3.WithPrefix(), clientv3.WithKeysOnly())...),
		clientv3.OpGet(b.keys.acl(path), opts...),
	}
}

// read runs a session's read-only transaction, its ranges built by ops with the options given.
// It is served first serializably: by the etcd member this zetcd's client talks to, from its
// own applied state and without a round of consensus, as a ZooKeeper follower serves reads from
// its own copy. That answer stands only if it is no older than what the session must not go
// behind: the newest revision it has been answered with (its own writes, a sync), and the
// watch feed's progress (no read may precede an event already delivered). Otherwise — a member
// that lags, or has no leader (WithRequireLeader: a partitioned member refuses instead of
// serving old data for ever), or any error — the read runs again, linearizably.
func (s *etcdSession) read(ctx context.Context, ops func(opts ...clientv3.OpOption) []clientv3.Op) (*clientv3.TxnResponse, error) {
	progress, _ := s.b.watches.Progress()
	floor := max(s.lastRev, int64(progress))
	r, err := s.b.kv.Txn(clientv3.WithRequireLeader(ctx)).Then(ops(clientv3.WithSerializable())...).Commit()
	if err == nil && r.Header.Revision >= floor {
		return r, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return s.b.kv.Txn(ctx).Then(ops()...).Commit()
}

// nodeFromOps decodes the results of nodeReadOps starting at response i; ok is false when the
// node does not exist.
func (b *Store) nodeFromOps(path string, r *clientv3.TxnResponse, i int, childNames bool) (n node, children []string, ok bool, err error) {
	data := firstKV(r, i)
	if data == nil {
		return node{}, nil, false, nil
	}
	kvs := nodeKVs{path: path, data: data, meta: rangeKVs(r, i+1), numChildren: rangeCount(r, i+2)}
	if childNames {
		prefix := b.keys.childrenPrefix(path)
		for _, kv := range rangeKVs(r, i+2) {
			children = append(children, childName(kv.Key, prefix))
		}
		kvs.numChildren = int64(len(children))
	}
	n, err = b.keys.decodeNode(kvs)
	return n, children, err == nil, err
}

// readNode reads one node in one round trip.
func (s *etcdSession) readNode(ctx context.Context, op, path string, childNames bool) (node, []string, encoding.Zxid, error) {
	path = znode.NormalizeRead(path)
	r, err := s.read(ctx, func(opts ...clientv3.OpOption) []clientv3.Op {
		return s.b.nodeReadOps(path, childNames, opts...)
	})
	if err != nil {
		z, err := s.etcdFailure(op, path, err)
		return node{}, nil, z, err
	}
	z := s.zxid(r.Header.Revision)
	n, children, ok, err := s.b.nodeFromOps(path, r, 0, childNames)
	if err != nil {
		return node{}, nil, z, fmt.Errorf("session %s: %s %q: %w", s.id, op, path, err)
	}
	if !ok {
		return node{}, nil, z, encoding.ErrNoNode
	}
	return n, children, z, nil
}

func (s *etcdSession) Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	if strings.IndexByte(req.Path, 0) >= 0 {
		return nil, s.zxid(0), encoding.ErrBadArguments
	}
	n, _, z, err := s.readNode(ctx, "exists", req.Path, false)
	if err == nil && !s.readAllowed(znode.NormalizeRead(req.Path), n, encoding.PermRead) {
		// 3.9.2+: READ on a node that exists; no watch is set.
		return nil, z, encoding.ErrNoAuth
	}
	if req.Watch {
		// An exists watch is set whether or not the node exists (PROTOCOL.md §6.1).
		kind := watch.Data
		if err == encoding.ErrNoNode {
			kind = watch.Exist
		}
		if err == nil || err == encoding.ErrNoNode {
			if werr := s.arm(ctx, kind, znode.NormalizeRead(req.Path), z); werr != nil {
				z, werr := s.etcdFailure("exists", req.Path, werr)
				return nil, z, werr
			}
		}
	}
	if err != nil {
		return nil, z, err
	}
	return &encoding.ExistsResponse{Stat: n.Stat}, z, nil
}

func (s *etcdSession) GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	n, _, z, err := s.readNode(ctx, "getData", req.Path, false)
	if err != nil {
		return nil, z, err
	}
	if !s.readAllowed(znode.NormalizeRead(req.Path), n, encoding.PermRead) {
		return nil, z, encoding.ErrNoAuth
	}
	if req.Watch {
		if err := s.arm(ctx, watch.Data, znode.NormalizeRead(req.Path), z); err != nil {
			z, err := s.etcdFailure("getData", req.Path, err)
			return nil, z, err
		}
	}
	return &encoding.GetDataResponse{Data: n.Data, Stat: n.Stat}, z, nil
}

func (s *etcdSession) GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	n, _, z, err := s.readNode(ctx, "getACL", req.Path, false)
	if err != nil {
		return nil, z, err
	}
	// READ or ADMIN; without ADMIN, digest ids are masked (PROTOCOL.md §3.3).
	if !s.readAllowed(znode.NormalizeRead(req.Path), n, encoding.PermRead|encoding.PermAdmin) {
		return nil, z, encoding.ErrNoAuth
	}
	acl := n.Meta.ACL
	if !s.auth.Allowed(acl, encoding.PermAdmin) {
		acl = znode.MaskACL(acl)
	}
	return &encoding.GetACLResponse{ACL: acl, Stat: n.Stat}, z, nil
}

func (s *etcdSession) GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	n, children, z, err := s.readNode(ctx, "getChildren2", req.Path, true)
	if err != nil {
		return nil, z, err
	}
	if !s.readAllowed(znode.NormalizeRead(req.Path), n, encoding.PermRead) {
		return nil, z, encoding.ErrNoAuth
	}
	if req.Watch {
		if err := s.arm(ctx, watch.Child, znode.NormalizeRead(req.Path), z); err != nil {
			z, err := s.etcdFailure("getChildren2", req.Path, err)
			return nil, z, err
		}
	}
	if children == nil {
		children = []string{}
	}
	return &encoding.GetChildren2Response{Children: children, Stat: n.Stat}, z, nil
}

// GetChildren needs no Stat, so it reads only the data key's existence, the ACL key and the
// child keys.
func (s *etcdSession) GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	path := znode.NormalizeRead(req.Path)
	prefix := s.b.keys.childrenPrefix(path)
	r, err := s.read(ctx, func(opts ...clientv3.OpOption) []clientv3.Op {
		return s.b.childListOps(path, opts...)
	})
	if err != nil {
		z, err := s.etcdFailure("getChildren", path, err)
		return nil, z, err
	}
	z := s.zxid(r.Header.Revision)
	if firstKV(r, 0) == nil {
		return nil, z, encoding.ErrNoNode
	}
	if ok, err := s.aclKVAllows(path, firstKV(r, 2), encoding.PermRead); err != nil || !ok {
		if err != nil {
			return nil, z, fmt.Errorf("session %s: getChildren %q: %w", s.id, path, err)
		}
		return nil, z, encoding.ErrNoAuth
	}
	if req.Watch {
		if err := s.arm(ctx, watch.Child, path, z); err != nil {
			z, err := s.etcdFailure("getChildren", path, err)
			return nil, z, err
		}
	}
	kvs := rangeKVs(r, 1)
	children := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		children = append(children, childName(kv.Key, prefix))
	}
	return &encoding.GetChildrenResponse{Children: children}, z, nil
}

// Sync makes sure the session's later reads see every write committed before it: one
// linearizable read of the error key raises the session's floor (see read) to etcd's current
// revision, so no later read is served from a member that has not applied that far.
func (s *etcdSession) Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	rev, err := s.b.currentRevision(ctx)
	if err != nil {
		z, err := s.etcdFailure("sync", req.Path, err)
		return nil, z, err
	}
	return &encoding.SyncResponse{Path: req.Path}, s.zxid(rev), nil
}

func (s *etcdSession) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	path, _, z, err := s.create(ctx, "create", req.Path, req.Data, req.ACL, req.Flags, -1, znode.Kind(encoding.OpCreate, req.Flags))
	if err != nil {
		return nil, z, err
	}
	return &encoding.CreateResponse{Path: path}, z, nil
}

func (s *etcdSession) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	path, stat, z, err := s.create(ctx, "create2", req.Path, req.Data, req.ACL, req.Flags, -1, znode.Kind(encoding.OpCreate2, req.Flags))
	if err != nil {
		return nil, z, err
	}
	return &encoding.Create2Response{Path: path, Stat: stat}, z, nil
}

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
	g, err := s.guardACL(ctx, parent, encoding.PermDelete)
	if err != nil {
		return s.etcdFailure("delete", path, err)
	}
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
		z := s.zxid(r.Header.Revision)
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
		if code := znode.CheckDelete(failedView{parent: p, path: n}, path, req.Version, s.auth); code != 0 {
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
	nodeKey := b.keys.data(path)
	g, err := s.guardACL(ctx, path, encoding.PermWrite)
	if err != nil {
		z, err := s.etcdFailure("setData", path, err)
		return nil, z, err
	}
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
		value := encodeDataValue(req.Data, b.nowMs())
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
			z, err := s.etcdFailure("setData", path, err)
			return nil, z, err
		}
		z := s.zxid(r.Header.Revision)
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
			if code := znode.CheckSetData(failedView{path: n}, path, req.Version, s.auth); code != 0 {
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
	acl, err := znode.FixupACL(req.ACL, s.auth.Authenticated(), s.b.x509)
	if err != nil {
		return fail(encoding.ErrInvalidACL)
	}
	b := s.b
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		n, _, z, err := s.readNode(ctx, "setACL", path, false)
		if err == encoding.ErrNoNode {
			return fail(encoding.ErrNoNode)
		}
		if err != nil {
			return nil, z, err
		}
		if !s.readAllowed(path, n, encoding.PermAdmin) {
			// NoAuth as of the ACL read, unless it changes before the refusal is recorded.
			g := aclGuard{path: path, perm: encoding.PermAdmin, rev: n.aclRev}
			code, z, err := s.settle(ctx, &g, 0)
			if err != nil {
				z, err := s.etcdFailure("setACL", path, err)
				return nil, z, err
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
			z, err := s.etcdFailure("setACL", path, err)
			return nil, z, err
		}
		if !r.Succeeded {
			continue
		}
		z = s.zxid(r.Header.Revision)
		n, _, ok, err := b.nodeFromOps(path, r, 1, false)
		if err != nil || !ok {
			return nil, z, fmt.Errorf("session %s: setACL %q: read back: %v", s.id, path, err)
		}
		b.acls.remember(path, acl, r.Header.Revision)
		return &encoding.SetACLResponse{Stat: n.Stat}, z, nil
	}
	return nil, s.zxid(0), fmt.Errorf("session %s: setACL %q: too many conflicting retries", s.id, path)
}

// The nodes a failed write's Else branch read, as a znode.View, so that the write's check
// (znode.Check*) names the error in ZooKeeper's order. They are used only where the failure was
// final (the error key was put): a node's version then has no offset, and ZooKeeper's version
// is etcd's minus one.

// failedView is a znode.View over a failed write's Else reads; other paths are absent.
type failedView map[string]znode.Node

func (v failedView) Node(path string) znode.Node { return v[path] }

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

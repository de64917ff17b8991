package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// Delete and SetData are one op each for the committer (commit.go), checked on the replica as a
// multi's ops are (PROTOCOL.md §3.2): delete checks NoNode of the parent, NoAuth (DELETE on the
// parent), NoNode, BadVersion, NotEmpty; setData NoNode, NoAuth (WRITE), BadVersion, in that
// order.

func (s *etcdSession) Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error) {
	_, z, err := s.singleWrite(ctx, "delete", mop{op: encoding.OpDelete, path: req.Path, version: req.Version, ttl: -1})
	return z, err
}

func (s *etcdSession) SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
	res, z, err := s.singleWrite(ctx, "setData", mop{op: encoding.OpSetData, path: req.Path, data: req.Data, version: req.Version, ttl: -1})
	if err != nil {
		return nil, z, err
	}
	return res.Record.(*encoding.SetDataResponse), z, nil
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
			append(append([]clientv3.Op{clientv3.OpPut(aclKey, encodeACLValue(meta), clientv3.WithIgnoreLease())}, b.nodeReadOps(path, false)...), b.fenceOp())...,
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

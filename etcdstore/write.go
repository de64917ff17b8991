package etcdstore

import (
	"context"
	"errors"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// Delete and SetData are one op each for the committer (commit.go), checked on the replica as a
// multi's ops are (PrepRequestProcessor): delete checks NoNode of the parent, NoAuth (DELETE on the
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

// SetACL is one op for the committer, checked on the replica after the request's own checks:
// a valid path, then the ACL fixup (InvalidACL), then NoNode, NoAuth (ADMIN) and BadVersion
// (znode.CheckSetACL).
func (s *etcdSession) SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	fail := func(code encoding.ErrCode) (*encoding.SetACLResponse, encoding.Zxid, error) {
		z, err := s.fail(ctx, "setACL", req.Path, code)
		return nil, z, err
	}
	if !znode.ValidatePath(req.Path) {
		return fail(encoding.ErrBadArguments)
	}
	acl, code := s.auth.FixupACL(req.ACL, s.b.providers())
	if code != 0 {
		return fail(code)
	}
	res, z, err := s.singleWrite(ctx, "setACL", mop{op: encoding.OpSetACL, path: req.Path, acl: acl, version: req.Version, ttl: -1})
	if err != nil {
		return nil, z, err
	}
	return res.Record.(*encoding.SetACLResponse), z, nil
}

// errClientDeleteContainer closes the connection of a client that sends deleteContainer.
var errClientDeleteContainer = errors.New("deleteContainer is refused from clients (as ZooKeeper 3.9 refuses it); closing the connection")

// DeleteContainer (20) is the request ZooKeeper's own container reaper sends. ZooKeeper 3.9
// refuses it from a client: it logs "Received deleteContainer opcode from client session",
// sends no reply and closes the connection; the session survives. zetcd does the same (a
// non-code error), and its reaper (reaper.go) deletes containers itself.
func (s *etcdSession) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	return s.zxid(0), errClientDeleteContainer
}

// Reconfig (16) is answered as a ZooKeeper 3.9 with its default reconfigEnabled=false answers:
// ReconfigDisabled, and the refused request consumes a zxid.
func (s *etcdSession) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	z, err := s.fail(ctx, "reconfig", "/zookeeper/config", encoding.ErrReconfigDisabled)
	return nil, z, err
}

package etcdstore

import (
	"context"

	"github.com/zetcd/zetcd/encoding"
)

// The create variants: each is one op for the committer (commit.go), checked on the replica with
// znode.CheckCreate as a multi's create is, and committed in a batch with other writes.

func (s *etcdSession) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	path, _, z, err := s.create(ctx, "create", encoding.OpCreate, req.Path, req.Data, req.ACL, req.Flags, -1)
	if err != nil {
		return nil, z, err
	}
	return &encoding.CreateResponse{Path: path}, z, nil
}

func (s *etcdSession) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	path, stat, z, err := s.create(ctx, "create2", encoding.OpCreate2, req.Path, req.Data, req.ACL, req.Flags, -1)
	if err != nil {
		return nil, z, err
	}
	return &encoding.Create2Response{Path: path, Stat: stat}, z, nil
}

// create runs one create of kind op (OpCreate, OpCreate2, OpCreateContainer or OpCreateTTL;
// ttl is -1 for every opcode but createTTL) in ZooKeeper's check order (PrepRequestProcessor),
// and returns the name of the node made and its Stat.
func (s *etcdSession) create(ctx context.Context, opName string, op encoding.Op, path string, data []byte, acl []encoding.ACL, flags encoding.CreateMode, ttl int64) (string, encoding.Stat, encoding.Zxid, error) {
	if op == encoding.OpCreate {
		// The Stat is not answered, but the multi engine hands it out with the name.
		op = encoding.OpCreate2
	}
	res, z, err := s.singleWrite(ctx, opName, mop{op: op, path: path, data: data, acl: acl, flags: flags, ttl: ttl, version: -1})
	if err != nil {
		return "", encoding.Stat{}, z, err
	}
	r := res.Record.(*encoding.Create2Response)
	return r.Path, r.Stat, z, nil
}

// CreateContainer (19) makes a container whatever its flags say, except that TTL flags (which
// need a TTL that createContainer cannot carry) and invalid flags are BadArguments; sequential
// flags still add the suffix.
func (s *etcdSession) CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	path, stat, z, err := s.create(ctx, "createContainer", encoding.OpCreateContainer, req.Path, req.Data, req.ACL, req.Flags, -1)
	if err != nil {
		return nil, z, err
	}
	return &encoding.Create2Response{Path: path, Stat: stat}, z, nil
}

// CreateTTL (21) needs TTL flags and 0 < ttl <= 2^40-1 ms, else BadArguments. (ZooKeeper 3.9.6
// answers BadArguments for non-TTL flags with ttl >= 0 too; with ttl < 0 it accepts the request
// and then fails applying it, which stops the server. zetcd answers BadArguments.)
func (s *etcdSession) CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	if !req.Flags.IsTTL() {
		z, err := s.fail(ctx, "createTTL", req.Path, encoding.ErrBadArguments)
		return nil, z, err
	}
	path, stat, z, err := s.create(ctx, "createTTL", encoding.OpCreateTTL, req.Path, req.Data, req.ACL, req.Flags, req.TTL)
	if err != nil {
		return nil, z, err
	}
	return &encoding.Create2Response{Path: path, Stat: stat}, z, nil
}

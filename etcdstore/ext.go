package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// The ZooKeeper 3.5–3.9 operations other than multi: containers, TTL nodes, getEphemerals,
// getAllChildrenNumber, whoAmI, reconfig and sasl. Where ZooKeeper's answer is surprising, it
// was checked against ZooKeeper 3.9.6 and is said so.

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

// errClientDeleteContainer closes the connection of a client that sends deleteContainer.
var errClientDeleteContainer = errors.New("deleteContainer is refused from clients (as ZooKeeper 3.9 refuses it); closing the connection")

// DeleteContainer (20) is the request ZooKeeper's own container reaper sends. ZooKeeper 3.9
// refuses it from a client: it logs "Received deleteContainer opcode from client session",
// sends no reply and closes the connection; the session survives. zetcd does the same (a
// non-code error), and its reaper (reaper.go) deletes containers itself.
func (s *etcdSession) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	return s.zxid(0), errClientDeleteContainer
}

// GetEphemerals (103) lists the session's ephemeral nodes, from the replica. Like ZooKeeper, a
// prefix that is blank or "/" (after trimming) selects all of them, any other prefix is matched
// as a string, not as a path ("/a" matches "/ab").
func (s *etcdSession) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	if err := s.awaitTree(ctx, "getEphemerals", req.PrefixPath); err != nil {
		return nil, 0, err
	}
	var all []string
	rev := s.b.tree.read(func(v replicaView) { all = v.ephemerals(int64(s.id)) })
	trimmed := strings.TrimFunc(req.PrefixPath, func(r rune) bool { return r <= ' ' })
	everything := trimmed == "" || trimmed == "/"
	paths := []string{}
	for _, p := range all {
		if everything || strings.HasPrefix(p, req.PrefixPath) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return &encoding.GetEphemeralsResponse{Ephemerals: paths}, s.zxid(rev), nil
}

// GetAllChildrenNumber (104) counts every descendant of a node, from the replica: the node's
// READ check, then its descendants counted along the children lists, at one revision. Like
// ZooKeeper, "/" counts every node but the root (3 on a fresh server) and "" counts one more
// (ZooKeeper's root alias).
func (s *etcdSession) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	path := znode.NormalizeRead(req.Path)
	if err := s.awaitTree(ctx, "getAllChildrenNumber", path); err != nil {
		return nil, 0, err
	}
	var (
		n     node
		ok    bool
		err   error
		total int64
	)
	rev := s.b.tree.read(func(v replicaView) {
		if n, _, ok, err = v.node(path, false); ok && err == nil {
			total = v.descendants(path)
		}
	})
	z := s.zxid(rev)
	if err != nil {
		return nil, z, fmt.Errorf("session %s: getAllChildrenNumber %q: %w", s.id, path, err)
	}
	if !ok {
		return nil, z, encoding.ErrNoNode
	}
	if !s.readAllowed(n, encoding.PermRead) {
		return nil, z, encoding.ErrNoAuth
	}
	if req.Path == "" {
		total++
	}
	return &encoding.GetAllChildrenNumberResponse{TotalNumber: int32(total)}, z, nil
}

// WhoAmI (107) lists the connection's identities as ZooKeeper 3.9 does (checked against
// 3.9.6): every identity in the order ZooKeeper keeps them (acl.go), as (scheme, user): ip and
// x509 with their id, digest with the user name only, super with "". A plain connection is
// ("ip", the client's address).
func (s *etcdSession) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	infos := []encoding.ClientInfo{}
	for _, id := range s.auth.List() {
		infos = append(infos, encoding.ClientInfo{AuthScheme: id.Scheme, User: znode.UserOf(id)})
	}
	return &encoding.WhoAmIResponse{ClientInfo: infos}, s.zxid(0), nil
}

// Reconfig (16) is answered as a ZooKeeper 3.9 with its default reconfigEnabled=false answers:
// ReconfigDisabled, and the refused request consumes a zxid.
func (s *etcdSession) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	z, err := s.fail(ctx, "reconfig", "/zookeeper/config", encoding.ErrReconfigDisabled)
	return nil, z, err
}

// errNullSASLToken closes the connection of a client that sends a null SASL token.
var errNullSASLToken = errors.New("sasl request with a null token (ZooKeeper closes the connection)")

// Sasl (102) is answered as a ZooKeeper 3.9 without SASL configured answers (checked against
// 3.9.6): err 0, zxid 0 and a null token, whatever token came, and the connection stays
// unauthenticated; a null token makes ZooKeeper drop the connection.
func (s *etcdSession) Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	if req.Token == nil {
		return nil, 0, fmt.Errorf("session %s: %w", s.id, errNullSASLToken)
	}
	return &encoding.SetSASLResponse{Token: nil}, 0, nil
}

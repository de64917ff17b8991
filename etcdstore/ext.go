package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

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

// GetEphemerals (103) lists the session's ephemeral nodes: from the replica, or the data keys
// attached to its lease (one etcd round trip) when the replica cannot serve. Like ZooKeeper, a
// prefix that is blank or "/" (after trimming) selects all of them, any other prefix is matched
// as a string, not as a path ("/a" matches "/ab").
func (s *etcdSession) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	var all []string
	var rev int64
	if s.treeAt(ctx) {
		rev = s.b.tree.read(func(v replicaView) { all = v.ephemerals(int64(s.id)) })
	} else {
		ttl, err := s.b.lease.TimeToLive(ctx, clientv3.LeaseID(s.id), clientv3.WithAttachedKeys())
		if err != nil {
			return storeErr[encoding.GetEphemeralsResponse](s, "getEphemerals", req.PrefixPath, err)
		}
		for _, k := range ttl.Keys {
			if p, ok := s.b.keys.pathOfDataKey(string(k)); ok {
				all = append(all, p)
			}
		}
		rev = ttl.Revision
	}
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

// descendantsBatch is how many depths one getAllChildrenNumber Txn counts.
const descendantsBatch = 16

// GetAllChildrenNumber (104) counts every descendant of a node: one count range per depth below
// it (the depth-prefixed keys make each an exact range), descendantsBatch depths per Txn, all at
// the revision of the first, until a depth is empty. Like ZooKeeper, "/" counts every node but
// the root (3 on a fresh server) and "" counts one more (ZooKeeper's root alias).
func (s *etcdSession) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	path := znode.NormalizeRead(req.Path)
	if s.treeAt(ctx) {
		return s.allChildrenFromTree(path, req.Path == "")
	}
	b := s.b
	base := depth(path)
	under := path
	if path == "/" {
		under = ""
	}
	var total, rev int64
	for first := base + 1; ; first += descendantsBatch {
		var ops []clientv3.Op
		if rev == 0 {
			ops = append(ops, clientv3.OpGet(b.keys.data(path)), clientv3.OpGet(b.keys.acl(path)))
		}
		for d := first; d < first+descendantsBatch; d++ {
			prefix := b.keys.prefix + "n/" + strconv.Itoa(d) + under + "/"
			ops = append(ops, clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(rev)))
		}
		r, err := b.kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return storeErr[encoding.GetAllChildrenNumberResponse](s, "getAllChildrenNumber", path, err)
		}
		i := 0
		if rev == 0 {
			rev = r.Header.Revision
			if firstKV(r, 0) == nil {
				return nil, s.zxid(rev), encoding.ErrNoNode
			}
			if ok, err := s.aclKVAllows(path, firstKV(r, 0), firstKV(r, 1), encoding.PermRead); err != nil || !ok {
				if err != nil {
					return nil, s.zxid(rev), fmt.Errorf("session %s: getAllChildrenNumber %q: %w", s.id, path, err)
				}
				return nil, s.zxid(rev), encoding.ErrNoAuth
			}
			i = 2
		}
		empty := false
		for ; i < len(r.Responses); i++ {
			n := rangeCount(r, i)
			total += n
			if n == 0 {
				empty = true
				break
			}
		}
		if empty {
			break
		}
	}
	if req.Path == "" {
		total++
	}
	return &encoding.GetAllChildrenNumberResponse{TotalNumber: int32(total)}, s.zxid(rev), nil
}

// allChildrenFromTree is GetAllChildrenNumber from the replica: the node's READ check, then its
// descendants counted along the children lists, at one revision. rootAlias is the "" request,
// which counts one more.
func (s *etcdSession) allChildrenFromTree(path string, rootAlias bool) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
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
	if rootAlias {
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

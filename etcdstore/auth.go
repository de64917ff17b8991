package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// The auth schemes a connection can authenticate with (auth packets, opcode 100).

// Auth adds identities to the connection (ZooKeeperServer.processPacket, ProviderRegistry), as
// ZooKeeper 3.9 with its default providers answers (checked against 3.9.6): "digest" succeeds
// whatever the bytes (but null), and adds digest:<user>:<hash> (and super first, for the
// configured super digest); "ip" succeeds and adds the client's address again (a no-op); "x509"
// succeeds only on a connection with a verified client certificate when x509 is enabled. Any
// other scheme is AuthFailed, and the server then closes the connection (zetcd/executor.go);
// the session survives. The reply zxid is 0, as ZooKeeper's.
func (s *etcdSession) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	switch req.Scheme {
	case znode.SchemeDigest:
		if req.Auth == nil {
			// A null buffer (length -1): ZooKeeper's digest provider fails on it.
			return 0, encoding.ErrAuthFailed
		}
		for _, id := range znode.DigestIDs(req.Auth, s.b.superDigest) {
			s.auth.Add(id)
		}
		return 0, nil
	case znode.SchemeIP:
		if ip := znode.RemoteIP(s.remote); ip != "" {
			s.auth.Add(encoding.ID{Scheme: znode.SchemeIP, ID: ip})
		}
		return 0, nil
	case znode.SchemeX509:
		if s.b.x509 {
			for _, id := range s.auth.List() {
				if id.Scheme == znode.SchemeX509 {
					return 0, nil
				}
			}
		}
	}
	return 0, encoding.ErrAuthFailed
}

// AddAuthIDs adds identities the front established (a completed SASL exchange) to the
// connection's identities.
func (s *etcdSession) AddAuthIDs(ids []encoding.ID) {
	for _, id := range ids {
		s.auth.Add(id)
	}
}

// WhoAmI (107) lists the connection's identities as ZooKeeper 3.9 does (checked against
// 3.9.6): every identity in the order ZooKeeper keeps them (znode.Identities), as (scheme,
// user): ip and x509 with their id, digest with the user name only, super with "". A plain
// connection is ("ip", the client's address).
func (s *etcdSession) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	infos := []encoding.ClientInfo{}
	for _, id := range s.auth.List() {
		infos = append(infos, encoding.ClientInfo{AuthScheme: id.Scheme, User: znode.UserOf(id)})
	}
	return &encoding.WhoAmIResponse{ClientInfo: infos}, s.zxid(0), nil
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

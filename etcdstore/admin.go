package etcdstore

import (
	"context"
	"fmt"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
	"github.com/zetcd/zetcd/zetcd"
)

var _ zetcd.AdminAuthorizer = (*Store)(nil)

// AuthorizeAdmin is the AdminServer's check for snapshot and restore (Commands'
// AuthRequest(Perms.ALL, "/")): the digest scheme's identities for auth ("user:password", and
// super for the configured super digest, as an auth packet gives them: Auth) must hold every
// permission in the ACL of "/", as the replica has it once it has every write this process
// acknowledged. Other schemes have no provider on the admin port: ZooKeeper's ip and x509
// providers would read the HTTP connection, which the AdminServer does not hand over here.
func (b *Store) AuthorizeAdmin(ctx context.Context, scheme string, auth []byte) (zetcd.AdminAuthResult, error) {
	if scheme != znode.SchemeDigest {
		return zetcd.AdminNotAuthenticated, nil
	}
	if err := b.awaitCurrent(ctx); err != nil {
		return 0, fmt.Errorf("authorize admin command: %w", err)
	}
	var ids znode.Identities
	for _, id := range znode.DigestIDs(auth, b.superDigest) {
		ids.Add(id)
	}
	var acl []encoding.ACL
	b.tree.read(func(v replicaView) { acl, _ = v.acl("/") })
	if !ids.Allowed(acl, encoding.PermAll) {
		return zetcd.AdminNotAuthorized, nil
	}
	return zetcd.AdminAuthorized, nil
}

package itest

import (
	"github.com/zetcd/zetcd/encoding"
)

// ACLOf is the ACL entry that gives perms to id of scheme.
func ACLOf(perms encoding.Perm, scheme, id string) encoding.ACL {
	return encoding.ACL{Perms: perms, ID: encoding.ID{Scheme: scheme, ID: id}}
}

// WorldACL gives perms to everyone (world:anyone).
func WorldACL(perms encoding.Perm) encoding.ACL { return ACLOf(perms, "world", "anyone") }

// Auth sends an auth packet and returns the reply's code (and zxid).
func (c *RawClient) Auth(scheme, cred string) (encoding.ErrCode, encoding.Zxid) {
	c.T.Helper()
	hdr, err := c.Call(encoding.OpAuth, &encoding.AuthPacket{Scheme: scheme, Auth: []byte(cred)}, nil)
	if err != nil {
		c.T.Fatalf("auth %s: %v", scheme, err)
	}
	return hdr.Err, hdr.Zxid
}

// MustAuth sends an auth packet and fails the test unless it succeeds.
func (c *RawClient) MustAuth(scheme, cred string) {
	c.T.Helper()
	if code, _ := c.Auth(scheme, cred); code != 0 {
		c.T.Fatalf("auth %s %s: %v", scheme, cred, code)
	}
}

// CreateACL creates path, empty and persistent, with acl, and returns the reply's code.
func (c *RawClient) CreateACL(path string, acl ...encoding.ACL) encoding.ErrCode {
	c.T.Helper()
	return c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: path, ACL: acl}, &encoding.CreateResponse{})
}

// MustCreateACL is CreateACL that fails the test unless the create succeeds.
func (c *RawClient) MustCreateACL(path string, acl ...encoding.ACL) {
	c.T.Helper()
	if code := c.CreateACL(path, acl...); code != 0 {
		c.T.Fatalf("create %s %v: %v", path, acl, code)
	}
}

// GetACL returns the ACL of path and the reply's code.
func (c *RawClient) GetACL(path string) ([]encoding.ACL, encoding.ErrCode) {
	c.T.Helper()
	var r encoding.GetACLResponse
	code := c.MustCall(encoding.OpGetACL, &encoding.GetACLRequest{Path: path}, &r)
	return r.ACL, code
}

// SetACL sets the ACL of path, any version, and returns the reply's code.
func (c *RawClient) SetACL(path string, acl ...encoding.ACL) encoding.ErrCode {
	c.T.Helper()
	return c.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: path, ACL: acl, Version: -1}, &encoding.SetACLResponse{})
}

// WhoAmI returns the identities the server holds for the session, as "scheme:id".
func (c *RawClient) WhoAmI() []string {
	c.T.Helper()
	var r encoding.WhoAmIResponse
	if code := c.MustCall(encoding.OpWhoAmI, nil, &r); code != 0 {
		c.T.Fatalf("whoAmI: %v", code)
	}
	var out []string
	for _, ci := range r.ClientInfo {
		out = append(out, ci.AuthScheme+":"+ci.User)
	}
	return out
}

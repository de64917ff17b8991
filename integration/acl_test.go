package integration

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/znode"
)

// ACLs and authentication (ZooKeeperServer.processPacket, ProviderRegistry), against zetcd, ZooKeeper and xchk, all with the same
// super digest. Every expectation here was first observed on ZooKeeper 3.9.6.

// superDigest is the super user's digest: user "super", password "secret".
var superDigest = znode.DigestID("super", "secret")

// aclServers runs f against each server started with superDigest.
func aclServers(t *testing.T, f func(t *testing.T, addr string)) {
	testenv.ForEachServerWith(t, testenv.ServerOptions{SuperDigest: superDigest}, f)
}

func digestACL(perms encoding.Perm, user, password string) encoding.ACL {
	return itest.ACLOf(perms, "digest", znode.DigestID(user, password))
}

// TestAuthDigest: digest authentication always succeeds (reply zxid 0, any xid including -4),
// identities accumulate and are listed in ZooKeeper's order, and "ip" is a scheme one can
// authenticate with too (a no-op).
func TestAuthDigest(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/a", nil, 0) // the connection has seen a zxid: auth still answers 0
		for _, cred := range []string{"alice:pw", "alice:pw", "bob", "", "carol:pw:x"} {
			if code, z := c.Auth("digest", cred); code != 0 || z != 0 {
				t.Errorf("auth digest %q: %v zxid %v, want OK zxid 0", cred, code, z)
			}
		}
		if code, _ := c.Auth("ip", "whatever"); code != 0 {
			t.Errorf("auth ip: %v", code)
		}
		c.MustAuth("digest", "super:secret")
		want := []string{"digest:bob", "digest:carol", "super:", "digest:super", "digest:", "ip:127.0.0.1", "digest:alice"}
		if got := c.WhoAmI(); !slices.Equal(got, want) {
			t.Errorf("whoAmI %v, want %v", got, want)
		}

		// The Java client's xid -4.
		hdr := encoding.RequestHeader{Xid: encoding.XidAuth, Op: encoding.OpAuth}
		if _, err := c.Conn.Write(encoding.AppendFrame(nil, &hdr, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("dave:pw")})); err != nil {
			t.Fatal(err)
		}
		if rh, _, err := c.ReadReply(); err != nil || rh.Xid != encoding.XidAuth || rh.Err != 0 || rh.Zxid != 0 {
			t.Errorf("xid -4 auth: %+v %v", rh, err)
		}
		// Many identities: ZooKeeper's set grows past its first table size.
		for i := 0; i < 20; i++ {
			c.MustAuth("digest", fmt.Sprintf("user%d:pw", i))
		}
		if got := c.WhoAmI(); len(got) != 28 {
			t.Errorf("whoAmI after 28 identities: %d: %v", len(got), got)
		}
		c.MustCreateACL("/a/all", itest.ACLOf(encoding.PermAll, "auth", ""))
		acl, code := c.GetACL("/a/all")
		if code != 0 || len(acl) != 26 { // every digest id; not ip, not super
			t.Errorf("auth ACL of 28 identities: %v %v", code, acl)
		}
	})
}

// TestAuthFailed: an unknown scheme, a scheme without a provider (world, super, sasl, x509
// without TLS) is AuthFailed with zxid 0, then the server closes the connection; the session
// survives and can be resumed.
func TestAuthFailed(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		for _, scheme := range []string{"foo", "world", "super", "sasl", "x509", "auth", ""} {
			c := itest.ConnectRaw(t, addr)
			if code, z := c.Auth(scheme, "a:b"); code != encoding.ErrAuthFailed || z != 0 {
				t.Errorf("auth %q: %v zxid %v, want AuthFailed zxid 0", scheme, code, z)
			}
			c.ExpectClosed(0)
		}
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/e", nil, encoding.ModeEphemeral)
		c.Auth("foo", "x")
		c.ExpectClosed(0)
		r := itest.DialRaw(t, addr)
		resp, err := r.Handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, HasReadOnly: true})
		if err != nil || resp.SessionID != c.Session.SessionID {
			t.Fatalf("resume after AuthFailed: %+v %v", resp, err)
		}
		if !r.Exists("/e") {
			t.Error("the session's ephemeral is gone after AuthFailed")
		}
		// The resumed connection starts with the ip identity only.
		if got := r.WhoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1"}) {
			t.Errorf("whoAmI after resume: %v", got)
		}
	})
}

// TestACLInvalid: every InvalidACL case of create and setACL, and what valid lists store.
func TestACLInvalid(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/p", nil, 0)
		invalid := [][]encoding.ACL{
			nil,
			{},
			{itest.ACLOf(31, "world", "Anyone")},
			{itest.ACLOf(31, "world", "")},
			{itest.ACLOf(31, "super", "")},
			{itest.ACLOf(31, "sasl", "bob")},
			{itest.ACLOf(31, "x509", "CN=x")},
			{itest.ACLOf(31, "bogus", "x")},
			{itest.ACLOf(31, "auth", "")}, // no authenticated identity
			{itest.ACLOf(31, "ip", "127.0.0.1"), itest.ACLOf(31, "bogus", "x")},
		}
		for _, d := range []string{"a", "a:b:c", "a:", ":", "a::", "", "a::b"} {
			invalid = append(invalid, []encoding.ACL{itest.ACLOf(31, "digest", d)})
		}
		for _, ip := range []string{"1.2.3", "1.2.3.4.5", "1.2.3.256", "1.2.3.4/33", "1.2.3.4/-1", "1.2.3.4/", "1.2.3.4/a",
			"::1/129", "fe80::1%eth0", "::ffff:1.2.3.4", "1::2::3", "[::1]", "abcde::1", "localhost", "1.2.3.4.", " 1.2.3.4"} {
			invalid = append(invalid, []encoding.ACL{itest.ACLOf(31, "ip", ip)})
		}
		for i, acl := range invalid {
			if code := c.CreateACL(fmt.Sprintf("/p/n%d", i), acl...); code != encoding.ErrInvalidACL {
				t.Errorf("create with %v: %v, want InvalidACL", acl, code)
			}
			if code := c.SetACL("/p", acl...); code != encoding.ErrInvalidACL {
				t.Errorf("setACL with %v: %v, want InvalidACL", acl, code)
			}
		}
		// InvalidACL comes before NoNode (create) and before NoNode (setACL).
		if code := c.CreateACL("/missing/x"); code != encoding.ErrInvalidACL {
			t.Errorf("create under a missing parent with an empty ACL: %v", code)
		}
		if code := c.SetACL("/missing"); code != encoding.ErrInvalidACL {
			t.Errorf("setACL of a missing node with an empty ACL: %v", code)
		}
		// An ip connection is not authenticated: auth is still invalid.
		c.MustAuth("ip", "")
		if code := c.CreateACL("/p/ip", itest.ACLOf(31, "auth", "")); code != encoding.ErrInvalidACL {
			t.Errorf("auth ACL with only an ip identity: %v", code)
		}

		valid := []struct{ in, stored []encoding.ACL }{
			{[]encoding.ACL{itest.ACLOf(31, "ip", "01.2.3.4"), itest.ACLOf(31, "ip", "+1.2.3.4/+8"), itest.ACLOf(31, "ip", "::1/64"), itest.ACLOf(31, "ip", "FE80::1")}, nil},
			{[]encoding.ACL{itest.ACLOf(31, "digest", ":b"), itest.ACLOf(31, "digest", "a:b:")}, nil},
			{[]encoding.ACL{itest.WorldACL(0)}, nil},
			{[]encoding.ACL{itest.WorldACL(-1)}, nil},
			{[]encoding.ACL{itest.WorldACL(1), itest.WorldACL(31), itest.WorldACL(1)}, []encoding.ACL{itest.WorldACL(1), itest.WorldACL(31)}},
		}
		for i, v := range valid {
			p := fmt.Sprintf("/p/v%d", i)
			if code := c.CreateACL(p, v.in...); code != 0 {
				t.Errorf("create with %v: %v", v.in, code)
				continue
			}
			want := v.stored
			if want == nil {
				want = v.in
			}
			sup := itest.ConnectRaw(t, addr)
			sup.MustAuth("digest", "super:secret")
			if got, code := sup.GetACL(p); code != 0 || !slices.Equal(got, want) {
				t.Errorf("%s stored %v %v, want %v", p, got, code, want)
			}
		}
		// auth expands to the caller's digest ids; duplicates of the request are removed
		// before the expansion, not after it.
		c.MustAuth("digest", "alice:pw")
		alice := digestACL(31, "alice", "pw")
		c.MustCreateACL("/p/a1", alice, itest.ACLOf(31, "auth", ""))
		if got, _ := c.GetACL("/p/a1"); !slices.Equal(got, []encoding.ACL{alice, alice}) {
			t.Errorf("explicit id and auth: stored %v", got)
		}
		c.MustCreateACL("/p/a2", itest.ACLOf(1, "auth", ""), itest.ACLOf(31, "auth", "x"), itest.ACLOf(1, "auth", ""))
		if got, _ := c.GetACL("/p/a2"); !slices.Equal(got, []encoding.ACL{digestACL(1, "alice", "pw"), alice}) {
			t.Errorf("auth twice: stored %v", got)
		}
		c.MustAuth("digest", "bob:pw")
		c.MustAuth("digest", "super:secret")
		c.MustCreateACL("/p/a3", itest.ACLOf(31, "auth", ""))
		want := []encoding.ACL{digestACL(31, "bob", "pw"), digestACL(31, "super", "secret"), alice}
		if got, _ := c.GetACL("/p/a3"); !slices.Equal(got, want) {
			t.Errorf("auth with three digest ids: stored %v, want %v", got, want)
		}
	})
}

// permCase is one operation whose permission is checked on node (or its parent).
type permCase struct {
	name string
	need encoding.Perm // the bits of which one suffices
	// run performs the op on /t (which has children /t/c and /t/d, open ACLs) or a child of
	// it, and returns its code.
	run func(c *itest.RawClient) encoding.ErrCode
}

var permCases = []permCase{
	{"create", encoding.PermCreate, func(c *itest.RawClient) encoding.ErrCode { return c.CreateACL("/t/n", itest.WorldACL(31)) }},
	{"create2", encoding.PermCreate, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpCreate2, &encoding.CreateRequest{Path: "/t/n", ACL: itest.RawOpenACL}, &encoding.Create2Response{})
	}},
	{"create sequential", encoding.PermCreate, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/t/s-", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeralSequential}, &encoding.CreateResponse{})
	}},
	{"createContainer", encoding.PermCreate, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: "/t/n", ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}, &encoding.Create2Response{})
	}},
	{"createTTL", encoding.PermCreate, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpCreateTTL, &encoding.CreateTTLRequest{Path: "/t/n", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL, TTL: 60000}, &encoding.Create2Response{})
	}},
	{"delete", encoding.PermDelete, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/t/c", Version: -1}, nil)
	}},
	{"setData", encoding.PermWrite, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/t", Data: []byte("x"), Version: -1}, &encoding.SetDataResponse{})
	}},
	{"setACL", encoding.PermAdmin, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: "/t", ACL: itest.RawOpenACL, Version: -1}, &encoding.SetACLResponse{})
	}},
	{"exists", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/t"}, &encoding.ExistsResponse{})
	}},
	{"getData", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/t"}, &encoding.GetDataResponse{})
	}},
	{"getChildren", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/t"}, &encoding.GetChildrenResponse{})
	}},
	{"getChildren2", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: "/t"}, &encoding.GetChildren2Response{})
	}},
	{"getAllChildrenNumber", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: "/t"}, &encoding.GetAllChildrenNumberResponse{})
	}},
	{"getACL", encoding.PermRead | encoding.PermAdmin, func(c *itest.RawClient) encoding.ErrCode {
		_, code := c.GetACL("/t")
		return code
	}},
	{"multi check", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return multiCode(c, encoding.MultiOp{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: "/t", Version: -1}})
	}},
	{"multi create", encoding.PermCreate, func(c *itest.RawClient) encoding.ErrCode {
		return multiCode(c, encoding.MultiOp{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/t/n", ACL: itest.RawOpenACL}})
	}},
	{"multi delete", encoding.PermDelete, func(c *itest.RawClient) encoding.ErrCode {
		return multiCode(c, encoding.MultiOp{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/t/c", Version: -1}})
	}},
	{"multi setData", encoding.PermWrite, func(c *itest.RawClient) encoding.ErrCode {
		return multiCode(c, encoding.MultiOp{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/t", Version: -1}})
	}},
	{"multiRead getData", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return multiReadCode(c, encoding.MultiOp{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/t"}})
	}},
	{"multiRead getChildren", encoding.PermRead, func(c *itest.RawClient) encoding.ErrCode {
		return multiReadCode(c, encoding.MultiOp{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/t"}})
	}},
	// No permission needed.
	{"sync", 0, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/t"}, &encoding.SyncResponse{})
	}},
	{"addWatch", 0, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/t", Mode: encoding.AddWatchPersistentRecursive}, &encoding.ErrorResponse{})
	}},
	{"getEphemerals", 0, func(c *itest.RawClient) encoding.ErrCode {
		return c.MustCall(encoding.OpGetEphemerals, &encoding.GetEphemeralsRequest{PrefixPath: "/t"}, &encoding.GetEphemeralsResponse{})
	}},
}

// multiCode runs a one-op multi and returns the op's code.
func multiCode(c *itest.RawClient, op encoding.MultiOp) encoding.ErrCode {
	c.T.Helper()
	return oneOpMulti(c, encoding.OpMulti, op)
}

// multiReadCode runs a one-op multiRead and returns the op's code.
func multiReadCode(c *itest.RawClient, op encoding.MultiOp) encoding.ErrCode {
	c.T.Helper()
	return oneOpMulti(c, encoding.OpMultiRead, op)
}

// oneOpMulti sends op alone in a request of kind (multi or multiRead) and returns the op's code,
// or the request's when it fails as a whole.
func oneOpMulti(c *itest.RawClient, kind encoding.Op, op encoding.MultiOp) encoding.ErrCode {
	c.T.Helper()
	var r encoding.MultiResponse
	if code := c.MustCall(kind, &encoding.MultiRequest{Ops: []encoding.MultiOp{op}}, &r); code != 0 {
		return code
	}
	return r.Results[0].Err
}

// TestACLPermissions: each operation needs its permission bit on its node (the parent for
// create and delete) and no other: with the ACL granting everyone every bit but the needed
// ones it is NoAuth, with only a needed bit it succeeds. The owner (alice) and super may
// always.
func TestACLPermissions(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		admin := itest.ConnectRaw(t, addr)
		admin.MustAuth("digest", "alice:pw")
		anon := itest.ConnectRaw(t, addr)
		sup := itest.ConnectRaw(t, addr)
		sup.MustAuth("digest", "super:secret")
		setup := func(world encoding.Perm) {
			var kids encoding.GetChildrenResponse
			if sup.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/t"}, &kids) == 0 {
				for _, k := range kids.Children {
					sup.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/t/" + k, Version: -1}, nil)
				}
				if code := sup.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/t", Version: -1}, nil); code != 0 {
					t.Fatalf("delete /t: %v", code)
				}
			}
			admin.MustCreateACL("/t", digestACL(encoding.PermAll, "alice", "pw"), itest.WorldACL(world))
			admin.MustCreateACL("/t/c", itest.WorldACL(encoding.PermAll))
			admin.MustCreateACL("/t/d", itest.WorldACL(encoding.PermAll))
		}
		for _, pc := range permCases {
			for _, who := range []struct {
				name string
				c    *itest.RawClient
			}{{"anonymous", anon}, {"owner", admin}, {"super", sup}} {
				setup(encoding.PermAll &^ pc.need)
				code := pc.run(who.c)
				want := encoding.ErrOK
				if who.c == anon && pc.need != 0 {
					want = encoding.ErrNoAuth
				}
				if code != want {
					t.Errorf("%s by %s without %v: %v, want %v", pc.name, who.name, pc.need, code, want)
				}
			}
			for bit := encoding.PermRead; bit <= encoding.PermAdmin; bit <<= 1 {
				if pc.need&bit == 0 {
					continue
				}
				setup(bit)
				if code := pc.run(anon); code != 0 {
					t.Errorf("%s with only %v: %v", pc.name, bit, code)
				}
			}
		}
	})
}

// TestACLCheckOrder: where NoAuth falls among the other checks of each write (PrepRequestProcessor),
// and that a refused write consumes a zxid.
func TestACLCheckOrder(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		admin := itest.ConnectRaw(t, addr)
		admin.MustAuth("digest", "alice:pw")
		alice := digestACL(encoding.PermAll, "alice", "pw")
		admin.MustCreateACL("/r", alice)
		admin.MustCreateACL("/r/c", alice)
		admin.MustCreateACL("/w", alice, itest.WorldACL(encoding.PermRead))
		admin.MustCreateACL("/w/c", itest.WorldACL(encoding.PermAll))
		c := itest.ConnectRaw(t, addr)
		last := c.MustCreate("/z", nil, 0)
		write := func(name string, op encoding.Op, req, resp encoding.Record, want encoding.ErrCode) {
			t.Helper()
			hdr, err := c.Call(op, req, resp)
			if err != nil || hdr.Err != want {
				t.Errorf("%s: %v %v, want %v", name, hdr.Err, err, want)
			}
			if hdr.Zxid <= last {
				t.Errorf("%s: zxid %v did not advance past %v", name, hdr.Zxid, last)
			}
			last = hdr.Zxid
		}
		cr := func(path string, acl []encoding.ACL) *encoding.CreateRequest {
			return &encoding.CreateRequest{Path: path, ACL: acl}
		}
		write("create, parent without CREATE", encoding.OpCreate, cr("/r/x", itest.RawOpenACL), &encoding.CreateResponse{}, encoding.ErrNoAuth)
		write("create over an existing node, parent without CREATE", encoding.OpCreate, cr("/r/c", itest.RawOpenACL), &encoding.CreateResponse{}, encoding.ErrNoAuth)
		write("create with an invalid ACL, parent without CREATE", encoding.OpCreate, cr("/r/x", nil), &encoding.CreateResponse{}, encoding.ErrInvalidACL)
		write("create under a missing grandparent", encoding.OpCreate, cr("/r/x/y", itest.RawOpenACL), &encoding.CreateResponse{}, encoding.ErrNoNode)
		write("create of an invalid name, parent without CREATE", encoding.OpCreate, cr("/r/.", itest.RawOpenACL), &encoding.CreateResponse{}, encoding.ErrNoAuth)
		write("create of an invalid name", encoding.OpCreate, cr("/w/c/.", itest.RawOpenACL), &encoding.CreateResponse{}, encoding.ErrBadArguments)
		write("sequential create, parent without CREATE", encoding.OpCreate, &encoding.CreateRequest{Path: "/r/s-", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentSequential}, &encoding.CreateResponse{}, encoding.ErrNoAuth)
		write("delete, parent without DELETE", encoding.OpDelete, &encoding.DeleteRequest{Path: "/r/c", Version: 7}, nil, encoding.ErrNoAuth)
		write("delete of a missing node, parent without DELETE", encoding.OpDelete, &encoding.DeleteRequest{Path: "/r/missing", Version: -1}, nil, encoding.ErrNoAuth)
		write("delete with children", encoding.OpDelete, &encoding.DeleteRequest{Path: "/r", Version: -1}, nil, encoding.ErrNotEmpty)
		write("setData without WRITE, wrong version", encoding.OpSetData, &encoding.SetDataRequest{Path: "/r", Version: 99}, &encoding.SetDataResponse{}, encoding.ErrNoAuth)
		write("setData, wrong version", encoding.OpSetData, &encoding.SetDataRequest{Path: "/w/c", Version: 99}, &encoding.SetDataResponse{}, encoding.ErrBadVersion)
		write("setACL without ADMIN, wrong version", encoding.OpSetACL, &encoding.SetACLRequest{Path: "/r", ACL: itest.RawOpenACL, Version: 99}, &encoding.SetACLResponse{}, encoding.ErrNoAuth)
		write("setACL of a missing node", encoding.OpSetACL, &encoding.SetACLRequest{Path: "/missing", ACL: itest.RawOpenACL, Version: 99}, &encoding.SetACLResponse{}, encoding.ErrNoNode)
		write("setACL with READ only", encoding.OpSetACL, &encoding.SetACLRequest{Path: "/w", ACL: itest.RawOpenACL, Version: -1}, &encoding.SetACLResponse{}, encoding.ErrNoAuth)
		// A multi of checks only changes nothing but consumes a zxid.
		var mr encoding.MultiResponse
		write("multi of a check", encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: "/w", Version: -1}},
		}}, &mr, encoding.ErrOK)
		// A multi stops at the first refused op.
		mr = encoding.MultiResponse{}
		write("multi", encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpCreate, Record: cr("/w/c/n", []encoding.ACL{alice})},
			{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/w/c/n", Version: -1}},
			{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: "/r", Version: -1}},
		}}, &mr, encoding.ErrOK)
		wantErrors(t, encoding.ReplyHeader{}, mr.Results, 3, 1, encoding.ErrNoAuth)
		// The missing node of exists is NoNode, not NoAuth; reads answer NoNode first.
		for _, p := range []string{"/r/missing", "/missing"} {
			if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: p}, &encoding.ExistsResponse{}); code != encoding.ErrNoNode {
				t.Errorf("exists %s: %v", p, code)
			}
			if code := c.MustCall(encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: p}, &encoding.GetAllChildrenNumberResponse{}); code != encoding.ErrNoNode {
				t.Errorf("getAllChildrenNumber %s: %v", p, code)
			}
		}
		var rr encoding.MultiResponse
		if code := c.MustCall(encoding.OpMultiRead, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/r"}},
			{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/r"}},
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/w"}},
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/nope"}},
		}}, &rr); code != 0 || len(rr.Results) != 4 {
			t.Fatalf("multiRead: %v %v", code, rr.Results)
		}
		var codes []encoding.ErrCode
		for _, r := range rr.Results {
			codes = append(codes, r.Err)
		}
		if want := []encoding.ErrCode{encoding.ErrNoAuth, encoding.ErrNoAuth, 0, encoding.ErrNoNode}; !slices.Equal(codes, want) {
			t.Errorf("multiRead codes %v, want %v", codes, want)
		}
	})
}

// TestACLSchemes: world, auth, digest, ip (exact, CIDR, other family) and super.
func TestACLSchemes(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		admin := itest.ConnectRaw(t, addr)
		admin.MustAuth("digest", "alice:pw")
		for p, acl := range map[string][]encoding.ACL{
			"/world":    {itest.WorldACL(encoding.PermRead)},
			"/digest":   {digestACL(encoding.PermRead, "bob", "pw")},
			"/ip":       {itest.ACLOf(encoding.PermRead, "ip", "127.0.0.1")},
			"/ipnet":    {itest.ACLOf(encoding.PermRead, "ip", "127.0.0.0/8")},
			"/ipother":  {itest.ACLOf(encoding.PermRead, "ip", "10.0.0.0/8")},
			"/ipv6":     {itest.ACLOf(encoding.PermRead, "ip", "::/0")},
			"/ipall":    {itest.ACLOf(encoding.PermRead, "ip", "1.2.3.4/0")},
			"/auth":     {itest.ACLOf(encoding.PermAll, "auth", "")},
			"/noperm":   {itest.WorldACL(0)},
			"/writable": {itest.WorldACL(encoding.PermWrite)},
		} {
			admin.MustCreateACL(p, acl...)
		}
		anon := itest.ConnectRaw(t, addr)
		bob := itest.ConnectRaw(t, addr)
		bob.MustAuth("digest", "bob:pw")
		sup := itest.ConnectRaw(t, addr)
		sup.MustAuth("digest", "super:secret")
		read := func(c *itest.RawClient, p string) encoding.ErrCode {
			return c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: p}, &encoding.GetDataResponse{})
		}
		for _, cs := range []struct {
			path          string
			anon, bob, al encoding.ErrCode
		}{
			{"/world", 0, 0, 0},
			{"/digest", encoding.ErrNoAuth, 0, encoding.ErrNoAuth},
			{"/ip", 0, 0, 0},
			{"/ipnet", 0, 0, 0},
			{"/ipother", encoding.ErrNoAuth, encoding.ErrNoAuth, encoding.ErrNoAuth},
			{"/ipv6", encoding.ErrNoAuth, encoding.ErrNoAuth, encoding.ErrNoAuth},
			{"/ipall", 0, 0, 0},
			{"/auth", encoding.ErrNoAuth, encoding.ErrNoAuth, 0},
			{"/noperm", encoding.ErrNoAuth, encoding.ErrNoAuth, encoding.ErrNoAuth},
			{"/writable", encoding.ErrNoAuth, encoding.ErrNoAuth, encoding.ErrNoAuth},
		} {
			for _, w := range []struct {
				name string
				c    *itest.RawClient
				want encoding.ErrCode
			}{{"anonymous", anon, cs.anon}, {"bob", bob, cs.bob}, {"alice", admin, cs.al}, {"super", sup, 0}} {
				if got := read(w.c, cs.path); got != w.want {
					t.Errorf("getData %s by %s: %v, want %v", cs.path, w.name, got, w.want)
				}
			}
		}
		// A connection gains permissions as it authenticates.
		if code := read(anon, "/digest"); code != encoding.ErrNoAuth {
			t.Fatal(code)
		}
		anon.MustAuth("digest", "bob:pw")
		if code := read(anon, "/digest"); code != 0 {
			t.Errorf("after auth: %v", code)
		}
		// The super user may write where nobody may, and set any ACL.
		if code := sup.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/noperm", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("super setData: %v", code)
		}
		if code := sup.SetACL("/auth", itest.WorldACL(encoding.PermAll)); code != 0 {
			t.Errorf("super setACL: %v", code)
		}
		if code := read(bob, "/auth"); code != 0 {
			t.Errorf("after super opened /auth: %v", code)
		}
	})
}

// TestACLMasking: getACL needs READ or ADMIN; without ADMIN, digest ids read as user:x.
func TestACLMasking(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		admin := itest.ConnectRaw(t, addr)
		admin.MustAuth("digest", "alice:pw")
		acl := []encoding.ACL{digestACL(encoding.PermRead, "alice", "pw"), itest.ACLOf(encoding.PermRead, "digest", "bob:xyz"),
			itest.WorldACL(encoding.PermRead), itest.ACLOf(encoding.PermAdmin, "ip", "10.0.0.0/8"), itest.ACLOf(encoding.PermAdmin, "digest", ":b"), itest.ACLOf(encoding.PermAdmin, "digest", "a:b:")}
		admin.MustCreateACL("/m", acl...)
		masked := []encoding.ACL{itest.ACLOf(encoding.PermRead, "digest", "alice:x"), itest.ACLOf(encoding.PermRead, "digest", "bob:x"),
			itest.WorldACL(encoding.PermRead), itest.ACLOf(encoding.PermAdmin, "ip", "10.0.0.0/8"), itest.ACLOf(encoding.PermAdmin, "digest", ":x"), itest.ACLOf(encoding.PermAdmin, "digest", "a:x")}
		anon := itest.ConnectRaw(t, addr)
		if got, code := anon.GetACL("/m"); code != 0 || !slices.Equal(got, masked) {
			t.Errorf("getACL with READ: %v %v, want %v", got, code, masked)
		}
		if got, code := admin.GetACL("/m"); code != 0 || !slices.Equal(got, masked) {
			t.Errorf("getACL by alice (READ, no ADMIN): %v %v", got, code)
		}
		sup := itest.ConnectRaw(t, addr)
		sup.MustAuth("digest", "super:secret")
		if got, code := sup.GetACL("/m"); code != 0 || !slices.Equal(got, acl) {
			t.Errorf("getACL by super: %v %v", got, code)
		}
		admin.MustCreateACL("/m2", digestACL(encoding.PermAdmin, "alice", "pw"), itest.ACLOf(encoding.PermRead, "digest", "bob:xyz"))
		if got, code := admin.GetACL("/m2"); code != 0 || !slices.Equal(got, []encoding.ACL{digestACL(encoding.PermAdmin, "alice", "pw"), itest.ACLOf(encoding.PermRead, "digest", "bob:xyz")}) {
			t.Errorf("getACL with ADMIN: %v %v", got, code)
		}
		if _, code := anon.GetACL("/m2"); code != encoding.ErrNoAuth {
			t.Errorf("getACL without READ or ADMIN: %v", code)
		}
	})
}

// TestACLWatches: a watch event goes only to a connection that may READ the node whose ACL
// applies — the changed node (also a deleted one, by its ACL before the delete), the parent
// for NodeChildrenChanged — and a withheld one-shot watch is consumed (3.9.2+). setWatches'
// catch-up events are checked the same way, except NodeDeleted. A read refused with NoAuth
// sets no watch.
func TestACLWatches(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		admin := itest.ConnectRaw(t, addr)
		admin.MustAuth("digest", "alice:pw")
		secret := digestACL(encoding.PermAll, "alice", "pw")
		open := itest.WorldACL(encoding.PermAll)
		set := func(p string) {
			admin.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: p, Version: -1}, &encoding.SetDataResponse{})
		}
		del := func(p string) {
			if code := admin.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: p, Version: -1}, nil); code != 0 {
				t.Fatalf("delete %s: %v", p, code)
			}
		}
		setACL := func(p string, acl encoding.ACL) {
			if code := admin.SetACL(p, acl); code != 0 {
				t.Fatalf("setACL %s: %v", p, code)
			}
		}
		c := itest.ConnectRaw(t, addr)
		events := func(what string, want ...string) {
			t.Helper()
			c.Barrier()
			wantEvents(t, what, c.TakeEvents(), want...)
		}

		admin.MustCreateACL("/p", open)
		c.Watch("getData", "/p")
		setACL("/p", secret)
		set("/p")
		events("data watch after the ACL was revoked")
		setACL("/p", open)
		set("/p")
		events("the withheld watch was consumed")

		admin.MustCreateACL("/q", open)
		c.Watch("getChildren", "/q")
		setACL("/q", secret)
		admin.MustCreateACL("/q/x", open)
		events("child watch, parent's ACL revoked")

		c.Watch("exists", "/n")
		admin.MustCreateACL("/n", secret)
		events("exist watch, node created without READ for the watcher")

		admin.MustCreateACL("/d", open)
		c.Watch("getData", "/d")
		setACL("/d", secret)
		del("/d")
		events("data watch, node deleted after its ACL was revoked")

		admin.MustCreateACL("/sp", open)
		admin.MustCreateACL("/sp/o", open)
		c.Watch("getData", "/sp/o")
		setACL("/sp", secret)
		del("/sp/o")
		events("open node under a secret parent deleted", "NodeDeleted /sp/o")

		admin.MustCreateACL("/f", open)
		c.Watch("getChildren", "/f")
		setACL("/f", secret)
		del("/f")
		events("child watch, node deleted after its ACL was revoked")

		c.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/g", Mode: encoding.AddWatchPersistentRecursive}, &encoding.ErrorResponse{})
		admin.MustCreateACL("/g", open)
		admin.MustCreateACL("/g/open", open)
		admin.MustCreateACL("/g/secret", secret)
		set("/g/open")
		set("/g/secret")
		del("/g/open")
		del("/g/secret")
		events("recursive watch", "NodeCreated /g", "NodeCreated /g/open", "NodeDataChanged /g/open", "NodeDeleted /g/open")

		admin.MustCreateACL("/pp", open)
		c.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/pp", Mode: encoding.AddWatchPersistent}, &encoding.ErrorResponse{})
		admin.MustCreateACL("/pp/c", secret)
		setACL("/pp", secret)
		admin.MustCreateACL("/pp/d", open)
		set("/pp")
		setACL("/pp", open)
		set("/pp")
		events("persistent watch", "NodeChildrenChanged /pp", "NodeDataChanged /pp")

		// A multi: its creates decide by the ACL they give, even for a node it also deletes.
		c.Watch("exists", "/m1")
		c.Watch("exists", "/m2")
		var mr encoding.MultiResponse
		if code := admin.MustCall(encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/m1", ACL: []encoding.ACL{open}}},
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/m2", ACL: []encoding.ACL{secret}}},
			{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/m1", Version: -1}},
		}}, &mr); code != 0 || mr.Results[0].Err != 0 {
			t.Fatalf("multi: %v %+v", code, mr.Results)
		}
		events("multi", "NodeCreated /m1")
		// Create, change and delete in one multi: each event decided by the ACL the create gave.
		admin.MustCreateACL("/mm", open)
		c.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/mm", Mode: encoding.AddWatchPersistentRecursive}, &encoding.ErrorResponse{})
		mr = encoding.MultiResponse{}
		if code := admin.MustCall(encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/mm/a", ACL: []encoding.ACL{open}}},
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/mm/b", ACL: []encoding.ACL{secret}}},
			{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/mm/a", Version: -1}},
			{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: "/mm/b", Version: -1}},
			{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/mm/a", Version: -1}},
			{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/mm/b", Version: -1}},
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/mm/b", ACL: []encoding.ACL{open}}},
		}}, &mr); code != 0 || mr.Results[0].Err != 0 {
			t.Fatalf("multi: %v %+v", code, mr.Results)
		}
		events("multi with create, setData and delete", "NodeCreated /mm/a", "NodeDataChanged /mm/a", "NodeDeleted /mm/a", "NodeCreated /mm/b")

		rel := c.Create("/swbase", nil, 0)
		admin.MustCreateACL("/sw", secret)
		set("/sw")
		c.MustCall(encoding.OpSetWatches, &encoding.SetWatches{RelativeZxid: rel, DataWatches: []string{"/sw", "/gone"}, ExistWatches: []string{"/swmissing"}, ChildWatches: []string{}}, nil)
		events("setWatches catch-up", "NodeDeleted /gone")
		admin.MustCreateACL("/swmissing", secret)
		events("exist watch set by setWatches")

		// A read refused with NoAuth sets no watch.
		if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/sw", Watch: true}, &encoding.ExistsResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("exists on a secret node: %v", code)
		}
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/sw", Watch: true}, &encoding.GetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("getData on a secret node: %v", code)
		}
		if code := c.MustCall(encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "/sw", Type: encoding.WatcherAny}, nil); code != encoding.ErrNoWatcher {
			t.Errorf("checkWatches after refused reads: %v, want NoWatcher", code)
		}

		// A watcher that authenticates after the ACL changed gets the event.
		admin.MustCreateACL("/j", open)
		c.Watch("getData", "/j")
		setACL("/j", secret)
		c.MustAuth("digest", "alice:pw")
		set("/j")
		events("watcher authenticated since", "NodeDataChanged /j")
	})
}

// TestACLGoZookeeper: the go-zookeeper client's AddAuth, DigestACL and AuthACL.
func TestACLGoZookeeper(t *testing.T) {
	aclServers(t, func(t *testing.T, addr string) {
		owner := connect(t, addr)
		if err := owner.AddAuth("digest", []byte("alice:pw")); err != nil {
			t.Fatal(err)
		}
		if _, err := owner.Create("/owned", []byte("x"), 0, zk.AuthACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := owner.Create("/shared", []byte("x"), 0, append(zk.DigestACL(zk.PermAll, "alice", "pw"), zk.WorldACL(zk.PermRead)...)); err != nil {
			t.Fatal(err)
		}
		other := connect(t, addr)
		if _, _, err := other.Get("/owned"); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("get without auth: %v", err)
		}
		if _, _, err := other.Get("/shared"); err != nil {
			t.Errorf("get world-readable: %v", err)
		}
		if _, err := other.Set("/shared", nil, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("set without WRITE: %v", err)
		}
		if _, err := other.Create("/x", nil, 0, zk.AuthACL(zk.PermAll)); !errors.Is(err, zk.ErrInvalidACL) {
			t.Errorf("auth ACL without identity: %v", err)
		}
		acl, _, err := other.GetACL("/shared")
		if err != nil || len(acl) != 2 || acl[0].ID != "alice:x" {
			t.Errorf("getACL without ADMIN: %v %v", acl, err)
		}
		if err := other.AddAuth("digest", []byte("alice:pw")); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Set("/owned", []byte("y"), -1); err != nil {
			t.Errorf("set after auth: %v", err)
		}
	})
}

// TestACLIPv6: the ip scheme with an IPv6 client, whose identity is its address as Java spells
// it (eight groups, no "::"). zetcd only: the test ZooKeeper listens on 127.0.0.1.
func TestACLIPv6(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	z := testenv.StartZetcdOn(t, startEtcd(t), testenv.Options{Listener: ln})
	c := itest.ConnectRaw(t, z.Addr)
	if got := c.WhoAmI(); !slices.Equal(got, []string{"ip:0:0:0:0:0:0:0:1"}) {
		t.Errorf("whoAmI from ::1: %v", got)
	}
	for p, want := range map[string]encoding.ErrCode{
		"::1": 0, "::/0": 0, "0:0:0:0:0:0:0:1/128": 0, "::1/64": 0, "::/127": 0, "::2/127": encoding.ErrNoAuth,
		"::2": encoding.ErrNoAuth, "127.0.0.1": encoding.ErrNoAuth, "1.2.3.4/0": encoding.ErrNoAuth, "fe80::/10": encoding.ErrNoAuth,
	} {
		path := "/n" + strings.NewReplacer(":", "_", "/", "-", ".", "_").Replace(p)
		c.MustCreateACL(path, itest.ACLOf(encoding.PermRead, "ip", p), itest.ACLOf(encoding.PermAll, "digest", znode.DigestID("a", "b")))
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: path}, &encoding.GetDataResponse{}); code != want {
			t.Errorf("getData with ACL ip:%s from ::1: %v, want %v", p, code, want)
		}
	}
}

package znode

import (
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

var (
	worldAll  = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: SchemeWorld, ID: "anyone"}}}
	worldRead = []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: SchemeWorld, ID: "anyone"}}}
	badACL    = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: SchemeWorld, ID: "someone"}}}
)

// tree: /open (anyone may do anything), /ro (read only), /eph (an ephemeral), /open/x (with a
// child), /open/x/y, and /open's child counter at 7.
func tree() Nodes {
	return Nodes{
		"/":         {Exists: true, ACL: worldAll, NumChildren: 3},
		"/open":     {Exists: true, ACL: worldAll, NumChildren: 1, Creates: 7},
		"/open/x":   {Exists: true, ACL: worldAll, NumChildren: 1, Version: 3, Aversion: 1},
		"/open/x/y": {Exists: true, ACL: worldAll},
		"/ro":       {Exists: true, ACL: worldRead, NumChildren: 1},
		"/ro/child": {Exists: true, ACL: worldRead, Version: 2},
		"/eph":      {Exists: true, ACL: worldAll, EphemeralOwner: 0x42},
	}
}

// TestCheckCreateOrder walks PrepRequestProcessor's create order, each case failing one check
// that comes before others that would fail too.
func TestCheckCreateOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		op       CreateOp
		want     encoding.ErrCode
		wantName string
	}{
		{"bad flags", CreateOp{Path: "/none/a", Flags: 9, TTL: -1, ACL: badACL}, encoding.ErrBadArguments, ""},
		{"ttl on a plain create", CreateOp{Path: "/none/a", TTL: 5, ACL: badACL}, encoding.ErrBadArguments, ""},
		{"ttl out of range", CreateOp{Op: encoding.OpCreateTTL, Path: "/open/t", Flags: encoding.ModePersistentWithTTL, TTL: MaxTTL + 1, ACL: worldAll}, encoding.ErrBadArguments, ""},
		{"no slash beats InvalidACL", CreateOp{Path: "a", TTL: -1, ACL: badACL}, encoding.ErrBadArguments, ""},
		{"InvalidACL beats NoNode", CreateOp{Path: "/none/a", TTL: -1, ACL: badACL}, encoding.ErrInvalidACL, ""},
		{"empty ACL", CreateOp{Path: "/open/a", TTL: -1}, encoding.ErrInvalidACL, ""},
		{"NoNode beats an invalid name", CreateOp{Path: "/none/a/", TTL: -1, ACL: worldAll}, encoding.ErrNoNode, ""},
		{"NoAuth beats NodeExists", CreateOp{Path: "/ro/child", TTL: -1, ACL: worldAll}, encoding.ErrNoAuth, ""},
		{"invalid name after the parent", CreateOp{Path: "/open/x/", TTL: -1, ACL: worldAll}, encoding.ErrBadArguments, "/open/x/"},
		{"NodeExists", CreateOp{Path: "/open/x", TTL: -1, ACL: worldAll}, encoding.ErrNodeExists, "/open/x"},
		{"NodeExists beats NoChildrenForEphemerals", CreateOp{Path: "/eph", TTL: -1, ACL: worldAll}, encoding.ErrNodeExists, "/eph"},
		{"NoChildrenForEphemerals", CreateOp{Path: "/eph/a", TTL: -1, ACL: worldAll}, encoding.ErrNoChildrenForEphemerals, "/eph/a"},
		{"sequential name from the counter", CreateOp{Path: "/open/seq-", Flags: encoding.ModePersistentSequential, TTL: -1, ACL: worldAll}, 0, "/open/seq-0000000007"},
		{"created", CreateOp{Op: encoding.OpCreate2, Path: "/open/new", TTL: -1, ACL: worldAll}, 0, "/open/new"},
	} {
		name, acl, code := CheckCreate(tree(), c.op, &Identities{}, Providers{})
		if code != c.want || name != c.wantName {
			t.Errorf("%s: %q %v, want %q %v", c.name, name, code, c.wantName, c.want)
		}
		if code == 0 && len(acl) == 0 {
			t.Errorf("%s: no ACL returned", c.name)
		}
	}
}

// TestCheckVersionedOrder walks the orders of delete, setData, setACL and a multi's check, each case
// failing one check that comes before others that would fail too.
func TestCheckVersionedOrder(t *testing.T) {
	who := &Identities{}
	del := func(path string, version int32) encoding.ErrCode { return CheckDelete(tree(), path, version, who) }
	set := func(path string, version int32) encoding.ErrCode { return CheckSetData(tree(), path, version, who) }
	chk := func(path string, version int32) encoding.ErrCode { return CheckVersion(tree(), path, version, who) }
	acl := func(path string, version int32) encoding.ErrCode { return CheckSetACL(tree(), path, version, who) }
	for _, c := range []struct {
		name    string
		check   func(string, int32) encoding.ErrCode
		path    string
		version int32
		want    encoding.ErrCode
	}{
		{"delete: system node", del, "/zookeeper", -1, encoding.ErrBadArguments},
		{"delete: root", del, "/", -1, encoding.ErrBadArguments},
		{"delete: no parent", del, "/none/a", 5, encoding.ErrNoNode},
		{"delete: NoAuth beats NoNode of the node", del, "/ro/none", -1, encoding.ErrNoAuth},
		{"delete: NoNode", del, "/open/none", 5, encoding.ErrNoNode},
		{"delete: BadVersion beats NotEmpty", del, "/open/x", 2, encoding.ErrBadVersion},
		{"delete: NotEmpty", del, "/open/x", 3, encoding.ErrNotEmpty},
		{"delete: any version", del, "/open/x/y", -1, 0},
		{"setData: invalid path", set, "/open/", -1, encoding.ErrBadArguments},
		{"setData: NoNode", set, "/open/none", 7, encoding.ErrNoNode},
		{"setData: NoAuth beats BadVersion", set, "/ro/child", 9, encoding.ErrNoAuth},
		{"setData: NoAuth with the right version", set, "/ro/child", 2, encoding.ErrNoAuth},
		{"setData: BadVersion", set, "/open/x", 2, encoding.ErrBadVersion},
		{"setData: any version", set, "/open/x", -1, 0},
		{"check: invalid path", chk, "/open/", -1, encoding.ErrBadArguments},
		{"check: NoNode", chk, "/open/none", 7, encoding.ErrNoNode},
		{"check: READ is enough, BadVersion", chk, "/ro/child", 9, encoding.ErrBadVersion},
		{"check: version matches", chk, "/ro/child", 2, 0},
		{"check: BadVersion", chk, "/open/x", 2, encoding.ErrBadVersion},
		{"check: any version", chk, "/open/x", -1, 0},
		{"setACL: NoNode", acl, "/open/none", 7, encoding.ErrNoNode},
		{"setACL: NoAuth (no ADMIN) beats BadVersion", acl, "/ro/child", 9, encoding.ErrNoAuth},
		{"setACL: the data version is not the aversion", acl, "/open/x", 3, encoding.ErrBadVersion},
		{"setACL: aversion matches", acl, "/open/x", 1, 0},
		{"setACL: any version", acl, "/open/x", -1, 0},
	} {
		if got := c.check(c.path, c.version); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

package znode

import (
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// mapView is a View over a map; absent paths are absent nodes.
type mapView map[string]Node

func (v mapView) Node(path string) Node { return v[path] }

var (
	worldAll  = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: SchemeWorld, ID: "anyone"}}}
	worldRead = []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: SchemeWorld, ID: "anyone"}}}
	badACL    = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: SchemeWorld, ID: "someone"}}}
)

// tree: /open (anyone may do anything), /ro (read only), /eph (an ephemeral), /open/x (with a
// child), /open/x/y, and /open's child counter at 7.
func tree() mapView {
	return mapView{
		"/":         {Exists: true, ACL: worldAll, NumChildren: 3},
		"/open":     {Exists: true, ACL: worldAll, NumChildren: 1, Creates: 7},
		"/open/x":   {Exists: true, ACL: worldAll, NumChildren: 1, Version: 3},
		"/open/x/y": {Exists: true, ACL: worldAll},
		"/ro":       {Exists: true, ACL: worldRead, NumChildren: 1},
		"/ro/child": {Exists: true, ACL: worldRead, Version: 2},
		"/eph":      {Exists: true, ACL: worldAll, EphemeralOwner: 0x42},
	}
}

// TestCheckCreateOrder walks PROTOCOL.md §3.2's create order, each case failing one check
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
		name, acl, code := CheckCreate(tree(), c.op, &Identities{}, false)
		if code != c.want || name != c.wantName {
			t.Errorf("%s: %q %v, want %q %v", c.name, name, code, c.wantName, c.want)
		}
		if code == 0 && len(acl) == 0 {
			t.Errorf("%s: no ACL returned", c.name)
		}
	}
}

func TestCheckDeleteOrder(t *testing.T) {
	for _, c := range []struct {
		name    string
		path    string
		version int32
		want    encoding.ErrCode
	}{
		{"system node", "/zookeeper", -1, encoding.ErrBadArguments},
		{"root", "/", -1, encoding.ErrBadArguments},
		{"no parent", "/none/a", 5, encoding.ErrNoNode},
		{"NoAuth beats NoNode of the node", "/ro/none", -1, encoding.ErrNoAuth},
		{"NoNode", "/open/none", 5, encoding.ErrNoNode},
		{"BadVersion beats NotEmpty", "/open/x", 2, encoding.ErrBadVersion},
		{"NotEmpty", "/open/x", 3, encoding.ErrNotEmpty},
		{"any version", "/open/x/y", -1, 0},
	} {
		if got := CheckDelete(tree(), c.path, c.version, &Identities{}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCheckSetDataAndVersion(t *testing.T) {
	for _, c := range []struct {
		name      string
		path      string
		version   int32
		setData   encoding.ErrCode
		checkCode encoding.ErrCode
	}{
		{"invalid path", "/open/", -1, encoding.ErrBadArguments, encoding.ErrBadArguments},
		{"NoNode", "/open/none", 7, encoding.ErrNoNode, encoding.ErrNoNode},
		{"NoAuth beats BadVersion (write only)", "/ro/child", 9, encoding.ErrNoAuth, encoding.ErrBadVersion},
		{"version matches", "/ro/child", 2, encoding.ErrNoAuth, 0},
		{"BadVersion", "/open/x", 2, encoding.ErrBadVersion, encoding.ErrBadVersion},
		{"any version", "/open/x", -1, 0, 0},
	} {
		if got := CheckSetData(tree(), c.path, c.version, &Identities{}); got != c.setData {
			t.Errorf("setData %s: %v, want %v", c.name, got, c.setData)
		}
		if got := CheckVersion(tree(), c.path, c.version, &Identities{}); got != c.checkCode {
			t.Errorf("check %s: %v, want %v", c.name, got, c.checkCode)
		}
	}
}

package integration

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestCoreSystemNodes: a fresh server has /, /zookeeper, /zookeeper/quota and /zookeeper/config
// with ZooKeeper's stats (DataTree).
func TestCoreSystemNodes(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		var root encoding.GetChildren2Response
		if code := c.MustCall(encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: "/"}, &root); code != 0 {
			t.Fatalf("getChildren2 /: %v", code)
		}
		if !slices.Equal(root.Children, []string{"zookeeper"}) {
			t.Errorf("children of / = %q, want [zookeeper]", root.Children)
		}
		if want := (encoding.Stat{Cversion: -1, NumChildren: 1}); root.Stat != want {
			t.Errorf("stat of / = %+v, want %+v", root.Stat, want)
		}
		var zkNode encoding.GetDataResponse
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/zookeeper"}, &zkNode); code != 0 {
			t.Fatalf("getData /zookeeper: %v", code)
		}
		if want := (encoding.Stat{Cversion: -2, NumChildren: 2}); zkNode.Stat != want {
			t.Errorf("stat of /zookeeper = %+v, want %+v", zkNode.Stat, want)
		}
		if zkNode.Data == nil || len(zkNode.Data) != 0 {
			t.Errorf("/zookeeper data = %v, want empty (not null)", zkNode.Data)
		}
		var cfg encoding.GetACLResponse
		if code := c.MustCall(encoding.OpGetACL, &encoding.GetACLRequest{Path: "/zookeeper/config"}, &cfg); code != 0 {
			t.Fatalf("getACL /zookeeper/config: %v", code)
		}
		wantACL := []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}
		if !slices.Equal(cfg.ACL, wantACL) || cfg.Stat.Aversion != -1 {
			t.Errorf("/zookeeper/config ACL %+v aversion %d, want %+v and -1", cfg.ACL, cfg.Stat.Aversion, wantACL)
		}
		var quota encoding.ExistsResponse
		if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/zookeeper/quota"}, &quota); code != 0 {
			t.Fatalf("exists /zookeeper/quota: %v", code)
		}
		for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
			if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: p, Version: -1}, nil); code != encoding.ErrBadArguments {
				t.Errorf("delete %s: %v, want BadArguments", p, code)
			}
		}
	})
}

// TestCoreCRUD: create, get, set, children, delete through go-zookeeper, with exact Stats.
func TestCoreCRUD(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := connect(t, addr)
		p, err := c.Create("/app", []byte("v1"), 0, openACL)
		if err != nil || p != "/app" {
			t.Fatalf("create /app = %q, %v", p, err)
		}
		data, st, err := c.Get("/app")
		if err != nil || string(data) != "v1" {
			t.Fatalf("get /app = %q, %v", data, err)
		}
		if st.Czxid != st.Mzxid || st.Czxid != st.Pzxid || st.Version != 0 || st.Cversion != 0 || st.Aversion != 0 ||
			st.DataLength != 2 || st.NumChildren != 0 || st.EphemeralOwner != 0 || st.Ctime != st.Mtime || st.Ctime == 0 {
			t.Errorf("stat after create: %+v", st)
		}
		created := st.Czxid

		st2, err := c.Set("/app", []byte("value-2"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if st2.Version != 1 || st2.Czxid != created || st2.Mzxid <= created || st2.DataLength != 7 || st2.Pzxid != created {
			t.Errorf("stat after set: %+v", st2)
		}
		if _, err := c.Set("/app", []byte("x"), 0); !errors.Is(err, zk.ErrBadVersion) {
			t.Errorf("set with stale version: %v, want ErrBadVersion", err)
		}
		if _, err := c.Set("/app", []byte("v3"), -1); err != nil {
			t.Errorf("set with version -1: %v", err)
		}

		for _, n := range []string{"a", "b", "c"} {
			if _, err := c.Create("/app/"+n, nil, 0, openACL); err != nil {
				t.Fatal(err)
			}
		}
		children, pst, err := c.Children("/app")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(children)
		if !slices.Equal(children, []string{"a", "b", "c"}) || pst.NumChildren != 3 || pst.Cversion != 3 {
			t.Errorf("children %q stat %+v", children, pst)
		}
		_, ast, _ := c.Exists("/app/c")
		if pst.Pzxid != ast.Czxid {
			t.Errorf("parent pzxid %d, want last child's czxid %d", pst.Pzxid, ast.Czxid)
		}
		if pst.Version != 2 || !zxidAfter(st2.Mzxid, pst.Mzxid, 2) {
			// After st2 came the refused set (a failed write consumes a zxid) and the -1 set;
			// child creates do not touch mzxid.
			t.Errorf("parent version/mzxid moved by child ops: %+v", pst)
		}
		if err := c.Delete("/app", -1); !errors.Is(err, zk.ErrNotEmpty) {
			t.Errorf("delete non-empty: %v, want ErrNotEmpty", err)
		}
		if err := c.Delete("/app/b", 3); !errors.Is(err, zk.ErrBadVersion) {
			t.Errorf("delete with wrong version: %v, want ErrBadVersion", err)
		}
		if err := c.Delete("/app/b", 0); err != nil {
			t.Fatal(err)
		}
		_, pst2, err := c.Exists("/app")
		if err != nil {
			t.Fatal(err)
		}
		if pst2.Cversion != 4 || pst2.NumChildren != 2 || pst2.Pzxid <= pst.Pzxid {
			t.Errorf("parent after a child delete: %+v", pst2)
		}
		if err := c.Delete("/app/b", -1); !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("delete deleted node: %v, want ErrNoNode", err)
		}
		if ok, _, err := c.Exists("/app/b"); ok || err != nil {
			t.Errorf("exists deleted node = %v, %v", ok, err)
		}
		if _, _, err := c.Get("/nope"); !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("get missing: %v", err)
		}
		if _, _, err := c.Children("/nope"); !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("children of missing: %v", err)
		}
		if _, err := c.Create("/app/a", nil, 0, openACL); !errors.Is(err, zk.ErrNodeExists) {
			t.Errorf("create existing: %v", err)
		}
		if _, err := c.Create("/missing/a", nil, 0, openACL); !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("create under missing parent: %v", err)
		}
		if p, err := c.Sync("/app"); err != nil || p != "/app" {
			t.Errorf("sync = %q, %v", p, err)
		}
	})
}

// TestCoreNullAndEmptyData: null data and empty data are different on the wire and both have
// dataLength 0.
func TestCoreNullAndEmptyData(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		for _, tc := range []struct {
			path string
			data []byte
		}{{"/null", nil}, {"/empty", []byte{}}} {
			var cr encoding.CreateResponse
			if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: tc.path, Data: tc.data, ACL: itest.RawOpenACL}, &cr); code != 0 {
				t.Fatalf("create %s: %v", tc.path, code)
			}
			var gd encoding.GetDataResponse
			if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: tc.path}, &gd); code != 0 {
				t.Fatalf("getData %s: %v", tc.path, code)
			}
			if (gd.Data == nil) != (tc.data == nil) || len(gd.Data) != 0 || gd.Stat.DataLength != 0 {
				t.Errorf("%s: data %#v dataLength %d", tc.path, gd.Data, gd.Stat.DataLength)
			}
		}
	})
}

// TestCoreEphemeralAndSequential: ephemeral nodes belong to their session and vanish when it
// closes; sequence suffixes come from the parent's create counter, which deletes do not lower.
func TestCoreEphemeralAndSequential(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		owner := connect(t, addr)
		watcher := connect(t, addr)
		if _, err := owner.Create("/locks", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		var names []string
		for i := 0; i < 3; i++ {
			p, err := owner.Create("/locks/lock-", []byte("x"), zk.FlagEphemeral|zk.FlagSequence, openACL)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, p)
		}
		want := []string{"/locks/lock-0000000000", "/locks/lock-0000000001", "/locks/lock-0000000002"}
		if !slices.Equal(names, want) {
			t.Fatalf("sequential names %q, want %q", names, want)
		}
		_, st, err := watcher.Exists(names[0])
		if err != nil || st.EphemeralOwner != owner.SessionID() {
			t.Fatalf("ephemeralOwner = %x (%v), want session %x", st.EphemeralOwner, err, owner.SessionID())
		}
		if _, err := owner.Create(names[0]+"/child", nil, 0, openACL); !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
			t.Errorf("child of ephemeral: %v, want ErrNoChildrenForEphemerals", err)
		}
		if err := owner.Delete(names[1], -1); err != nil {
			t.Fatal(err)
		}
		// setData keeps the owner: the node still goes with its session (checked at the end).
		st, err = watcher.Set(names[2], []byte("y"), -1)
		if err != nil {
			t.Fatal(err)
		}
		if st.EphemeralOwner != owner.SessionID() {
			t.Fatalf("setData of an ephemeral: ephemeralOwner = %x, want session %x", st.EphemeralOwner, owner.SessionID())
		}
		// A persistent sequential node after a delete: the counter is 3, not 2.
		p, err := watcher.Create("/locks/lock-", nil, zk.FlagSequence, openACL)
		if err != nil || p != "/locks/lock-0000000003" {
			t.Fatalf("sequential after delete = %q, %v; want /locks/lock-0000000003", p, err)
		}
		// A trailing '/' is legal with the sequential flag.
		p, err = watcher.Create("/locks/", nil, zk.FlagSequence, openACL)
		if err != nil || p != "/locks/0000000004" {
			t.Fatalf("sequential with trailing slash = %q, %v", p, err)
		}

		// A sequential create whose name a plain create took first fails with NodeExists, and
		// again on a retry: a failed create does not move the parent's counter.
		if _, err := watcher.Create("/seqx", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		if _, err := watcher.Create("/seqx/n-0000000001", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if p, err := watcher.Create("/seqx/n-", nil, zk.FlagSequence, openACL); !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("sequential create onto a taken name = %q, %v; want ErrNodeExists", p, err)
			}
		}

		owner.Close()
		children, st := testenv.WaitChildren(t, watcher, "/locks", 2)
		slices.Sort(children)
		if !slices.Equal(children, []string{"0000000004", "lock-0000000003"}) {
			t.Errorf("children after close: %q", children)
		}
		// 5 creates and 3 deletes (one explicit, two by the session's close).
		if st.Cversion != 8 || st.NumChildren != 2 {
			t.Errorf("parent after close: %+v, want cversion 8, numChildren 2", st)
		}
	})
}

// TestCoreCreateErrors: ZooKeeper's check order for create (PrepRequestProcessor), with paths
// go-zookeeper would refuse to send.
func TestCoreCreateErrors(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/x", ACL: itest.RawOpenACL}, nil); code != 0 {
			t.Fatal(code)
		}
		cases := []struct {
			path  string
			flags encoding.CreateMode
			acl   []encoding.ACL
			want  encoding.ErrCode
		}{
			{"/x/a", 9, itest.RawOpenACL, encoding.ErrBadArguments},
			{"noslash", 0, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/x/a\x00b", 0, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/missing/a", 0, nil, encoding.ErrInvalidACL},
			{"/missing/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "nosuch", ID: "x"}}}, encoding.ErrInvalidACL},
			{"/missing/a", 0, itest.RawOpenACL, encoding.ErrNoNode},
			{"/missing/..", 0, itest.RawOpenACL, encoding.ErrNoNode},
			{"/x/..", 0, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/x/", 0, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/x//a", 0, itest.RawOpenACL, encoding.ErrNoNode},
			{"/x/\U0001F600", 0, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/x/\u0007", 0, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/x", 0, itest.RawOpenACL, encoding.ErrNodeExists},
			{"/", 0, itest.RawOpenACL, encoding.ErrNodeExists},
			{"/x", encoding.ModePersistentWithTTL, itest.RawOpenACL, encoding.ErrBadArguments},
			{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "world", ID: "nobody"}}}, encoding.ErrInvalidACL},
			{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "digest", ID: "user"}}}, encoding.ErrInvalidACL},
			{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "ip", ID: "300.1.1.1"}}}, encoding.ErrInvalidACL},
			{"/x/a", 0, []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "auth", ID: ""}}}, encoding.ErrInvalidACL},
		}
		for _, tc := range cases {
			hdr, err := c.Call(encoding.OpCreate, &encoding.CreateRequest{Path: tc.path, ACL: tc.acl, Flags: tc.flags}, nil)
			if err != nil {
				t.Fatalf("create %q: %v", tc.path, err)
			}
			if hdr.Err != tc.want {
				t.Errorf("create %q flags %d: %v, want %v", tc.path, tc.flags, hdr.Err, tc.want)
			}
		}
		// Valid odd names.
		for _, name := range []string{"/x/...", "/x/.a", "/x/a.", "/x/zookeeper", "/x/\u00e9t\u00e9"} {
			if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: name, ACL: itest.RawOpenACL}, nil); code != 0 {
				t.Errorf("create %q: %v", name, code)
			}
		}
		// ACLs are stored (de-duplicated) and returned.
		acl := []encoding.ACL{
			{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "ip", ID: "10.0.0.0/8"}},
			{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}},
			{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "ip", ID: "10.0.0.0/8"}},
			{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "digest", ID: "bob:abc="}},
		}
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/x/acl", ACL: acl}, nil); code != 0 {
			t.Fatal(code)
		}
		var ga encoding.GetACLResponse
		if code := c.MustCall(encoding.OpGetACL, &encoding.GetACLRequest{Path: "/x/acl"}, &ga); code != 0 {
			t.Fatal(code)
		}
		if want := []encoding.ACL{acl[0], acl[1], acl[3]}; !slices.Equal(ga.ACL, want) {
			t.Errorf("getACL = %+v, want %+v", ga.ACL, want)
		}
		var sa encoding.SetACLResponse
		if code := c.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: "/x/acl", ACL: itest.RawOpenACL, Version: 0}, &sa); code != 0 {
			t.Fatal(code)
		}
		if sa.Stat.Aversion != 1 || sa.Stat.Mzxid != sa.Stat.Czxid {
			t.Errorf("setACL stat %+v: want aversion 1 and mzxid unchanged", sa.Stat)
		}
		if code := c.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: "/x/acl", ACL: itest.RawOpenACL, Version: 0}, nil); code != encoding.ErrBadVersion {
			t.Errorf("setACL stale aversion: %v", code)
		}
		if code := c.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: "/x/acl", ACL: nil, Version: -1}, nil); code != encoding.ErrInvalidACL {
			t.Errorf("setACL empty: %v", code)
		}
		if code := c.MustCall(encoding.OpSetACL, &encoding.SetACLRequest{Path: "/x/none", ACL: itest.RawOpenACL, Version: -1}, nil); code != encoding.ErrNoNode {
			t.Errorf("setACL missing: %v", code)
		}
		// Reads of odd paths simply miss; exists with NUL is BadArguments.
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/x/"}, nil); code != encoding.ErrNoNode {
			t.Errorf("getData /x/: %v", code)
		}
		if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/x\x00"}, nil); code != encoding.ErrBadArguments {
			t.Errorf("exists with NUL: %v", code)
		}
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/x/", Version: -1}, nil); code != encoding.ErrBadArguments {
			t.Errorf("setData /x/: %v", code)
		}
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "nos", Version: -1}, nil); code != encoding.ErrBadArguments {
			t.Errorf("delete without slash: %v", code)
		}
	})
}

// TestCoreGetChildrenAndCreate2: the opcodes go-zookeeper never sends (8 and 15).
func TestCoreGetChildrenAndCreate2(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		var c2 encoding.Create2Response
		if code := c.MustCall(encoding.OpCreate2, &encoding.CreateRequest{Path: "/c2", Data: []byte("abc"), ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, &c2); code != 0 {
			t.Fatal(code)
		}
		if c2.Path != "/c2" || c2.Stat.DataLength != 3 || c2.Stat.EphemeralOwner != c.Session.SessionID ||
			c2.Stat.Czxid == 0 || c2.Stat.Czxid != c2.Stat.Mzxid || c2.Stat.Czxid != c2.Stat.Pzxid {
			t.Errorf("create2 = %+v, session %v", c2, c.Session.SessionID)
		}
		var gd encoding.GetDataResponse
		c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/c2"}, &gd)
		if gd.Stat != c2.Stat {
			t.Errorf("getData stat %+v != create2 stat %+v", gd.Stat, c2.Stat)
		}
		var gc encoding.GetChildrenResponse
		if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/"}, &gc); code != 0 {
			t.Fatal(code)
		}
		slices.Sort(gc.Children)
		if !slices.Equal(gc.Children, []string{"c2", "zookeeper"}) {
			t.Errorf("getChildren / = %q", gc.Children)
		}
		if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/none"}, nil); code != encoding.ErrNoNode {
			t.Errorf("getChildren missing: %v", code)
		}
		var gc2 encoding.GetChildrenResponse
		c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/c2"}, &gc2)
		if gc2.Children == nil || len(gc2.Children) != 0 {
			t.Errorf("children of a leaf = %#v, want an empty (not null) list", gc2.Children)
		}
	})
}

package integration

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// reapInterval is how often both servers look for containers and TTL nodes to delete in the
// reaping tests (ZooKeeper's default is 60s).
const reapInterval = 200 * time.Millisecond

// reapingServers are zetcd and ZooKeeper with a short reap interval.
var reapingServers = []testenv.Server{
	{Name: "zetcd", Start: func(t testing.TB) string {
		return testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{ReapInterval: reapInterval}).Addr
	}},
	{Name: "zookeeper", Start: func(t testing.TB) string {
		return zkserver.Start(t, zkserver.Options{SystemProps: map[string]string{
			"znode.container.checkIntervalMs": "200",
		}}).Addr
	}},
}

// forServers runs f as a subtest against a fresh instance of each server.
func forServers(t *testing.T, servers []testenv.Server, f func(t *testing.T, addr string)) {
	for _, s := range servers {
		t.Run(s.Name, func(t *testing.T) { f(t, s.Start(t)) })
	}
}

// waitGone waits until path does not exist, failing the test after 10s.
func waitGone(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, path+" gone", func() error {
		ok, _, err := c.Exists(path)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return errors.New("still exists")
		}
		return nil
	})
}

// mustExist fails the test if path does not exist.
func mustExist(t *testing.T, c *zk.Conn, path, why string) {
	t.Helper()
	if ok, _, err := c.Exists(path); err != nil || !ok {
		t.Fatalf("%s: %s is gone (%v)", why, path, err)
	}
}

// TestContainers is Curator's use of containers: lock parents created as containers, a lock
// node created and deleted under them, and the parents reaped once they are empty — but not a
// container that never had a child, nor a node created with container flags by create (1),
// which ZooKeeper 3.9 makes a plain persistent node.
func TestContainers(t *testing.T) {
	forServers(t, reapingServers, func(t *testing.T, addr string) {
		c := connect(t, addr)
		raw := itest.ConnectRaw(t, addr)
		for _, p := range []string{"/curator", "/curator/locks", "/unused"} {
			var cr encoding.Create2Response
			if code := raw.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: p, ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}, &cr); code != 0 {
				t.Fatalf("createContainer %s: %v", p, code)
			}
			if cr.Path != p || cr.Stat.EphemeralOwner != 0 || cr.Stat.Czxid == 0 {
				t.Errorf("createContainer %s: %+v", p, cr)
			}
		}
		if code := raw.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/plain", ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}, &encoding.CreateResponse{}); code != 0 {
			t.Fatalf("create with container flags: %v", code)
		}
		lock, err := c.Create("/curator/locks/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, openACL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create("/plain/child", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete("/plain/child", -1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * reapInterval)
		mustExist(t, c, "/curator/locks", "container with a child")
		mustExist(t, c, "/curator", "container with a child")
		if err := c.Delete(lock, -1); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, "/curator/locks")
		waitGone(t, c, "/curator")
		mustExist(t, c, "/unused", "container that never had a child")
		mustExist(t, c, "/plain", "node created by create with container flags")
		_, st, err := c.Exists("/")
		if err != nil {
			t.Fatal(err)
		}
		if st.NumChildren != 3 {
			t.Errorf("/ after reaping: %+v", st)
		}
	})
}

// TestContainerOpcodes: createContainer makes a container whatever its non-TTL flags say
// (sequential flags still name it), and refuses TTL and invalid flags.
func TestContainerOpcodes(t *testing.T) {
	forServers(t, reapingServers, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		c := connect(t, addr)
		var made []string
		for _, flags := range []encoding.CreateMode{0, encoding.ModeEphemeral, encoding.ModePersistentSequential} {
			var cr encoding.Create2Response
			if code := raw.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: "/k", ACL: itest.RawOpenACL, Flags: flags}, &cr); code != 0 {
				t.Fatalf("createContainer flags %d: %v", flags, code)
			}
			if cr.Stat.EphemeralOwner != 0 {
				t.Errorf("createContainer flags %d: ephemeralOwner %x", flags, cr.Stat.EphemeralOwner)
			}
			made = append(made, cr.Path)
			if _, err := c.Create(cr.Path+"/c", nil, 0, openACL); err != nil {
				t.Fatalf("child of %s: %v", cr.Path, err)
			}
			if err := c.Delete(cr.Path+"/c", -1); err != nil {
				t.Fatal(err)
			}
			if flags == 0 {
				waitGone(t, c, "/k")
			}
		}
		if made[2] != "/k0000000002" {
			t.Errorf("sequential container named %s, want /k0000000002", made[2])
		}
		for _, p := range made[1:] {
			waitGone(t, c, p)
		}
		for _, flags := range []encoding.CreateMode{encoding.ModePersistentWithTTL, encoding.ModePersistentSequentialWithTTL, 7, -1} {
			if code := raw.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: "/bad", ACL: itest.RawOpenACL, Flags: flags}, &encoding.Create2Response{}); code != encoding.ErrBadArguments {
				t.Errorf("createContainer flags %d: %v, want BadArguments", flags, code)
			}
		}
		if code := raw.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: "/nope/k", ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}, &encoding.Create2Response{}); code != encoding.ErrNoNode {
			t.Errorf("createContainer under a missing parent: %v, want NoNode", code)
		}
	})
}

// TestTTLNodes: a TTL node with no children is deleted once its mtime is older than its TTL;
// createTTL checks its flags and TTL.
func TestTTLNodes(t *testing.T) {
	forServers(t, reapingServers, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		c := connect(t, addr)
		createTTL := func(path string, flags encoding.CreateMode, ttl int64) (encoding.Create2Response, encoding.ErrCode) {
			var cr encoding.Create2Response
			code := raw.MustCall(encoding.OpCreateTTL, &encoding.CreateTTLRequest{Path: path, Data: []byte("d"), ACL: itest.RawOpenACL, Flags: flags, TTL: ttl}, &cr)
			return cr, code
		}
		cr, code := createTTL("/ttl", encoding.ModePersistentWithTTL, 500)
		if code != 0 || cr.Path != "/ttl" || cr.Stat.EphemeralOwner != 0 || cr.Stat.DataLength != 1 {
			t.Fatalf("createTTL: %v %+v", code, cr)
		}
		cr, code = createTTL("/ttl-", encoding.ModePersistentSequentialWithTTL, 500)
		if code != 0 || cr.Path != "/ttl-0000000001" {
			t.Fatalf("sequential createTTL: %v %+v", code, cr)
		}
		if _, code = createTTL("/parent", encoding.ModePersistentWithTTL, 500); code != 0 {
			t.Fatal(code)
		}
		if _, err := c.Create("/parent/child", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		if _, code = createTTL("/long", encoding.ModePersistentWithTTL, 1<<40-1); code != 0 {
			t.Errorf("createTTL with the largest TTL: %v", code)
		}
		waitGone(t, c, "/ttl")
		waitGone(t, c, "/ttl-0000000001")
		mustExist(t, c, "/parent", "TTL node with a child")
		mustExist(t, c, "/long", "TTL node within its TTL")
		for _, tc := range []struct {
			flags encoding.CreateMode
			ttl   int64
		}{
			{encoding.ModePersistentWithTTL, 0},
			{encoding.ModePersistentWithTTL, -1},
			{encoding.ModePersistentWithTTL, 1 << 40},
			{encoding.ModePersistent, 100},
			{encoding.ModeEphemeral, 100},
			{encoding.ModeContainer, 100},
			{9, 100},
		} {
			if _, code := createTTL("/bad", tc.flags, tc.ttl); code != encoding.ErrBadArguments {
				t.Errorf("createTTL flags %d ttl %d: %v, want BadArguments", tc.flags, tc.ttl, code)
			}
		}
		// TTL flags on the other create opcodes need a TTL they cannot carry.
		if code := raw.MustCall(encoding.OpCreate2, &encoding.CreateRequest{Path: "/bad", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL}, &encoding.Create2Response{}); code != encoding.ErrBadArguments {
			t.Errorf("create2 with TTL flags: %v, want BadArguments", code)
		}
	})
}

// directServers are zetcd and ZooKeeper, for what cross-checking cannot compare.
var directServers = []testenv.Server{{Name: "zetcd", Start: testenv.StartZetcd}, {Name: "zookeeper", Start: testenv.StartZooKeeper}}

// TestDeleteContainerFromClient: ZooKeeper 3.9 refuses deleteContainer from a client by closing
// the connection without a reply; the session and the node survive. (Not through xchk: a
// closed connection is no answer to compare.)
func TestDeleteContainerFromClient(t *testing.T) {
	forServers(t, directServers, func(t *testing.T, addr string) {
		c := connect(t, addr)
		if _, err := c.CreateContainer("/box", nil, zk.FlagContainer, openACL); err != nil {
			t.Fatal(err)
		}
		raw := itest.ConnectRaw(t, addr)
		raw.Send(encoding.OpDeleteContainer, &encoding.DeleteContainerRequest{Path: "/box"})
		raw.ExpectClosed(0)
		mustExist(t, c, "/box", "deleteContainer from a client")
	})
}

// TestGetEphemerals: the caller's own ephemeral nodes under a prefix, matched as a string.
func TestGetEphemerals(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		other := connect(t, addr)
		raw.MustCreate("/a", nil, 0)
		for _, p := range []string{"/a/e", "/ab", "/e2"} {
			raw.MustCreate(p, nil, encoding.ModeEphemeral)
		}
		raw.MustCreate("/p", nil, 0)
		if _, err := other.Create("/a/other", nil, zk.FlagEphemeral, openACL); err != nil {
			t.Fatal(err)
		}
		for prefix, want := range map[string][]string{
			"/":     {"/a/e", "/ab", "/e2"},
			"":      {"/a/e", "/ab", "/e2"},
			"/a":    {"/a/e", "/ab"},
			"/a/":   {"/a/e"},
			"/e":    {"/e2"},
			"/nope": {},
			"a":     {},
		} {
			var resp encoding.GetEphemeralsResponse
			if code := raw.MustCall(encoding.OpGetEphemerals, &encoding.GetEphemeralsRequest{PrefixPath: prefix}, &resp); code != 0 {
				t.Fatalf("getEphemerals %q: %v", prefix, code)
			}
			got := slices.Clone(resp.Ephemerals)
			slices.Sort(got)
			if resp.Ephemerals == nil || !slices.Equal(got, want) {
				t.Errorf("getEphemerals %q = %#v, want %q", prefix, resp.Ephemerals, want)
			}
		}
	})
}

// TestGetAllChildrenNumber counts all descendants.
func TestGetAllChildrenNumber(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		count := func(path string) (int32, encoding.ErrCode) {
			var resp encoding.GetAllChildrenNumberResponse
			code := raw.MustCall(encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: path}, &resp)
			return resp.TotalNumber, code
		}
		if n, code := count("/"); code != 0 || n != 3 {
			t.Errorf("fresh /: %d %v, want 3", n, code)
		}
		for _, p := range []string{"/a", "/a/b", "/a/b/c", "/a/d", "/ab", "/a/b/c/d"} {
			raw.MustCreate(p, nil, 0)
		}
		for path, want := range map[string]int32{"/": 9, "/a": 4, "/a/b": 2, "/a/b/c/d": 0, "/zookeeper": 2, "": 10} {
			if n, code := count(path); code != 0 || n != want {
				t.Errorf("getAllChildrenNumber %q: %d %v, want %d", path, n, code, want)
			}
		}
		if _, code := count("/nope"); code != encoding.ErrNoNode {
			t.Errorf("missing node: %v, want NoNode", code)
		}
	})
}

// TestWhoAmI: a connection without authentication is known by its address.
func TestWhoAmI(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		var resp encoding.WhoAmIResponse
		if code := raw.MustCall(encoding.OpWhoAmI, nil, &resp); code != 0 {
			t.Fatal(code)
		}
		want := []encoding.ClientInfo{{AuthScheme: "ip", User: "127.0.0.1"}}
		if !slices.Equal(resp.ClientInfo, want) {
			t.Errorf("whoAmI = %+v, want %+v", resp.ClientInfo, want)
		}
	})
}

// TestReconfigDisabled: reconfig is refused as by a ZooKeeper with reconfigEnabled=false, and
// the refusal consumes a zxid.
func TestReconfigDisabled(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		z := raw.MustCreate("/a", nil, 0)
		hdr, err := raw.Call(encoding.OpReconfig, &encoding.ReconfigRequest{JoiningServers: "server.2=127.0.0.1:2888:3888", CurConfigID: -1}, &encoding.GetDataResponse{})
		if err != nil || hdr.Err != encoding.ErrReconfigDisabled || !zxidAfter(z, hdr.Zxid, 1) {
			t.Errorf("reconfig: %v %v zxid %v, want ReconfigDisabled at the zxid after %v", err, hdr.Err, hdr.Zxid, z)
		}
	})
}

// TestSaslNotConfigured: without SASL configured, a SASL request is answered with err 0, zxid 0
// and a null token, and the connection carries on.
func TestSaslNotConfigured(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		raw := itest.ConnectRaw(t, addr)
		for _, tok := range [][]byte{{}, []byte("token")} {
			xid := raw.Send(encoding.OpSasl, &encoding.GetSASLRequest{Token: tok})
			hdr, body, err := raw.ReadReply()
			if err != nil || hdr.Xid != xid || hdr.Err != 0 || hdr.Zxid != 0 || !bytes.Equal(body, []byte{0xff, 0xff, 0xff, 0xff}) {
				t.Errorf("sasl %q: %+v body %x err %v; want err 0, zxid 0, null token", tok, hdr, body, err)
			}
		}
		if !raw.Exists("/zookeeper") {
			t.Error("connection unusable after sasl")
		}
	})
}

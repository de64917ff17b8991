package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// result is one zkctl invocation's output.
type result struct {
	out, err string
	code     int
}

// zkctl runs the command line against addr with stdin as its input.
func zkctlIn(t *testing.T, stdin string, addr string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb}
	code := e.run(append([]string{"--server", addr}, args...))
	return result{out.String(), errb.String(), code}
}

func zkctl(t *testing.T, addr string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"--server", addr}, args...), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// ok runs the command line and fails the test unless it succeeds; it returns stdout.
func ok(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := zkctl(t, addr, args...)
	if r.code != 0 {
		t.Fatalf("zkctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.err)
	}
	return r.out
}

// skipIfPending skips a zetcd subtest whose feature has not landed yet.
func skipIfPending(t *testing.T, server string, methods ...string) {
	t.Helper()
	if server == "zetcd" && testenv.Pending(t, methods...) {
		t.Skipf("zetcd does not implement %v yet (listed in zetcd/etcd_pending.go); runs once it does", methods)
	}
}

// servers are zetcd and real ZooKeeper.
var servers = []testenv.Server{{Name: "zetcd", Start: testenv.StartZetcd}, {Name: "zookeeper", Start: testenv.StartZooKeeper}}

// forEachServer runs f against a fresh zetcd and a fresh real ZooKeeper.
func forEachServer(t *testing.T, f func(t *testing.T, s testenv.Server, addr string)) {
	for _, s := range servers {
		t.Run(s.Name, func(t *testing.T) { f(t, s, s.Start(t)) })
	}
}

func TestCommands(t *testing.T) {
	forEachServer(t, func(t *testing.T, s testenv.Server, addr string) {
		if got := ok(t, addr, "create", "/app", "hello"); got != "/app\n" {
			t.Errorf("create: %q", got)
		}
		if got := ok(t, addr, "get", "/app"); got != "hello\n" {
			t.Errorf("get: %q", got)
		}
		ok(t, addr, "set", "-v", "0", "/app", "world")
		if got := ok(t, addr, "get", "/app"); got != "world\n" {
			t.Errorf("get after set: %q", got)
		}
		ok(t, addr, "create", "/app/b")
		ok(t, addr, "create", "/app/a", "")
		ok(t, addr, "create", "/app/a/x", "1")
		seq := ok(t, addr, "create", "-s", "/app/job-", "j")
		if !regexp.MustCompile(`^/app/job-\d{10}\n$`).MatchString(seq) {
			t.Errorf("create -s: %q", seq)
		}
		if got := ok(t, addr, "ls", "/app"); got != "a\nb\n"+strings.TrimPrefix(seq, "/app/") {
			t.Errorf("ls: %q", got)
		}
		if got := ok(t, addr, "ls", "-R", "/app"); got != "/app\n/app/a\n/app/a/x\n/app/b\n"+seq {
			t.Errorf("ls -R: %q", got)
		}
		st := ok(t, addr, "stat", "/app")
		for _, want := range []string{"dataVersion = 1\n", "numChildren = 3\n", "cversion = 3\n", "ephemeralOwner = 0x0\n"} {
			if !strings.Contains(st, want) {
				t.Errorf("stat lacks %q:\n%s", want, st)
			}
		}
		if got := ok(t, addr, "get", "-s", "/app"); !strings.HasPrefix(got, "world\ncZxid = 0x") {
			t.Errorf("get -s: %q", got)
		}
		wantTree := "/app\n├── a\n│   └── x\n├── b\n└── " + strings.TrimPrefix(seq, "/app/")
		if got := ok(t, addr, "tree", "/app"); got != wantTree {
			t.Errorf("tree:\n%s\nwant:\n%s", got, wantTree)
		}

		// JSON output.
		var ls struct {
			Path     string
			Children []string
			Stat     struct{ NumChildren int }
		}
		if err := json.Unmarshal([]byte(ok(t, addr, "--json", "ls", "-s", "/app")), &ls); err != nil {
			t.Fatal(err)
		}
		if ls.Path != "/app" || len(ls.Children) != 3 || ls.Stat.NumChildren != 3 {
			t.Errorf("ls --json: %+v", ls)
		}
		var get map[string]any
		if err := json.Unmarshal([]byte(ok(t, addr, "--json", "get", "/app/b")), &get); err != nil {
			t.Fatal(err)
		}
		if d, present := get["data"]; !present || d != nil {
			t.Errorf("get --json of null data: %v", get)
		}

		// ACLs.
		ok(t, addr, "setacl", "/app/b", "world:anyone:dra,digest:bob:+1wIWjgWiHdr6m0S+0B2W1l29Uo=:cdrwa")
		if got := ok(t, addr, "getacl", "/app/b"); got != "world:anyone:dra\ndigest:bob:+1wIWjgWiHdr6m0S+0B2W1l29Uo=:cdrwa\n" {
			t.Errorf("getacl: %q", got)
		}
		ok(t, addr, "sync", "/app")

		// Chroot: paths relative to /app, created paths printed relative too.
		if got := ok(t, addr+"/app", "get", "/a/x"); got != "1\n" {
			t.Errorf("chroot get: %q", got)
		}
		if got := ok(t, addr+"/app", "create", "-s", "/a/s-"); !strings.HasPrefix(got, "/a/s-") {
			t.Errorf("chroot create -s: %q", got)
		}
		if got := ok(t, addr+"/app", "ls", "/"); got != "a\nb\n"+strings.TrimPrefix(seq, "/app/") {
			t.Errorf("chroot ls /: %q", got)
		}

		ok(t, addr, "delete", "/app/b")
		ok(t, addr, "deleteall", "/app")
		if r := zkctl(t, addr, "stat", "/app"); r.code != 1 {
			t.Errorf("stat after deleteall: %+v", r)
		}
	})
}

func TestErrors(t *testing.T) {
	forEachServer(t, func(t *testing.T, s testenv.Server, addr string) {
		ok(t, addr, "create", "/p", "x")
		ok(t, addr, "create", "/p/c")
		for _, tc := range []struct {
			args []string
			code int
			err  string
		}{
			{[]string{"get", "/missing"}, 1, "zkctl: get /missing: NoNode: node does not exist\n"},
			{[]string{"ls", "/missing"}, 1, "zkctl: getChildren /missing: NoNode: node does not exist\n"},
			{[]string{"set", "-v", "7", "/p", "y"}, 1, "zkctl: set /p: BadVersion: version does not match\n"},
			{[]string{"create", "/p"}, 1, "zkctl: create /p: NodeExists: node already exists\n"},
			{[]string{"create", "/none/c"}, 1, "zkctl: create /none/c: NoNode: node does not exist\n"},
			{[]string{"delete", "/p"}, 1, "zkctl: delete /p: NotEmpty: node has children\n"},
			{[]string{"get"}, 2, "zkctl: want 1 argument, got 0 (usage: zkctl get [-s] [-w] PATH)\n"},
			{[]string{"frob", "/p"}, 2, "zkctl: unknown command \"frob\" (zkctl help lists them)\n"},
			{[]string{"get", "p"}, 1, "zkctl: path \"p\" must start with '/'\n"},
			{[]string{"setacl", "/p", "world:anyone"}, 2, "zkctl: ACL entry \"world:anyone\": want scheme:id:perms (usage: zkctl setacl [-v ACLVERSION] PATH ACL)\n"},
		} {
			r := zkctl(t, addr, tc.args...)
			if r.code != tc.code || r.err != tc.err || r.out != "" {
				t.Errorf("zkctl %v: exit %d, stderr %q, stdout %q; want exit %d, stderr %q", tc.args, r.code, r.err, r.out, tc.code, tc.err)
			}
		}
		// --json errors are one JSON object with the ZooKeeper code.
		r := zkctl(t, addr, "--json", "get", "/missing")
		var obj map[string]string
		if err := json.Unmarshal([]byte(r.err), &obj); err != nil || r.code != 1 || obj["code"] != "NoNode" || obj["path"] != "/missing" {
			t.Errorf("--json error: exit %d, %q (%v)", r.code, r.err, err)
		}
	})
	// No server at all: a readable connect error, exit 1.
	r := zkctl(t, "127.0.0.1:1", "--timeout", "500ms", "get", "/")
	if r.code != 1 || !strings.HasPrefix(r.err, "zkctl: connect 127.0.0.1:1: no session after 500ms") {
		t.Errorf("no server: %+v", r)
	}
}

// digest is bob:secret's digest ACL id hash.
var digest = zk.DigestACL(zk.PermAll, "bob", "secret")[0].ID[len("bob:"):]

// authArgs is --auth bob:secret where the server has digest auth.
func authArgs(t *testing.T, server string) []string {
	if server == "zetcd" && testenv.Pending(t, "Auth") {
		t.Log("zetcd does not implement auth yet (zetcd/etcd_pending.go): running without --auth")
		return nil
	}
	return []string{"--auth", "bob:secret"}
}

func TestAuth(t *testing.T) {
	forEachServer(t, func(t *testing.T, s testenv.Server, addr string) {
		skipIfPending(t, s.Name, "Auth")
		ok(t, addr, "--auth", "bob:secret", "create", "/private", "s3cret", "auth::cdrwa")
		if r := zkctl(t, addr, "get", "/private"); r.code != 1 || r.err != "zkctl: get /private: NoAuth: not authorized\n" {
			t.Errorf("get without auth: %+v", r)
		}
		if got := ok(t, addr, "--auth", "bob:secret", "get", "/private"); got != "s3cret\n" {
			t.Errorf("get with auth: %q", got)
		}
		if got := ok(t, addr, "--auth", "bob:secret", "getacl", "/private"); got != "digest:bob:"+digest+":cdrwa\n" {
			t.Errorf("getacl: %q", got)
		}
		// Without ADMIN, ZooKeeper hides digests; dump refuses to copy such an ACL.
		ok(t, addr, "--auth", "bob:secret", "setacl", "/private", "world:anyone:r,auth::cdrwa")
		if got := ok(t, addr, "getacl", "/private"); got != "world:anyone:r\ndigest:bob:x:cdrwa\n" {
			t.Errorf("getacl without ADMIN: %q", got)
		}
		if r := zkctl(t, addr, "dump", "/private"); r.code != 1 || !strings.Contains(r.err, "hid the password hash of digest:bob:x") {
			t.Errorf("dump without ADMIN: %+v", r)
		}
	})
}

// fastReaperServers are zetcd and a ZooKeeper that reaps containers and TTL nodes quickly.
var fastReaperServers = []testenv.Server{{Name: "zetcd", Start: zetcdFastReaper}, {Name: "zookeeper", Start: func(t testing.TB) string { return zooKeeperFastReaper(t.(*testing.T)) }}}

// zetcdFastReaper starts a zetcd whose reaper runs every 100ms.
func zetcdFastReaper(t testing.TB) string {
	return testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{ReapInterval: 100 * time.Millisecond}).Addr
}

// zooKeeperFastReaper starts a real ZooKeeper that reaps containers and TTL nodes every 100ms.
func zooKeeperFastReaper(t *testing.T) string {
	return zkserver.Start(t, zkserver.Options{SystemProps: map[string]string{"znode.container.checkIntervalMs": "100"}}).Addr
}

// gone is the condition, for testenv.Eventually, that p no longer exists on addr: zkctl stat
// exits 1.
func gone(t *testing.T, addr, p string) func() error {
	return func() error {
		if r := zkctl(t, addr, "stat", p); r.code != 1 {
			return fmt.Errorf("zkctl stat %s exits %d", p, r.code)
		}
		return nil
	}
}

func TestContainerAndTTL(t *testing.T) {
	for _, s := range fastReaperServers {
		t.Run(s.Name, func(t *testing.T) {
			skipIfPending(t, s.Name, "CreateContainer", "CreateTTL")
			addr := s.Start(t)
			ok(t, addr, "create", "-c", "/box")
			ok(t, addr, "create", "/box/item")
			ok(t, addr, "create", "-t", "200", "/short", "x")
			ok(t, addr, "create", "-t", "1h", "/long")
			if got := ok(t, addr, "create", "-s", "-t", "1h", "/tseq-"); !strings.HasPrefix(got, "/tseq-") {
				t.Errorf("create -s -t: %q", got)
			}
			ok(t, addr, "delete", "/box/item")
			// The reapers run every 100ms here.
			testenv.Eventually(t, 20*time.Second, "container /box reaped after its last child was deleted", gone(t, addr, "/box"))
			testenv.Eventually(t, 20*time.Second, "TTL node /short reaped", gone(t, addr, "/short"))
			if gone(t, addr, "/long")() == nil {
				t.Errorf("TTL node /long (1h) was deleted")
			}
			for _, args := range [][]string{{"create", "-c", "-e", "/x"}, {"create", "-e", "-t", "5", "/x"}, {"create", "-t", "soon", "/x"}} {
				if r := zkctl(t, addr, args...); r.code != 2 {
					t.Errorf("zkctl %v: %+v, want usage error", args, r)
				}
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background runs a zkctl command line that blocks (watch, get -w) and returns its outputs and
// a channel with its exit status.
// watchStarted is the condition, for testenv.Eventually, that a background zkctl watch has
// said on stderr that it is watching.
func watchStarted(errb *syncBuffer, line string) func() error {
	return func() error {
		if !strings.Contains(errb.String(), line) {
			return fmt.Errorf("stderr %q", errb.String())
		}
		return nil
	}
}

func background(ctx context.Context, addr string, args ...string) (out, errb *syncBuffer, done chan int) {
	out, errb, done = &syncBuffer{}, &syncBuffer{}, make(chan int, 1)
	e := &env{ctx: ctx, stdin: strings.NewReader(""), stdout: out, stderr: errb}
	go func() { done <- e.run(append([]string{"--server", addr}, args...)) }()
	return out, errb, done
}

func TestGetWatch(t *testing.T) {
	forEachServer(t, func(t *testing.T, s testenv.Server, addr string) {
		skipIfPending(t, s.Name, "SetWatches")
		ok(t, addr, "create", "/w", "1")
		out, errb, done := background(context.Background(), addr, "get", "-w", "/w")
		testenv.Eventually(t, 10*time.Second, "get -w printing 1", func() error {
			if out.String() != "1\n" {
				return fmt.Errorf("printed %q, stderr %q", out.String(), errb.String())
			}
			return nil
		})
		ok(t, addr, "set", "/w", "2")
		select {
		case code := <-done:
			if code != 0 || out.String() != "1\nNodeDataChanged /w\n" {
				t.Errorf("get -w: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("get -w: no event 10s after the set; stdout %q", out.String())
		}
	})
}

func TestWatch(t *testing.T) {
	forEachServer(t, func(t *testing.T, s testenv.Server, addr string) {
		skipIfPending(t, s.Name, "AddWatch")
		ok(t, addr, "create", "/app")
		ok(t, addr, "create", "/app/a")

		// Recursive, through a chroot, until interrupted.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out, errb, done := background(ctx, addr+"/app", "watch", "-R", "/")
		testenv.Eventually(t, 10*time.Second, "watch starting", watchStarted(errb, "watching /"))
		ok(t, addr, "set", "/app/a", "x")
		ok(t, addr, "create", "/app/a/b")
		ok(t, addr, "delete", "/app/a/b")
		want := "NodeDataChanged /a\nNodeCreated /a/b\nNodeDeleted /a/b\n"
		testenv.Eventually(t, 10*time.Second, "watch -R printing every event", func() error {
			if out.String() != want {
				return fmt.Errorf("printed %q, want %q", out.String(), want)
			}
			return nil
		})
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("watch exit %d after interrupt: %q", code, errb.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("watch did not stop on interrupt")
		}

		// Non-recursive, JSON, -n.
		out, errb, done = background(context.Background(), addr, "--json", "watch", "-n", "2", "/app")
		testenv.Eventually(t, 10*time.Second, "watch starting", watchStarted(errb, "watching"))
		ok(t, addr, "set", "/app/a", "y") // not a change of /app itself
		ok(t, addr, "create", "/app/c")
		ok(t, addr, "set", "/app", "z")
		select {
		case code := <-done:
			want := `{"event":"NodeChildrenChanged","path":"/app"}` + "\n" + `{"event":"NodeDataChanged","path":"/app"}` + "\n"
			if code != 0 || out.String() != want {
				t.Errorf("watch -n 2: exit %d, stdout %q, want %q", code, out.String(), want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch -n 2 did not end; stdout %q", out.String())
		}
	})
}

// nodeInfo is what a copy must preserve of one node.
type nodeInfo struct {
	Data    []byte
	ACL     []zk.ACL
	Counter int32 // the sequential counter: (cversion+numChildren)/2
}

// snapshot reads every node under root (paths relative to root), leaving out ephemerals and
// /zookeeper; with auth as bob, who can see the digests in ACLs.
func snapshot(t *testing.T, addr, root string, auth bool) map[string]nodeInfo {
	t.Helper()
	c := testenv.Connect(t, addr)
	if auth {
		if err := c.AddAuth("digest", []byte("bob:secret")); err != nil {
			t.Fatal(err)
		}
	}
	nodes := map[string]nodeInfo{}
	var visit func(p string)
	visit = func(p string) {
		data, st, err := c.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		if st.EphemeralOwner != 0 {
			return
		}
		acl, _, err := c.GetACL(p)
		if err != nil {
			t.Fatalf("getacl %s: %v", p, err)
		}
		children, st, err := c.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		nodes[relPath(root, p)] = nodeInfo{data, acl, (st.Cversion + st.NumChildren) / 2}
		for _, ch := range children {
			if cp := joinPath(p, "/"+ch); !isSystem(cp) {
				visit(cp)
			}
		}
	}
	visit(root)
	return nodes
}

func compareTrees(t *testing.T, src, dst map[string]nodeInfo) {
	t.Helper()
	var paths []string
	for p := range src {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		s, d := src[p], dst[p]
		if _, ok := dst[p]; !ok {
			t.Errorf("%s: missing in the copy", p)
			continue
		}
		if !bytes.Equal(s.Data, d.Data) || (s.Data == nil) != (d.Data == nil) {
			t.Errorf("%s: data %q (nil %v), copy %q (nil %v)", p, s.Data, s.Data == nil, d.Data, d.Data == nil)
		}
		if fmt.Sprint(s.ACL) != fmt.Sprint(d.ACL) {
			t.Errorf("%s: ACL %v, copy %v", p, s.ACL, d.ACL)
		}
		if s.Counter != d.Counter {
			t.Errorf("%s: sequential counter %d, copy %d", p, s.Counter, d.Counter)
		}
	}
	for p := range dst {
		if _, ok := src[p]; !ok {
			t.Errorf("%s: in the copy only", p)
		}
	}
}

// buildTree makes a tree with what a copy must preserve: null, empty, text and binary data,
// several ACLs (one that locks everyone but bob out of creating children), sequential children
// with gaps, and an ephemeral node that must be left out.
func buildTree(t *testing.T, addr string) (ephemeralOwner *zk.Conn) {
	t.Helper()
	c := testenv.Connect(t, addr)
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	open := zk.WorldACL(zk.PermAll)
	must(c.Create("/src", []byte("root"), 0, open))
	must(c.Create("/src/null", nil, 0, open))
	must(c.Create("/src/empty", []byte{}, 0, open))
	must(c.Create("/src/bin", []byte{0xff, 0x00, 0xfe}, 0, open))
	must(c.Create("/src/ro", []byte("read only"), 0, zk.WorldACL(zk.PermRead)))
	bob := zk.DigestACL(zk.PermAll, "bob", "secret")
	must(c.Create("/src/locked", []byte("l"), 0, open))
	must(c.Create("/src/locked/inner", []byte("i"), 0, open))
	if _, err := c.SetACL("/src/locked", append(bob, zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}), -1); err != nil {
		t.Fatal(err)
	}
	must(c.Create("/src/jobs", nil, 0, open))
	for i := range 5 {
		p, err := c.Create("/src/jobs/job-", []byte(fmt.Sprint(i)), zk.FlagSequence, open)
		must(p, err)
		if i%2 == 1 {
			if err := c.Delete(p, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	must(c.Create("/src/jobs/job-", nil, zk.FlagEphemeral|zk.FlagSequence, open))
	must(c.Create("/src/jobs/deep", nil, 0, open))
	must(c.Create("/src/jobs/deep/er", []byte("x"), 0, open))
	return c
}

func TestDumpLoad(t *testing.T) {
	forEachServer(t, func(t *testing.T, s testenv.Server, addr string) {
		buildTree(t, addr)
		auth := authArgs(t, s.Name)
		dump := ok(t, addr, append(auth, "dump", "/src")...)
		var f dumpFile
		if err := json.Unmarshal([]byte(dump), &f); err != nil {
			t.Fatalf("dump is not JSON: %v\n%s", err, dump)
		}
		if len(f.SkippedEphemerals) != 1 || !strings.HasPrefix(f.SkippedEphemerals[0], "/src/jobs/job-") {
			t.Errorf("skipped ephemerals: %v", f.SkippedEphemerals)
		}
		// Into a fresh server of the same kind, under another path; --auth lets it set ACLs
		// that lock others out.
		addr2 := s.Start(t)
		r := zkctlIn(t, dump, addr2, append(auth, "load", "/dst/here")...)
		if r.code != 0 {
			t.Fatalf("load: %+v", r)
		}
		compareTrees(t, snapshot(t, addr, "/src", auth != nil), snapshot(t, addr2, "/dst/here", auth != nil))
		// The next sequential child gets the same number on both.
		a := ok(t, addr, "create", "-s", "/src/jobs/job-")
		b := ok(t, addr2, "create", "-s", "/dst/here/jobs/job-")
		if strings.TrimPrefix(a, "/src") != strings.TrimPrefix(b, "/dst/here") {
			t.Errorf("next sequential child: source %q, loaded copy %q", a, b)
		}
		// Loading again over the existing tree updates data and ACLs.
		ok(t, addr2, append(auth, "set", "/dst/here/locked", "changed")...)
		if r := zkctlIn(t, dump, addr2, append(auth, "load", "/dst/here")...); r.code != 0 || !strings.Contains(r.err, "0 created") {
			t.Fatalf("second load: %+v", r)
		}
		if got := ok(t, addr2, "get", "/dst/here/locked"); got != "l\n" {
			t.Errorf("data after second load: %q", got)
		}
	})
}

// TestDumpLoadModes: container and TTL modes survive a dump and load; a client cannot see them,
// so dump is told which nodes have them, and the reaper proves the loaded nodes have them.
func TestDumpLoadModes(t *testing.T) {
	for _, s := range fastReaperServers {
		t.Run(s.Name, func(t *testing.T) {
			skipIfPending(t, s.Name, "CreateContainer", "CreateTTL")
			addr := s.Start(t)
			ok(t, addr, "create", "-c", "/m")
			ok(t, addr, "create", "-c", "/m/box")
			ok(t, addr, "create", "/m/box/item")
			ok(t, addr, "create", "-t", "1h", "/m/t", "data")
			dump := ok(t, addr, "dump", "--container", "/m", "--container", "/m/b*", "--ttl", "/m/t=300ms", "/m")
			var f dumpFile
			if err := json.Unmarshal([]byte(dump), &f); err != nil {
				t.Fatal(err)
			}
			modes := map[string]string{}
			for _, n := range f.Nodes {
				modes[n.Path] = fmt.Sprint(n.Mode, n.TTLMs)
			}
			if want := map[string]string{"/": "container0", "/box": "container0", "/box/item": "persistent0", "/t": "ttl300"}; fmt.Sprint(modes) != fmt.Sprint(want) {
				t.Errorf("modes in the dump: %v, want %v", modes, want)
			}
			addr2 := s.Start(t)
			if r := zkctlIn(t, dump, addr2, "load", "/m"); r.code != 0 {
				t.Fatalf("load: %+v", r)
			}
			testenv.Eventually(t, 20*time.Second, "loaded TTL node /m/t (300ms) reaped", gone(t, addr2, "/m/t"))
			ok(t, addr2, "delete", "/m/box/item")
			testenv.Eventually(t, 20*time.Second, "loaded container /m/box reaped after its last child was deleted", gone(t, addr2, "/m/box"))
			testenv.Eventually(t, 20*time.Second, "loaded container /m reaped after its children went", gone(t, addr2, "/m"))
		})
	}
}

// TestCopy migrates a live tree from a real ZooKeeper into zetcd and compares both trees.
func TestCopy(t *testing.T) {
	zkAddr := testenv.StartZooKeeper(t)
	zetcdAddr := testenv.StartZetcd(t)
	buildTree(t, zkAddr)
	// bob has ADMIN on /src/locked: without his credentials ZooKeeper would hide its digest.
	r := zkctl(t, zkAddr, "copy", "--from-auth", "bob:secret", "--to", zetcdAddr, "/src")
	if r.code != 0 {
		t.Fatalf("copy: %+v", r)
	}
	if !strings.Contains(r.err, "left out 1 ephemeral nodes") {
		t.Errorf("copy summary: %q", r.err)
	}
	zetcdAuth := !testenv.Pending(t, "Auth")
	compareTrees(t, snapshot(t, zkAddr, "/src", true), snapshot(t, zetcdAddr, "/src", zetcdAuth))
	a := ok(t, zkAddr, "create", "-s", "/src/jobs/job-")
	b := ok(t, zetcdAddr, "create", "-s", "/src/jobs/job-")
	if a != b {
		t.Errorf("next sequential child: ZooKeeper %q, zetcd %q", a, b)
	}

	// The whole tree from "/" (its /zookeeper left alone), through a chroot on the target.
	r = zkctl(t, zkAddr, "--json", "copy", "--from-auth", "bob:secret", "--to", zetcdAddr+"/mirror", "/")
	if r.code != 0 {
		t.Fatalf("copy /: %+v", r)
	}
	var stats loadStats
	if err := json.Unmarshal([]byte(r.out), &stats); err != nil || stats.Created == 0 {
		t.Errorf("copy --json: %q (%v)", r.out, err)
	}
	compareTrees(t, snapshot(t, zkAddr, "/src", true), snapshot(t, zetcdAddr, "/mirror/src", zetcdAuth))
}

func TestCopyModes(t *testing.T) {
	if testenv.Pending(t, "CreateContainer", "CreateTTL") {
		t.Skip("zetcd does not implement CreateContainer/CreateTTL yet (listed in zetcd/etcd_pending.go); runs once it does")
	}
	zkAddr := testenv.StartZooKeeper(t)
	zetcdAddr := zetcdFastReaper(t)
	ok(t, zkAddr, "create", "-c", "/locks")
	ok(t, zkAddr, "create", "-c", "/locks/l1")
	ok(t, zkAddr, "create", "/locks/l1/held")
	ok(t, zkAddr, "create", "-t", "300", "/locks/t")
	if r := zkctl(t, zkAddr, "copy", "--to", zetcdAddr, "--container", "/locks", "--container", "/locks/l*", "--ttl", "/locks/t=300ms", "/locks"); r.code != 0 {
		t.Fatalf("copy: %+v", r)
	}
	testenv.Eventually(t, 20*time.Second, "copied TTL node reaped", gone(t, zetcdAddr, "/locks/t"))
	ok(t, zetcdAddr, "delete", "/locks/l1/held")
	testenv.Eventually(t, 20*time.Second, "copied container reaped after its last child was deleted", gone(t, zetcdAddr, "/locks/l1"))
}

func TestParseConnectString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		servers []string
		chroot  string
		err     bool
	}{
		{"a:1", []string{"a:1"}, "", false},
		{"a:1,b:2/app/x", []string{"a:1", "b:2"}, "/app/x", false},
		{"a:1/", []string{"a:1"}, "", false},
		{"a:1/app/", nil, "", true},
		{"/app", nil, "", true},
	} {
		cs, err := parseConnectString(tc.in)
		if (err != nil) != tc.err || (!tc.err && (fmt.Sprint(cs.servers) != fmt.Sprint(tc.servers) || cs.chroot != tc.chroot)) {
			t.Errorf("%q: %+v, %v", tc.in, cs, err)
		}
	}
}

func TestParseACL(t *testing.T) {
	acl, err := parseACL("world:anyone:cdrwa,digest:u:h:a=:r,ip:::1:rw,auth::c")
	if err != nil {
		t.Fatal(err)
	}
	want := []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "anyone"}, {Perms: zk.PermRead, Scheme: "digest", ID: "u:h:a="},
		{Perms: zk.PermRead | zk.PermWrite, Scheme: "ip", ID: "::1"}, {Perms: zk.PermCreate, Scheme: "auth", ID: ""}}
	if fmt.Sprint(acl) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", acl, want)
	}
	for _, bad := range []string{"world:anyone", "world:anyone:x", "nocolon"} {
		if _, err := parseACL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

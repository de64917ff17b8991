package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

var openACL = zk.WorldACL(zk.PermAll)

// importHistory makes itest.History's history on the ZooKeeper at addr.
func importHistory(t testing.TB, addr string) { itest.History(t, addr, 40, nil) }

// freePort returns a port free at the time of the call.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Must(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startZooKeeperOn starts ZooKeeper on dataDir as the one member of an ensemble
// (standaloneEnabled=false), whose zxids start in epoch 1 as a real ensemble's do; a standalone
// server's epoch 0 zxids lie below etcd's first revisions. It returns the client address and a
// function that kills the server, also called when the test ends.
// zkRun is how the tests run ZooKeeper: its heap and snapCount.
type zkRun struct {
	heap      string
	snapCount int
}

// smallZK is a ZooKeeper for trees of hundreds of nodes, snapshotting often so that snapshots
// are fuzzy and logs follow them; bigZK holds a million nodes.
var (
	smallZK = zkRun{heap: "-Xmx256m", snapCount: 50}
	bigZK   = zkRun{heap: "-Xmx3g", snapCount: 100000}
)

func startZooKeeperOn(t testing.TB, dataDir string, run zkRun) (addr string, kill func()) {
	t.Helper()
	lib := zkserver.LibDir()
	java, err := exec.LookPath("java")
	if err != nil || lib == "" {
		if zkserver.Required() {
			t.Fatalf("no java or ZooKeeper jars (%s is set): %v", zkserver.EnvRequire, err)
		}
		t.Skipf("no java or ZooKeeper jars: %v", err)
	}
	dir := t.TempDir()
	testenv.Must(t, os.WriteFile(filepath.Join(dataDir, "myid"), []byte("1\n"), 0o644))
	port := freePort(t)
	cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nstandaloneEnabled=false\n"+
		"server.1=127.0.0.1:%d:%d:participant;127.0.0.1:%d\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\nsnapCount=%d\n",
		dataDir, freePort(t), freePort(t), port, run.snapCount)
	testenv.Must(t, os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644))
	testenv.Must(t, os.WriteFile(filepath.Join(dir, "logback.xml"), []byte(zkserver.LogbackXML), 0o644))
	logf, err := os.Create(filepath.Join(dir, "zk.log"))
	testenv.Must(t, err)
	defer logf.Close()
	cmd := exec.Command(java, "-Dzookeeper.extendedTypesEnabled=true", run.heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(lib, "*")+string(filepath.ListSeparator)+dir,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = logf, logf
	testenv.Must(t, cmd.Start())
	kill = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	t.Cleanup(kill)
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := zkserver.FourLetterWord(addr, "srvr", time.Second)
		if err == nil && strings.Contains(out, "Mode: ") {
			return addr, kill
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "zk.log"))
			t.Fatalf("ZooKeeper on %s did not start:\n%s", dataDir, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zooKeeperHistory makes importHistory on a new one-member ensemble, kills it, and returns its
// data directory and a function that starts ZooKeeper on a copy of it and returns its address.
// The copy is started when the test compares it with zetcd: ZooKeeper gives the sessions it
// loads their whole timeout from then on.
func zooKeeperHistory(t testing.TB, run zkRun, more func(addr string)) (dir string, restart func() string) {
	t.Helper()
	dir = t.TempDir()
	first, kill := startZooKeeperOn(t, dir, run)
	importHistory(t, first)
	if more != nil {
		more(first)
	}
	kill()
	cp := t.TempDir()
	testenv.Must(t, os.CopyFS(cp, os.DirFS(dir)))
	return dir, func() string {
		t.Helper()
		addr, _ := startZooKeeperOn(t, cp, run)
		return addr
	}
}

// importInto runs `zetcd import` of zkDir into a new embedded etcd directory, which it returns.
func importInto(t testing.TB, zkDir string, extra ...string) (string, etcdstore.ImportResult) {
	t.Helper()
	etcdDir := t.TempDir()
	o, err := parseImportFlags(append([]string{"--zk-data-dir", zkDir, "--data-dir", etcdDir}, extra...), io.Discard)
	testenv.Must(t, err)
	res, err := runImport(o, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	testenv.Must(t, err)
	return etcdDir, res
}

// sameStats compares every node's Stat on both servers exactly, zxids by value.
func sameStats(t testing.TB, a, b *zk.Conn) int {
	t.Helper()
	return walkStats(t, a, b, func(p string, sa, sb *zk.Stat) {
		if *sa != *sb {
			t.Errorf("%s: ZooKeeper's Stat %+v, zetcd's %+v", p, *sa, *sb)
		}
	})
}

// walkStats calls check with each node's Stat on a and on b, walking a's tree, and returns how
// many nodes it compared.
func walkStats(t testing.TB, a, b *zk.Conn, check func(p string, sa, sb *zk.Stat)) int {
	t.Helper()
	n := 0
	var walk func(p string)
	walk = func(p string) {
		_, sa, err := a.Get(p)
		testenv.Must(t, err)
		_, sb, err := b.Get(p)
		testenv.Must(t, err)
		check(p, sa, sb)
		n++
		kids, _, err := a.Children(p)
		testenv.Must(t, err)
		for _, k := range kids {
			walk(path.Join(p, k))
		}
	}
	walk("/")
	return n
}

// TestImportMatchesZooKeeper imports a real ZooKeeper's directory and checks with zkctl diff
// and Stat by Stat that zetcd serves what ZooKeeper, restarted on a copy of it, serves, then
// that both go on alike.
func TestImportMatchesZooKeeper(t *testing.T) {
	zkDir, restartZK := zooKeeperHistory(t, smallZK, nil)
	zkAddr := restartZK()

	for _, mode := range []string{"exact", "renumber"} {
		t.Run(mode, func(t *testing.T) {
			etcdDir, res := importInto(t, zkDir, "--zxids", mode)
			if string(res.Zxids) != mode || res.Nodes == 0 || res.Ephemerals != 0 {
				t.Fatalf("import result %+v", res)
			}
			t.Logf("import: %+v", res)
			e := testenv.StartEtcdWith(t, embedetcd.Config{Dir: etcdDir})
			z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
			itest.DiffTrees(t, zkAddr, z.Addr)
			itest.DiffTrees(t, zkAddr, z.Addr, "--system")
			// Renumbered, the clients that saw ZooKeeper's zxids are refused unless padded past
			// them, and the Stats show ZooKeeper's zxids through the table of zxids.
			if mode == "renumber" && (!res.ResumeOK || !res.ZxidTable) {
				t.Errorf("renumbered import not padded past ZooKeeper's last zxid, or without its table: %+v", res)
			}
			zc, ec := testenv.Connect(t, zkAddr), testenv.Connect(t, z.Addr)
			t.Logf("%d Stats equal", sameStats(t, zc, ec))
		})
	}
}

// TestImportContinues: after an exact import, a write conditional on the version read from
// ZooKeeper succeeds on zetcd, and a sequential create gets ZooKeeper's next number; both
// servers then agree, exact zxids and the times of the new writes aside.
func TestImportContinues(t *testing.T) {
	var before *zk.Stat
	zkDir, restartZK := zooKeeperHistory(t, smallZK, func(addr string) {
		c := testenv.Connect(t, addr)
		var err error
		_, before, err = c.Get("/app/cfg")
		testenv.Must(t, err)
		c.Close()
	})
	etcdDir, _ := importInto(t, zkDir, "--zxids", "exact")
	e := testenv.StartEtcdWith(t, embedetcd.Config{Dir: etcdDir})
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
	zkAddr := restartZK()
	for _, addr := range []string{zkAddr, z.Addr} {
		cl := testenv.Connect(t, addr)
		st, err := cl.Set("/app/cfg", []byte("after"), before.Version)
		testenv.Must(t, err)
		if st.Version != before.Version+1 || st.Mzxid <= before.Mzxid {
			t.Errorf("%s: setData gave %+v after %+v", addr, st, before)
		}
		name, err := cl.Create("/app/seq/n-", nil, zk.FlagSequence, openACL)
		testenv.Must(t, err)
		if name != "/app/seq/n-0000000040" {
			t.Errorf("%s: sequential create named %s, want /app/seq/n-0000000040", addr, name)
		}
		testenv.Must(t, cl.Delete("/app/re", -1))
		cl.Close()
	}
	itest.DiffTrees(t, zkAddr, z.Addr, "--skip-times")
}

// TestImportStandalone: a standalone ZooKeeper's zxids (epoch 0) lie below etcd's first
// revisions, so --zxids auto renumbers them, and says why; zetcd serves the tree.
func TestImportStandalone(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	importHistory(t, srv.Addr)
	c := testenv.Connect(t, srv.Addr)
	want, wantStat, err := c.Get("/app/cfg")
	testenv.Must(t, err)
	c.Close()
	srv.Stop()
	etcdDir, res := importInto(t, filepath.Join(srv.Dir, "data"))
	if res.Zxids != etcdstore.ImportRenumber || !strings.Contains(res.Why, "already passed") || !res.ResumeOK {
		t.Fatalf("import result %+v", res)
	}
	e := testenv.StartEtcdWith(t, embedetcd.Config{Dir: etcdDir})
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
	got, st, err := testenv.Connect(t, z.Addr).Get("/app/cfg")
	testenv.Must(t, err)
	if string(got) != string(want) || st.Version != wantStat.Version || st.Mtime != wantStat.Mtime {
		t.Errorf("/app/cfg: %q %+v, ZooKeeper had %q %+v", got, st, want, wantStat)
	}
}

// TestImportFlags: the import command's own errors.
func TestImportFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--zk-data-dir is required"},
		{[]string{"--zk-data-dir", "x", "--zxids", "some"}, `--zxids "some"`},
		{[]string{"--zk-data-dir", "x", "--prefix", "/zk"}, "must end with '/'"},
	} {
		_, err := parseImportFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if code := importMain([]string{"--zk-data-dir", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error"}, io.Discard); code != 1 {
		t.Errorf("import of an empty directory: exit %d, want 1", code)
	}
}

// TestImportLarge imports a tree of $ZETCD_IMPORT_LARGE nodes (skipped when unset) made with
// multis of 500 creates, logs how long the load and the import take, and diffs it against
// ZooKeeper. All of its zxids lie in one etcd revision, more writes than one transaction holds:
// written into etcd's database directly, they keep their values.
func TestImportLarge(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ZETCD_IMPORT_LARGE"))
	if n <= 0 {
		t.Skip("ZETCD_IMPORT_LARGE unset")
	}
	const perParent = 500
	zkDir, restartZK := zooKeeperHistory(t, bigZK, func(addr string) {
		c := testenv.Connect(t, addr)
		begin := time.Now()
		for p := range n / perParent {
			ops := []any{&zk.CreateRequest{Path: fmt.Sprintf("/p%d", p), Acl: openACL}}
			for i := range perParent - 1 {
				ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/p%d/n%d", p, i), Data: []byte(fmt.Sprint(i)), Acl: openACL})
			}
			_, err := c.Multi(ops...)
			testenv.Must(t, err)
			_, err = c.Set(fmt.Sprintf("/p%d/n1", p), []byte("x"), -1)
			testenv.Must(t, err)
		}
		t.Logf("made %d nodes in %v", n, time.Since(begin))
	})
	begin := time.Now()
	etcdDir, res := importInto(t, zkDir, "--log-level", "warn")
	t.Logf("import of %d nodes: %v, %+v", res.Nodes, time.Since(begin), res)
	if res.Zxids != etcdstore.ImportExact || res.Padding != 0 {
		t.Errorf("import result %+v: want exact zxids without padding", res)
	}
	e := testenv.StartEtcdWith(t, embedetcd.Config{Dir: etcdDir})
	begin = time.Now()
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
	t.Logf("zetcd started in %v", time.Since(begin))
	begin = time.Now()
	zkAddr := restartZK()
	t.Logf("ZooKeeper started on the same directory (JVM start included) in %v", time.Since(begin))
	begin = time.Now()
	itest.DiffTrees(t, zkAddr, z.Addr)
	t.Logf("diff in %v", time.Since(begin))
}

// TestImportSessions: sessions open when ZooKeeper stopped are imported with their ids,
// timeouts, ephemerals and ZooKeeper's passwords. One resumed on zetcd with the id and
// password ZooKeeper gave it, and the last zxid it saw there, keeps its ephemeral; one that
// does not come back is expired at its timeout by the elected zetcd, its ephemeral deleted.
func TestImportSessions(t *testing.T) {
	var keep, leave encoding.ConnectResponse
	var seen encoding.Zxid // the newest zxid the clients saw on ZooKeeper
	zkDir, restartZK := zooKeeperHistory(t, smallZK, func(addr string) {
		for _, s := range []struct {
			path string
			resp *encoding.ConnectResponse
		}{{"/app/keep", &keep}, {"/app/leave", &leave}} {
			// 20 s: both servers must still hold the sessions when they are compared, on a
			// loaded machine too.
			c := itest.ConnectRawTimeout(t, addr, 20000)
			if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: s.path, ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, nil); code != 0 {
				t.Fatalf("create %s: %v", s.path, code)
			}
			*s.resp = c.Session
			seen = c.Ping()
		}
	})
	etcdDir, res := importInto(t, zkDir, "--zxids", "exact")
	if res.Sessions != 2 || res.Ephemerals != 2 || res.SkippedSessions != 0 {
		t.Fatalf("import result %+v", res)
	}
	e := testenv.StartEtcdWith(t, embedetcd.Config{Dir: etcdDir})
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: time.Second})
	// ZooKeeper restarted on the copy holds both sessions too, until their timeouts.
	itest.DiffTrees(t, restartZK(), z.Addr)

	c := itest.DialRaw(t, z.Addr)
	resp, err := c.Handshake(encoding.ConnectRequest{LastZxidSeen: seen, TimeOut: keep.TimeOut, SessionID: keep.SessionID, Passwd: keep.Passwd, HasReadOnly: true})
	if err != nil || resp.TimeOut == 0 || resp.SessionID != keep.SessionID {
		t.Fatalf("resume with ZooKeeper's id and password: %+v %v", resp, err)
	}
	c.Conn.SetDeadline(time.Now().Add(2 * time.Minute)) // pings until the other session expires
	watcher := testenv.Connect(t, z.Addr)
	testenv.Eventually(t, time.Duration(leave.TimeOut)*time.Millisecond*2+15*time.Second, fmt.Sprintf("session %#x expired", leave.SessionID), func() error {
		c.Ping()
		ok, _, err := watcher.Exists("/app/leave")
		testenv.Must(t, err)
		if ok {
			return errors.New("/app/leave still exists")
		}
		return nil
	})
	if ok, st, err := watcher.Exists("/app/keep"); err != nil || !ok || st.EphemeralOwner != int64(keep.SessionID) {
		t.Errorf("/app/keep of the resumed session: %v %+v %v", ok, st, err)
	}
	_, app, err := watcher.Get("/app")
	testenv.Must(t, err)
	if app.Pzxid <= int64(res.FinalRev)<<16 {
		t.Errorf("/app pzxid %#x did not move with the expiry", app.Pzxid)
	}
}

// TestImportKilled: `zetcd import` killed as soon as it has put etcd's database in place
// leaves a data directory that zetcd either refuses to serve, the import not having finished
// (etcdstore's TestImportBackendCutShort makes that case certain), or serves, the kill having
// come after the database was complete; and a second import refuses to import into it.
func TestImportKilled(t *testing.T) {
	zkDir, _ := zooKeeperHistory(t, smallZK, nil)
	bin := filepath.Join(t.TempDir(), "zetcd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build zetcd: %v\n%s", err, out)
	}
	etcdDir := t.TempDir()
	var out bytes.Buffer
	imp := exec.Command(bin, "import", "--zk-data-dir", zkDir, "--data-dir", etcdDir, "--log-level", "info")
	imp.Stdout, imp.Stderr = &out, &out
	testenv.Must(t, imp.Start())
	exited := make(chan error, 1)
	go func() { exited <- imp.Wait() }()
	db := embedetcd.BackendPath(etcdDir)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(db); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("import exited (%v) before etcd's database appeared:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no etcd database at %s after a minute:\n%s", db, out.String())
		}
		time.Sleep(time.Millisecond)
	}
	_ = imp.Process.Kill() // it may have finished already: a small tree is written in milliseconds
	if err := <-exited; err == nil {
		t.Logf("the import finished before the kill")
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	serve := exec.Command(bin, "--data-dir", etcdDir, "--zkaddr", addr, "--log-level", "warn")
	var served bytes.Buffer
	serve.Stdout, serve.Stderr = &served, &served
	testenv.Must(t, serve.Start())
	ended := make(chan error, 1)
	go func() { ended <- serve.Wait() }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-ended:
			if err == nil || !strings.Contains(served.String(), "did not finish") {
				t.Fatalf("zetcd on the killed import's directory: %v\n%s", err, served.String())
			}
			t.Logf("killed before its database was complete: zetcd refuses it")
		default:
			if _, err := itest.FourLetter(addr, "ruok"); err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("zetcd neither serves nor refuses the killed import's directory:\n%s", served.String())
				}
				continue
			}
			t.Logf("killed after its database was complete: zetcd serves it")
			_ = serve.Process.Kill()
			<-ended
		}
		break
	}
	o, err := parseImportFlags([]string{"--zk-data-dir", zkDir, "--data-dir", etcdDir}, io.Discard)
	testenv.Must(t, err)
	if _, err := runImport(o, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("import into the killed import's directory: %v", err)
	}
}

// TestMachineMemory: the import's memory limit comes from what /proc/meminfo says the machine
// has, or less (a cgroup's limit).
func TestMachineMemory(t *testing.T) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo")
	}
	var kb int64
	fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
	if got := machineMemory(); got <= 0 || got > kb<<10 {
		t.Errorf("machineMemory %d, MemTotal %d kB", got, kb)
	}
}

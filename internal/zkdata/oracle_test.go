package zkdata_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zkdata"
	"github.com/zetcd/zetcd/internal/zksession"
)

// This file checks Load against real ZooKeeper: the tree a client reads from the server that
// wrote a data directory, and the tree a client reads from a server started on a copy of it.

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

func connect(t testing.TB, addr string, timeout time.Duration) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatalf("zk.Connect(%s): %v", addr, err)
	}
	t.Cleanup(conn.Close)
	if err := zksession.Await(context.Background(), events, 15*time.Second); err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	return conn
}

// clientNode is a node as a client reads it.
type clientNode struct {
	data     []byte
	acl      []zk.ACL
	stat     zk.Stat
	children []string
}

// readTree reads every node under "/" through conn.
func readTree(t testing.TB, conn *zk.Conn) map[string]clientNode {
	t.Helper()
	out := make(map[string]clientNode)
	queue := []string{"/"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		data, stat, err := conn.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		acl, _, err := conn.GetACL(p)
		if err != nil {
			t.Fatalf("getACL %s: %v", p, err)
		}
		children, _, err := conn.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		slices.Sort(children)
		out[p] = clientNode{data: data, acl: acl, stat: *stat, children: children}
		for _, c := range children {
			queue = append(queue, strings.TrimSuffix(p, "/")+"/"+c)
		}
	}
	return out
}

// diffTree lists how st's nodes differ from what a client read.
func diffTree(st *zkdata.State, truth map[string]clientNode) []string {
	var diffs []string
	for p, want := range truth {
		n := st.Nodes[p]
		if n == nil {
			diffs = append(diffs, fmt.Sprintf("%s: missing", p))
			continue
		}
		if !bytes.Equal(n.Data, want.data) {
			diffs = append(diffs, fmt.Sprintf("%s: data %q, want %q", p, trim(n.Data), trim(want.data)))
		}
		var acl []zk.ACL
		for _, a := range n.ACL {
			acl = append(acl, zk.ACL{Perms: int32(a.Perms), Scheme: a.ID.Scheme, ID: a.ID.ID})
		}
		if !slices.Equal(acl, want.acl) {
			diffs = append(diffs, fmt.Sprintf("%s: ACL %v, want %v", p, acl, want.acl))
		}
		s := n.ClientStat()
		got := zk.Stat{Czxid: int64(s.Czxid), Mzxid: int64(s.Mzxid), Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
			Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: int64(s.EphemeralOwner), DataLength: s.DataLength,
			NumChildren: s.NumChildren, Pzxid: int64(s.Pzxid)}
		if got != want.stat {
			diffs = append(diffs, fmt.Sprintf("%s: stat %+v, want %+v", p, got, want.stat))
		}
		if !slices.Equal(n.Children, want.children) && !(len(n.Children) == 0 && len(want.children) == 0) {
			diffs = append(diffs, fmt.Sprintf("%s: children %v, want %v", p, n.Children, want.children))
		}
	}
	for p := range st.Nodes {
		if _, ok := truth[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not on the server", p))
		}
	}
	slices.Sort(diffs)
	return diffs
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func reportDiffs(t testing.TB, what string, diffs []string) {
	t.Helper()
	if len(diffs) == 0 {
		return
	}
	if len(diffs) > 30 {
		diffs = append(diffs[:30], fmt.Sprintf("... and %d more", len(diffs)-30))
	}
	t.Errorf("%s:\n%s", what, strings.Join(diffs, "\n"))
}

var (
	consRE = regexp.MustCompile(`sid=0x([0-9a-f]+),.*?to=(\d+)`)
	hexRE  = regexp.MustCompile(`^\s+0x([0-9a-f]+)\s*$`)
)

// serverSessions returns the open sessions of the server at addr: every id the dump word
// lists, with the timeout the cons word shows for the connected ones.
func serverSessions(t testing.TB, addr string) map[int64]int32 {
	t.Helper()
	dump, err := zkserver.FourLetterWord(addr, "dump", 5*time.Second)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	cons, err := zkserver.FourLetterWord(addr, "cons", 5*time.Second)
	if err != nil {
		t.Fatalf("cons: %v", err)
	}
	out := make(map[int64]int32)
	sessionPart, _, _ := strings.Cut(dump, "ephemeral nodes dump")
	for _, line := range strings.Split(sessionPart, "\n") {
		if m := hexRE.FindStringSubmatch(line); m != nil {
			id, _ := strconv.ParseUint(m[1], 16, 64)
			out[int64(id)] = -1
		}
	}
	for _, m := range consRE.FindAllStringSubmatch(cons, -1) {
		id, _ := strconv.ParseUint(m[1], 16, 64)
		to, _ := strconv.Atoi(m[2])
		out[int64(id)] = int32(to)
	}
	return out
}

func diffSessions(st *zkdata.State, want map[int64]int32) []string {
	var diffs []string
	for id, to := range want {
		s, ok := st.Sessions[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("session %#x: missing", id))
		case to >= 0 && s.Timeout != to:
			diffs = append(diffs, fmt.Sprintf("session %#x: timeout %d, want %d", id, s.Timeout, to))
		}
	}
	for id := range st.Sessions {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("session %#x: not open on the server", id))
		}
	}
	for p, n := range st.Nodes {
		if n.Type() == zkdata.Ephemeral {
			if _, ok := want[int64(n.Stat.EphemeralOwner)]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s: ephemeral of session %#x, not open", p, n.Stat.EphemeralOwner))
			}
		}
	}
	slices.Sort(diffs)
	return diffs
}

// restarted is a ZooKeeper started by startOn on a data directory of the test's making.
type restarted struct {
	addr string
	cmd  *exec.Cmd
}

// startOn starts ZooKeeper on dataDir, which zkserver.Start cannot do, and kills it when the
// test ends.
func startOn(t testing.TB, dataDir string, props map[string]string) *restarted {
	t.Helper()
	lib := zkserver.LibDir()
	java, err := exec.LookPath("java")
	if err != nil || lib == "" {
		t.Skipf("no java or ZooKeeper jars: %v", err)
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=*\nsnapCount=100000\n", dataDir, port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "logback.xml"), []byte(zkserver.LogbackXML), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	for k, v := range props {
		args = append(args, "-D"+k+"="+v)
	}
	args = append(args, "-cp", filepath.Join(lib, "*")+string(filepath.ListSeparator)+dir, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
	logf, err := os.Create(filepath.Join(dir, "zk.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(java, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := &restarted{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := zkserver.FourLetterWord(r.addr, "srvr", time.Second)
		if err == nil && strings.Contains(out, "Mode: ") {
			return r
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "zk.log"))
			t.Fatalf("ZooKeeper on %s did not start:\n%s", dataDir, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyDir copies the files of src/version-2 into a new data directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

package zkserver

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/zksession"
)

// childEnv marks a run of this test binary started by TestMissingJars.
const childEnv = "ZKSERVER_TEST_CHILD"

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// connect opens a session to addr, waits until it is established and closes it when the test ends.
func connect(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatalf("zk.Connect(%s): %v", addr, err)
	}
	t.Cleanup(conn.Close)
	if err := zksession.Await(context.Background(), events, 15*time.Second); err != nil {
		t.Fatalf("connect %s: %v (state %v)", addr, err, conn.State())
	}
	return conn
}

func TestServe(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	s := Start(t, Options{})
	t.Logf("ZooKeeper ready at %s after %v", s.Addr, time.Since(begin).Round(time.Millisecond))

	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil || host != "127.0.0.1" {
		t.Errorf("Addr = %q, want 127.0.0.1:port", s.Addr)
	}
	srvr, err := FourLetterWord(s.Addr, "srvr", 5*time.Second)
	if err != nil {
		t.Fatalf("srvr: %v", err)
	}
	if !strings.Contains(srvr, "Mode: standalone") || !strings.Contains(srvr, "Zookeeper version: 3.9.") {
		t.Errorf("srvr answered %q, want a standalone 3.9 server", srvr)
	}

	conn := connect(t, s.Addr)
	acl := zk.WorldACL(zk.PermAll)
	if p, err := conn.Create("/zkserver", []byte("hello"), zk.FlagPersistent, acl); err != nil || p != "/zkserver" {
		t.Fatalf("Create(/zkserver) = %q, %v", p, err)
	}
	data, stat, err := conn.Get("/zkserver")
	if err != nil || string(data) != "hello" || stat.Version != 0 {
		t.Fatalf("Get(/zkserver) = %q, %+v, %v; want hello at version 0", data, stat, err)
	}
	// zookeeper.extendedTypesEnabled=true: TTL nodes are accepted.
	if _, err := conn.CreateTTL("/zkserver-ttl", nil, zk.FlagTTL, acl, time.Hour); err != nil {
		t.Errorf("CreateTTL: %v (is zookeeper.extendedTypesEnabled set?)", err)
	}

	conn.Close()
	s.Stop()
	s.Stop() // idempotent
	if out, err := FourLetterWord(s.Addr, "srvr", time.Second); err == nil {
		t.Errorf("after Stop, %s still answers srvr: %q", s.Addr, out)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	const superPassword = "s3cret"
	sum := sha1.Sum([]byte("super:" + superPassword))
	s := Start(t, Options{
		ConfigLines: []string{"maxSessionTimeout=54321"},
		SystemProps: map[string]string{
			"zookeeper.DigestAuthenticationProvider.superDigest": "super:" + base64.StdEncoding.EncodeToString(sum[:]),
		},
	})

	conf, err := FourLetterWord(s.Addr, "conf", 5*time.Second)
	if err != nil {
		t.Fatalf("conf: %v", err)
	}
	if !strings.Contains(conf, "maxSessionTimeout=54321") {
		t.Errorf("ConfigLines not applied; conf answered:\n%s", conf)
	}

	// A node only alice may read: an anonymous session is refused, the super user is not,
	// which shows that SystemProps reached the JVM.
	owner := connect(t, s.Addr)
	if err := owner.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatalf("AddAuth(alice): %v", err)
	}
	if _, err := owner.Create("/private", []byte("x"), zk.FlagPersistent, zk.DigestACL(zk.PermAll, "alice", "pw")); err != nil {
		t.Fatalf("Create(/private): %v", err)
	}
	anon := connect(t, s.Addr)
	if _, _, err := anon.Get("/private"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous Get(/private) = %v, want %v", err, zk.ErrNoAuth)
	}
	super := connect(t, s.Addr)
	if err := super.AddAuth("digest", []byte("super:"+superPassword)); err != nil {
		t.Fatalf("AddAuth(super): %v", err)
	}
	if data, _, err := super.Get("/private"); err != nil || string(data) != "x" {
		t.Errorf("super Get(/private) = %q, %v; want x", data, err)
	}
}

func TestRetriesBusyPort(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	picks := 0
	s := startPicking(t, Options{}, func() (int, error) {
		picks++
		if picks == 1 {
			return busyPort, nil
		}
		return freePort()
	})
	if picks != 2 {
		t.Errorf("picked %d ports, want 2 (the busy one, then a free one)", picks)
	}
	if _, port, _ := net.SplitHostPort(s.Addr); port == "" || s.Addr == busy.Addr().String() {
		t.Errorf("server at %s, want another port than the busy %d", s.Addr, busyPort)
	}
	if out, err := FourLetterWord(s.Addr, "srvr", 5*time.Second); err != nil || !strings.Contains(out, "Mode: ") {
		t.Errorf("srvr = %q, %v", out, err)
	}
}

// TestMissingJars runs TestServe in a child process with ZETCD_ZOOKEEPER_LIB pointing nowhere:
// it must skip, unless ZETCD_REQUIRE_ZOOKEEPER asks for ZooKeeper, in which case it must fail.
func TestMissingJars(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	t.Parallel()
	lib := t.TempDir() + "/nonexistent"
	for _, tc := range []struct {
		require  string
		wantFail bool
		want     string
	}{
		{require: "", want: "--- SKIP: TestServe"},
		{require: "0", want: "--- SKIP: TestServe"},
		{require: "1", wantFail: true, want: "--- FAIL: TestServe"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServe$", "-test.v", "-test.count=1")
		cmd.Env = append(withoutEnv(os.Environ(), EnvLib, EnvRequire, childEnv),
			EnvLib+"="+lib, EnvRequire+"="+tc.require, childEnv+"=1")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exitErr *exec.ExitError
		if failed := errors.As(err, &exitErr); failed != tc.wantFail || (err != nil && !failed) {
			t.Errorf("%s=%q: child exited with %v, want failure %v; output:\n%s", EnvRequire, tc.require, err, tc.wantFail, &out)
			continue
		}
		if !strings.Contains(out.String(), tc.want) || !strings.Contains(out.String(), lib) {
			t.Errorf("%s=%q: output lacks %q or the lib dir %s:\n%s", EnvRequire, tc.require, tc.want, lib, &out)
		}
	}
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
outer:
	for _, kv := range env {
		for _, name := range names {
			if strings.HasPrefix(kv, name+"=") {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

func TestLibDir(t *testing.T) {
	t.Setenv(EnvLib, "/some/where")
	if got := LibDir(); got != "/some/where" {
		t.Errorf("LibDir() with %s set = %q", EnvLib, got)
	}
	t.Setenv(EnvLib, "")
	got := LibDir()
	if !strings.HasSuffix(got, "/.cache/zookeeper/lib") {
		t.Fatalf("LibDir() = %q, want <module root>/.cache/zookeeper/lib", got)
	}
	mod := strings.TrimSuffix(got, ".cache/zookeeper/lib") + "go.mod"
	if data, err := os.ReadFile(mod); err != nil || !bytes.Contains(data, []byte("module github.com/zetcd/zetcd")) {
		t.Errorf("%s is not zetcd's go.mod: %v", mod, err)
	}
}

func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "true": true} {
		t.Setenv(EnvRequire, v)
		if got := Required(); got != want {
			t.Errorf("Required() with %s=%q = %v, want %v", EnvRequire, v, got, want)
		}
	}
}

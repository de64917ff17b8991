package clients

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// The ZooKeeper 3.9 Java client with a DIGEST-MD5 JAAS Client section, against zetcd and a
// ZooKeeper configured alike: both must answer each step the same (testdata/SaslClient.java).

// javaClient runs testdata/SaslClient.java. user "" runs it without SASL
// (zookeeper.sasl.client=false); otherwise its JAAS Client section logs in as user.
func javaClient(t *testing.T, addr, mode, path, user, password string) []string {
	t.Helper()
	return outputLines(t, javaClientCmd(t, addr, mode, path, user, password), "java SaslClient "+mode)
}

// javaClientCmd is the command javaClient runs.
func javaClientCmd(t *testing.T, addr, mode, path, user, password string) *exec.Cmd {
	t.Helper()
	dir := t.TempDir()
	jvm := []string{"-Dzookeeper.fips-mode=false"}
	if user == "" {
		jvm = append(jvm, "-Dzookeeper.sasl.client=false")
	} else {
		jaas := filepath.Join(dir, "client.jaas")
		text := "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=\"" + user + "\"\n  password=\"" + password + "\";\n};\n"
		if err := os.WriteFile(jaas, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		jvm = append(jvm, "-Djava.security.auth.login.config="+jaas)
	}
	return javaProgram(t, dir, "SaslClient.java", nil, jvm, addr, mode, path)
}

// TestSaslJavaClient: a broker-like owner creates a node with CREATOR_ALL_ACL + world READ
// (its sasl identity), a client without SASL and another SASL user can read it but not change
// it, and bad credentials end in AuthFailed; zetcd answers every step as ZooKeeper does.
func TestSaslJavaClient(t *testing.T) {
	type run struct{ mode, user, password string }
	runs := []run{
		{"owner", "bob", "bobsecret"},
		{"other", "", ""},
		{"other", "alice", "alicesecret"},
		{"failed", "bob", "wrong"},
		{"failed", "nobody", "x"},
	}
	want := map[int][]string{
		0: {"states SyncConnected,SaslAuthenticated", "create /kafka", "getACL sasl:bob=31 world:anyone=1", "whoAmI sasl:bob ip:127.0.0.1", "setData 1", "createChild /kafka/c"},
		1: {"states SyncConnected", "setData NOAUTH", "createChild NOAUTH", "delete NOAUTH", "getData w"},
		2: {"states SyncConnected", "setData NOAUTH", "createChild NOAUTH", "delete NOAUTH", "getData w"},
		3: {"states SyncConnected,AuthFailed", "exists AUTHFAILED"},
		4: {"states SyncConnected,AuthFailed", "exists AUTHFAILED"},
	}
	got := map[string][][]string{}
	for _, srv := range []struct {
		name  string
		start func(testing.TB, testenv.ServerOptions) string
	}{{"zetcd", testenv.StartZetcdWith}, {"zookeeper", testenv.StartZooKeeperWith}} {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t, testenv.ServerOptions{SASL: &testenv.SASLOptions{Users: itest.SaslUsers}})
			for i, r := range runs {
				lines := javaClient(t, addr, r.mode, "/kafka", r.user, r.password)
				t.Logf("%s as %q: %q", r.mode, r.user, lines)
				if w, ok := want[i]; ok && !slices.Equal(lines, w) {
					t.Errorf("%s as %q: %q, want %q", r.mode, r.user, lines, w)
				}
				got[srv.name] = append(got[srv.name], lines)
			}
		})
	}
	if z, k := got["zetcd"], got["zookeeper"]; len(z) == len(runs) && len(k) == len(runs) {
		for i := range runs {
			if !slices.Equal(z[i], k[i]) {
				t.Errorf("%s as %q: zetcd %q, ZooKeeper %q", runs[i].mode, runs[i].user, z[i], k[i])
			}
		}
	}
}

// TestSaslJavaClientMoves: a Java client authenticated by SASL on one zetcd loses it, resumes
// its session on another zetcd in front of the same etcd, authenticates again there by itself,
// and keeps its rights on the nodes it created with CREATOR_ALL_ACL.
func TestSaslJavaClientMoves(t *testing.T) {
	cluster := startEtcd(t)
	opts := testenv.ServerOptions{SASL: &testenv.SASLOptions{Users: itest.SaslUsers}}.ZetcdOptions()
	a := testenv.StartZetcdOn(t, cluster, opts)
	b := testenv.StartZetcdOn(t, cluster, opts)
	client, _ := startPaused(t, javaClientCmd(t, a.Addr+","+b.Addr, "move", "/moved", "bob", "bobsecret"), "java SaslClient move")
	// Stop whichever zetcd the client is connected to (the Java client picks at random).
	if cons, err := zkserver.FourLetterWord(a.Addr, "cons", 5*time.Second); err == nil && strings.Contains(cons, "sid=") {
		a.Stop()
	} else {
		b.Stop()
	}
	lines := client.resume()
	want := []string{"states SyncConnected,SaslAuthenticated", "create /moved", "createEphemeral /moved/e", "ready",
		"states Disconnected,SyncConnected,SaslAuthenticated", "sameSession true", "whoAmI sasl:bob ip:127.0.0.1", "setData 1", "ephemeral true"}
	if !slices.Equal(lines, want) {
		t.Errorf("java SaslClient move: %q, want %q", lines, want)
	}
}

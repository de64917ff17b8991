package clients

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// kazoo's SASL client (kazoo with pure-sasl) against zetcd and a ZooKeeper configured alike:
// both must answer each step the same (testdata/kazoo_sasl.py).

// envKazooPython names a Python with kazoo and pure-sasl installed; default
// <module root>/.cache/kazoo/bin/python (python -m venv .cache/kazoo && .cache/kazoo/bin/pip
// install kazoo pure-sasl).
const envKazooPython = "ZETCD_KAZOO_PYTHON"

func kazooPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv(envKazooPython)
	if py == "" {
		py, _ = filepath.Abs(filepath.Join("..", "..", ".cache", "kazoo", "bin", "python"))
	}
	if err := exec.Command(py, "-c", "import kazoo, puresasl").Run(); err != nil {
		skipOrRequire(t, "no Python with kazoo and pure-sasl (%s=%q: %v); python -m venv .cache/kazoo && .cache/kazoo/bin/pip install kazoo pure-sasl", envKazooPython, py, err)
	}
	return py
}

// kazooClient runs the kazoo script testdata/script against addr with args and returns the lines
// it printed; the test fails if it fails or runs past two minutes.
func kazooClient(t *testing.T, py, script, addr string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join("testdata", script), addr}, args...)...)
	return outputLines(t, cmd, fmt.Sprintf("%s %v", script, args))
}

// TestSaslKazoo: kazoo's DIGEST-MD5 client authenticates and owns a sasl-ACL node, a client
// without SASL cannot change it, and bad credentials and other mechanisms fail as on ZooKeeper.
func TestSaslKazoo(t *testing.T) {
	py := kazooPython(t)
	runs := [][]string{
		{"owner", "/kz", "DIGEST-MD5", "bob", "bobsecret"},
		{"other", "/kz", "none"},
		{"other", "/kz", "DIGEST-MD5", "alice", "alicesecret"},
		{"failed", "/kz", "DIGEST-MD5", "bob", "wrong"},
		{"failed", "/kz", "DIGEST-MD5", "nobody", "x"},
		{"failed", "/kz", "PLAIN", "bob", "bobsecret"},
		{"failed", "/kz", "CRAM-MD5", "bob", "bobsecret"},
	}
	// kazoo's PLAIN takes the DIGEST-MD5 challenge for the end of its exchange and carries on
	// unauthenticated; its CRAM-MD5 answers the challenge and is refused.
	want := [][]string{
		{"start ok", "create /kz", "getACL sasl:bob=31 world:anyone=1", "setData 1"},
		{"start ok", "setData NoAuthError", "getData w"},
		{"start ok", "setData NoAuthError", "getData w"},
		{"start ok", "exists AuthFailedError"},
		{"start ok", "exists AuthFailedError"},
		{"start ok", "exists True"},
		{"start ok", "exists AuthFailedError"},
	}
	got := map[string][][]string{}
	for _, srv := range []struct {
		name  string
		start func(testing.TB, testenv.ServerOptions) string
	}{{"zetcd", testenv.StartZetcdWith}, {"zookeeper", testenv.StartZooKeeperWith}} {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t, testenv.ServerOptions{SASL: &testenv.SASLOptions{Users: itest.SaslUsers}})
			for _, r := range runs {
				lines := kazooClient(t, py, "kazoo_sasl.py", addr, r...)
				t.Logf("%v: %q", r, lines)
				if w := want[len(got[srv.name])]; !slices.Equal(lines, w) {
					t.Errorf("%v: %q, want %q", r, lines, w)
				}
				got[srv.name] = append(got[srv.name], lines)
			}
		})
	}
	if z, k := got["zetcd"], got["zookeeper"]; len(z) == len(runs) && len(k) == len(runs) {
		for i := range runs {
			if !slices.Equal(z[i], k[i]) {
				t.Errorf("%v: zetcd %q, ZooKeeper %q", runs[i], z[i], k[i])
			}
		}
	}
}

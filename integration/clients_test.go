package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/internal/zkserver"
)

// Real clients (ZooKeeper's Java client, Curator, kazoo, a Kafka broker) run as processes of
// their own against the servers under test.

// envRequireClients, set non-empty (as CI does, after installing them), makes the tests that need
// kazoo, a Kafka broker or Curator fail instead of skipping when they are missing.
const envRequireClients = "ZETCD_REQUIRE_CLIENTS"

// skipOrRequire skips the test for a missing client, or fails it if envRequireClients asks for
// the clients.
func skipOrRequire(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(envRequireClients) != "" {
		t.Fatalf(format+" (required by "+envRequireClients+")", args...)
	}
	t.Skipf(format, args...)
}

// outputLines runs a client command (what names it in a failure) and returns the lines it
// wrote to stdout; the test fails with its stdout and stderr if it fails.
func outputLines(t *testing.T, cmd *exec.Cmd, what string) []string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, out, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// javaProgram is the command that runs the Java source file testdata/src (launched from source)
// with ZooKeeper 3.9's jars (its client, slf4j and logback) and the jars of libs on the class
// path; jvm are the JVM's options, args the program's. dir, a directory of the test's, is on the
// class path too, with a logback.xml that keeps the client's log off stdout, which the tests
// read. The test skips (or fails, if ZooKeeper is required) without the jars or java.
func javaProgram(t *testing.T, dir, src string, libs, jvm []string, args ...string) *exec.Cmd {
	t.Helper()
	lib := zkserver.LibDir()
	if jars, _ := filepath.Glob(filepath.Join(lib, "zookeeper-[0-9]*.jar")); len(jars) == 0 {
		if zkserver.Required() {
			t.Fatalf("no ZooKeeper jars in %q", lib)
		}
		t.Skipf("no ZooKeeper jars in %q", lib)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skipf("java: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "logback.xml"), []byte(zkserver.LogbackXML), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join("testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	cp := []string{filepath.Join(lib, "*")}
	for _, l := range libs {
		cp = append(cp, filepath.Join(l, "*"))
	}
	cp = append(cp, dir)
	all := append([]string{"-XX:TieredStopAtLevel=1", "-Xshare:auto"}, jvm...)
	all = append(all, "-cp", strings.Join(cp, string(filepath.ListSeparator)), path)
	return exec.Command(java, append(all, args...)...)
}

package clients

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
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

// javaProgram is the command that runs the Java source file testdata/src (launched from source),
// or, when src does not end in .java, the main class src, with ZooKeeper 3.9's jars (its client,
// slf4j and logback) and the jars of libs on the class path; jvm are the JVM's options, args the
// program's. dir, a directory of the test's, is on the class path too, with a logback.xml that
// keeps the client's log off stdout, which the tests read. The test skips without the jars or
// java, or fails if ZooKeeper is required.
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
		if zkserver.Required() {
			t.Fatalf("java: %v", err)
		}
		t.Skipf("java: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "logback.xml"), []byte(zkserver.LogbackXML), 0o644); err != nil {
		t.Fatal(err)
	}
	main := src
	if strings.HasSuffix(src, ".java") {
		if main, err = filepath.Abs(filepath.Join("testdata", src)); err != nil {
			t.Fatal(err)
		}
	}
	cp := []string{filepath.Join(lib, "*")}
	for _, l := range libs {
		cp = append(cp, filepath.Join(l, "*"))
	}
	cp = append(cp, dir)
	all := append([]string{"-XX:TieredStopAtLevel=1", "-Xshare:auto"}, jvm...)
	all = append(all, "-cp", strings.Join(cp, string(filepath.ListSeparator)), main)
	return exec.Command(java, append(all, args...)...)
}

// jarDir is the directory of a client's jars: $env, or <module root>/.cache/<name>/lib, where
// `make <name>` fetches them. The test skips (or fails, with envRequireClients) when no jar there
// matches glob.
func jarDir(t *testing.T, env, name, glob string) string {
	t.Helper()
	lib := os.Getenv(env)
	if lib == "" {
		lib, _ = filepath.Abs(filepath.Join("..", "..", ".cache", name, "lib"))
	}
	if jars, _ := filepath.Glob(filepath.Join(lib, glob)); len(jars) == 0 {
		skipOrRequire(t, "no %s in %s (make %s, or %s)", glob, lib, name, env)
	}
	return lib
}

// onEveryServer runs a client program against each of a fresh zetcd, ZooKeeper and xchk
// (testenv.ForEachServer; client returns the lines it printed); each must print want, line for
// line.
func onEveryServer(t *testing.T, what string, want []string, client func(t *testing.T, addr string) []string) {
	onEveryServerWith(t, testenv.ServerOptions{}, what, want, client)
}

// onEveryServerWith is onEveryServer with every server started with opts.
func onEveryServerWith(t *testing.T, opts testenv.ServerOptions, what string, want []string, client func(t *testing.T, addr string) []string) {
	testenv.ForEachServerWith(t, opts, func(t *testing.T, addr string) {
		wantLines(t, what+" on "+t.Name(), client(t, addr), want)
	})
}

// wantLines fails the test, showing both, if a client program (what) printed lines other than
// want.
func wantLines(t *testing.T, what string, lines, want []string) {
	t.Helper()
	if !slices.Equal(lines, want) {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// pausedClient is a client program that stops at each line beginning with "ready" and waits
// for a line on its stdin before it goes on: the test changes the servers meanwhile (stops one,
// kills or restarts a broker).
type pausedClient struct {
	t      *testing.T
	what   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr strings.Builder
	lines  []string // what it printed so far
}

// startPaused starts cmd (what names it in failures) and returns once it has printed its first
// ready line, with that line; the test fails if it ends first. The program is killed at cleanup.
func startPaused(t *testing.T, cmd *exec.Cmd, what string) (*pausedClient, string) {
	t.Helper()
	p := &pausedClient{t: t, what: what, cmd: cmd}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p.out = bufio.NewScanner(stdout)
	return p, p.untilReady()
}

// untilReady reads the program's output up to its next ready line and returns that line; the
// test fails if the program ends first.
func (p *pausedClient) untilReady() string {
	p.t.Helper()
	for p.out.Scan() {
		p.lines = append(p.lines, p.out.Text())
		if strings.HasPrefix(p.out.Text(), "ready") {
			return p.out.Text()
		}
	}
	p.cmd.Wait()
	p.t.Fatalf("%s ended before it was ready: %q\nstderr:\n%s", p.what, p.lines, p.stderr.String())
	return ""
}

// goOn lets the program go on.
func (p *pausedClient) goOn() {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		p.t.Fatal(err)
	}
}

// proceed lets the program go on to its next ready line, and returns that line.
func (p *pausedClient) proceed() string {
	p.t.Helper()
	p.goOn()
	return p.untilReady()
}

// resume lets the program go on, waits for it to end, and returns every line it printed, the
// ready lines included; the test fails if the program fails.
func (p *pausedClient) resume() []string {
	p.t.Helper()
	p.goOn()
	for p.out.Scan() {
		p.lines = append(p.lines, p.out.Text())
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("%s: %v: %q\nstderr:\n%s", p.what, err, p.lines, p.stderr.String())
	}
	return p.lines
}

// serverOf returns the index of the zetcd among addrs whose connections include session (0x and
// hexadecimal digits, leading zeros or not); the test fails if none holds it.
func serverOf(t *testing.T, session string, addrs []string) int {
	t.Helper()
	id, err := strconv.ParseUint(strings.TrimPrefix(session, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("session id %q: %v", session, err)
	}
	sid := fmt.Sprintf("sid=%#x,", id) // as cons writes it
	for i, addr := range addrs {
		cons, err := zkserver.FourLetterWord(addr, "cons", 5*time.Second)
		if err != nil {
			t.Fatalf("cons on %s: %v", addr, err)
		}
		if strings.Contains(cons, sid) {
			return i
		}
	}
	t.Fatalf("no zetcd holds session %s", session)
	return -1
}

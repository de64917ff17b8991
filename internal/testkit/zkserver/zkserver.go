package zkserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// EnvLib names a directory of ZooKeeper jars to use instead of <module root>/.cache/zookeeper/lib.
	// A relative path is taken from the working directory, which under go test is the package's.
	EnvLib = "ZETCD_ZOOKEEPER_LIB"
	// EnvRequire, set to a non-empty value other than "0", makes Start fail the test instead of
	// skipping it when ZooKeeper cannot be found. CI sets it.
	EnvRequire = "ZETCD_REQUIRE_ZOOKEEPER"

	mainClass = "org.apache.zookeeper.server.ZooKeeperServerMain"

	startTimeout = 30 * time.Second      // from starting the JVM to answering srvr with a Mode
	pollInterval = 50 * time.Millisecond // between readiness probes
	probeTimeout = 2 * time.Second       // for one four-letter-word round trip
	bindAttempts = 3                     // ports tried before giving up
	logTailBytes = 8 << 10               // of the server's log shown in a failure message
	logTailLines = 40
	fetchHint    = "run `make zookeeper` (tools/zookeeper/fetch.sh) to fetch it"
)

// jvmFlags are passed to every server before Options.SystemProps.
var jvmFlags = []string{
	"-Dzookeeper.extendedTypesEnabled=true", // TTL nodes
	"-Xmx256m",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1", // C1 only: starts faster, and a test server is short-lived
}

// LogbackXML is a logback configuration that sends WARN and above to stderr: the server's
// (Start sends its stderr to Server.LogFile), and any Java client's whose stdout a test reads.
const LogbackXML = `<configuration>
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%d{ISO8601} [%thread] %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
`

// Options changes how a server is started. The zero value starts the default server.
type Options struct {
	// ConfigLines are appended to zoo.cfg after the defaults. ZooKeeper reads zoo.cfg as a
	// Java properties file, in which the last line for a key wins, so a line here can also
	// replace a default (e.g. "maxClientCnxns=10").
	ConfigLines []string
	// SystemProps are passed to the JVM as -Dkey=value, e.g.
	// "zookeeper.DigestAuthenticationProvider.superDigest": "super:<base64(sha1(super:password))>".
	SystemProps map[string]string
	// Classpath entries are added after ZooKeeper's jars: classes a test compiled for the
	// server to load (a metrics provider named by "metricsProvider.className=...").
	Classpath []string
}

// Server is a running ZooKeeper started by Start.
type Server struct {
	Addr    string // client address, "127.0.0.1:port"
	Dir     string // holds zoo.cfg, conf/logback.xml, data/ and the log
	LogFile string // the JVM's stdout and stderr

	cmd      *exec.Cmd
	exited   chan struct{} // closed by the goroutine in start, which owns cmd.Wait, once the JVM has exited
	waitErr  error         // cmd.Wait's result; read only after exited is closed
	stopOnce sync.Once
	stopped  chan struct{} // closed by Stop before it kills the JVM
}

// Required reports whether ZETCD_REQUIRE_ZOOKEEPER asks for real-ZooKeeper tests to run
// rather than be skipped.
func Required() bool {
	v := os.Getenv(EnvRequire)
	return v != "" && v != "0"
}

// LibDir returns the directory where the ZooKeeper jars are looked up: $ZETCD_ZOOKEEPER_LIB if
// set, else <module root>/.cache/zookeeper/lib, where the module root is the nearest directory
// at or above the working directory that contains go.mod. It returns "" when neither is found.
func LibDir() string {
	if dir := os.Getenv(EnvLib); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "zookeeper", "lib")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Start starts ZooKeeper on 127.0.0.1 with a free port and its data in t.TempDir(), waits until
// it serves requests, and registers a t.Cleanup that stops it. If the jars or java are not found
// it skips the test, or fails it when Required. It must be called from the test's goroutine.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	return startPicking(t, opts, freePort)
}

// locateOrSkip is locate for a test: without java or the jars it fails the test when
// Required, else skips it.
func locateOrSkip(t testing.TB) (java, lib string) {
	t.Helper()
	java, lib, err := locate()
	if err != nil {
		if Required() {
			t.Fatalf("zkserver: %v; %s is set, so real-ZooKeeper tests must run: %s", err, EnvRequire, fetchHint)
		}
		t.Skipf("zkserver: skipping real-ZooKeeper test: %v; %s", err, fetchHint)
	}
	return java, lib
}

// startPicking is Start with the port picker as a parameter, so that a test can hand out a busy
// port.
func startPicking(t testing.TB, opts Options, pickPort func() (int, error)) *Server {
	t.Helper()
	java, lib := locateOrSkip(t)
	dir := t.TempDir() // before t.Cleanup(s.Stop), so the JVM is stopped before dir is removed

	var lastErr error
	for attempt := 1; attempt <= bindAttempts; attempt++ {
		port, err := pickPort()
		if err != nil {
			t.Fatalf("zkserver: pick a port: %v", err)
		}
		s, err := start(java, lib, dir, port, opts)
		if err == nil {
			t.Cleanup(func() {
				select {
				case <-s.exited:
					select {
					case <-s.stopped:
					default:
						t.Errorf("zkserver: ZooKeeper at %s exited during the test (%v); its log:\n%s",
							s.Addr, s.waitErr, logTail(s.LogFile))
					}
				default:
				}
				s.Stop()
			})
			return s
		}
		lastErr = err
		if !errors.Is(err, errPortInUse) {
			break
		}
		t.Logf("zkserver: attempt %d: %v; retrying with another port", attempt, err)
	}
	t.Fatalf("zkserver: ZooKeeper did not start: %v", lastErr)
	return nil
}

// Stop kills the JVM and waits for it to exit. It may be called more than once, and from any
// goroutine.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		_ = s.cmd.Process.Kill() // fails only if it has already exited, which is fine
	})
	<-s.exited
}

// Signal sends sig to the JVM (SIGSTOP and SIGCONT freeze and thaw it); it fails only if the
// JVM has exited.
func (s *Server) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// FourLetterWord sends a four-letter-word command such as "srvr", "mntr" or "conf" to the
// server at addr and returns its whole answer. timeout bounds the round trip.
func FourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("%s: write: %w", cmd, err)
	}
	out, err := io.ReadAll(conn) // the server closes the connection after answering
	if err != nil {
		return string(out), fmt.Errorf("%s: read: %w", cmd, err)
	}
	return string(out), nil
}

// errPortInUse marks a start that failed because another process had the port.
var errPortInUse = errors.New("port in use")

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// locate finds the java binary ($JAVA_HOME/bin/java, else java on PATH) and the jar directory.
func locate() (java, lib string, err error) {
	lib = LibDir()
	if lib == "" {
		return "", "", fmt.Errorf("no go.mod above the working directory and %s unset, so no ZooKeeper jars", EnvLib)
	}
	if jars, _ := filepath.Glob(filepath.Join(lib, "zookeeper-[0-9]*.jar")); len(jars) == 0 {
		return "", "", fmt.Errorf("no ZooKeeper jars (zookeeper-*.jar) in %s", lib)
	}
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); isFile(p) {
			return p, lib, nil
		}
	}
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("java not found: %w", err)
	}
	return java, lib, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// start writes the configuration into dir, starts the JVM and waits until it serves on port.
// On error the JVM has been stopped.
func start(java, lib, dir string, port int, opts Options) (*Server, error) {
	s, err := launch(java, lib, dir, port, opts, mainClass)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(filepath.Join(dir, "data")); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// launch writes dir's zoo.cfg and logback configuration and starts the JVM running main on
// them, without waiting for it to serve.
func launch(java, lib, dir string, port int, opts Options, main string) (*Server, error) {
	dataDir := filepath.Join(dir, "data")
	confDir := filepath.Join(dir, "conf")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(confDir, "logback.xml"), []byte(LogbackXML), 0o644); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(zooCfg(dataDir, port, opts.ConfigLines)), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "zookeeper.log")
	logFile, err := os.Create(logPath) // truncates what an earlier attempt left
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the JVM has its own descriptor once started

	args := append([]string(nil), jvmFlags...)
	args = append(args, systemProps(opts.SystemProps)...)
	classpath := strings.Join(append([]string{filepath.Join(lib, "*"), confDir}, opts.Classpath...), string(filepath.ListSeparator))
	args = append(args, "-cp", classpath, main, cfg)
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", java, err)
	}

	s := &Server{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Dir:     dir,
		LogFile: logPath,
		cmd:     cmd,
		exited:  make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// zooCfg returns the contents of zoo.cfg.
func zooCfg(dataDir string, port int, extra []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=2000\n")
	fmt.Fprintf(&b, "dataDir=%s\n", dataDir)
	fmt.Fprintf(&b, "clientPort=%d\n", port)
	fmt.Fprintf(&b, "clientPortAddress=127.0.0.1\n") // not reachable from other machines
	fmt.Fprintf(&b, "maxClientCnxns=0\n")
	fmt.Fprintf(&b, "admin.enableServer=false\n")
	fmt.Fprintf(&b, "4lw.commands.whitelist=*\n")
	for _, line := range extra {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// systemProps returns props as -Dkey=value flags, sorted by key.
func systemProps(props map[string]string) []string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	flags := make([]string, 0, len(keys))
	for _, k := range keys {
		flags = append(flags, "-D"+k+"="+props[k])
	}
	return flags
}

// waitReady polls the server until it answers srvr with a Mode (ruok answers imok before the
// server serves requests, so it is no use here), then checks with conf that the answer came
// from this server and not from another that took the port first. A member of an ensemble with
// readonlymode.enabled answers "Mode: read-only" until its quorum is formed, and refuses the
// sessions of clients that do not ask for read-only: it is not ready then.
func (s *Server) waitReady(dataDir string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.exited:
			log := logTail(s.LogFile)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("%s: %w: the JVM could not bind it", s.Addr, errPortInUse)
			}
			return fmt.Errorf("%s: JVM exited (%v) before serving; log:\n%s", s.Addr, s.waitErr, log)
		default:
		}
		if out, err := FourLetterWord(s.Addr, "srvr", probeTimeout); err == nil && strings.Contains(out, "Mode: ") && !strings.Contains(out, "Mode: read-only") {
			conf, err := FourLetterWord(s.Addr, "conf", probeTimeout)
			if err != nil {
				return fmt.Errorf("%s: conf: %w", s.Addr, err)
			}
			if !strings.Contains(conf, "dataDir="+dataDir) {
				return fmt.Errorf("%s: %w: another server answers there", s.Addr, errPortInUse)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not serving after %v; log:\n%s", s.Addr, startTimeout, logTail(s.LogFile))
		}
		time.Sleep(pollInterval)
	}
}

// logTail returns the last lines of the log at path, or why it cannot.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTailBytes {
		if _, err := f.Seek(-logTailBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log: %v)", err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	out := string(bytes.Join(lines, []byte("\n")))
	if strings.TrimSpace(out) == "" {
		return "(log is empty)"
	}
	return out
}

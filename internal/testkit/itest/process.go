package itest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// BuildZetcd builds cmd/zetcd once per test binary.
var BuildZetcd = GoBinary("github.com/zetcd/zetcd/cmd/zetcd", "zetcd")

// GoBinary returns a function that builds package pkg into a temporary directory as name, the
// first time it is called, and returns the binary's path (or the build's failure) every time.
func GoBinary(pkg, name string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", name+"-bin")
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return bin, nil
	})
}

// ZetcdProcess is the real zetcd binary running with an embedded etcd in dataDir.
type ZetcdProcess struct {
	Cmd  *exec.Cmd
	Addr string
	Logs *strings.Builder // guarded by mu
	mu   *sync.Mutex
	Done chan struct{}
}

// LogText returns what the process has logged so far.
func (p *ZetcdProcess) LogText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Logs.String()
}

// LogOnFailure makes t print the process's log, under name, if the test fails: at its end,
// before the process is killed, with every goroutine's stack (SIGQUIT makes Go write them as
// the process ends).
func (p *ZetcdProcess) LogOnFailure(t testing.TB, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		p.Cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.Done:
		case <-time.After(5 * time.Second):
		}
		t.Logf("%s's log:\n%s", name, p.LogText())
	})
}

// FreePort returns a loopback address whose port was free a moment ago, for a process the test
// starts to listen on. The port is picked below the kernel's ephemeral range, where outgoing
// connections take their source ports: a port from that range (what listening on port 0 gives)
// can be taken by any connection, such as etcd members dialling each other, before the process
// binds it. Without such a range to pick below, it falls back to port 0.
func FreePort(t testing.TB) string {
	t.Helper()
	if low := EphemeralLow(); low > 2048 {
		base := max(1024, low-16384)
		for range 100 {
			addr := fmt.Sprintf("127.0.0.1:%d", base+rand.IntN(low-base))
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// EphemeralLow is the first port of the kernel's ephemeral range, or 0 when unknown.
var EphemeralLow = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	low, _ := strconv.Atoi(strings.Fields(string(b) + " 0")[0])
	return low
})

// StartProcessArgs runs zetcd on addr with the given extra flags and waits until ruok works.
func StartProcessArgs(t testing.TB, addr string, args ...string) *ZetcdProcess {
	t.Helper()
	bin, err := BuildZetcd()
	if err != nil {
		t.Fatal(err)
	}
	p := &ZetcdProcess{Addr: addr, Logs: &strings.Builder{}, mu: &sync.Mutex{}, Done: make(chan struct{})}
	p.Cmd = exec.Command(bin, append([]string{"--zkaddr", addr, "--log-level", "warn"}, args...)...)
	stderr, err := p.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			p.mu.Lock()
			p.Logs.WriteString(s.Text() + "\n")
			p.mu.Unlock()
		}
		p.Cmd.Wait()
		close(p.Done)
	}()
	t.Cleanup(func() { p.Kill() })
	testenv.Eventually(t, 60*time.Second, "zetcd on "+addr+" answering ruok", func() error {
		select {
		case <-p.Done:
			t.Fatalf("zetcd exited during start:\n%s", p.LogText())
		default:
		}
		if out, err := FourLetter(addr, "ruok"); err != nil || out != "imok" {
			return fmt.Errorf("ruok: %q, %v", out, err)
		}
		return nil
	})
	return p
}

// Kill ends the process with SIGKILL and waits for it to exit.
func (p *ZetcdProcess) Kill() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Done
}

// Stop ends the process with SIGTERM and waits up to 30s for it to exit (the test fails, and
// the process is killed, if it does not).
func (p *ZetcdProcess) Stop(t testing.TB) {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Errorf("zetcd did not exit 30s after SIGTERM")
		p.Kill()
	}
}

// FourLetter sends the four-letter word cmd to addr and returns what the server wrote before it
// closed the connection.
func FourLetter(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var sb strings.Builder
	buf := make([]byte, 1024)
	for {
		n, err := conn.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String(), nil
		}
	}
}

// CheckAcknowledged checks that every acknowledged write of a load is there: each create in
// acked (path → data) with its data, and each counter node counterPrefix<i> at least at the
// last value acknowledged for it. It returns the number of creates checked.
func CheckAcknowledged(t *testing.T, c *zk.Conn, acked *sync.Map, counterPrefix string, lastSet []atomic.Int64) int {
	t.Helper()
	n := 0
	acked.Range(func(k, v any) bool {
		data, _, err := c.Get(k.(string))
		if err != nil || string(data) != v.(string) {
			t.Errorf("acknowledged %s=%q: now %q, %v", k, v, data, err)
		}
		n++
		return true
	})
	for i := range lastSet {
		data, _, err := c.Get(fmt.Sprintf("%s%d", counterPrefix, i))
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		fmt.Sscan(string(data), &got)
		if got < lastSet[i].Load() {
			t.Errorf("%s%d = %d, but %d was acknowledged", counterPrefix, i, got, lastSet[i].Load())
		}
	}
	return n
}

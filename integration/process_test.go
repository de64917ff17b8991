package integration

import (
	"bufio"
	"context"
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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// buildZetcd builds cmd/zetcd once per test binary.
var buildZetcd = goBinary("github.com/zetcd/zetcd/cmd/zetcd", "zetcd")

// goBinary returns a function that builds package pkg into a temporary directory as name, the
// first time it is called, and returns the binary's path (or the build's failure) every time.
func goBinary(pkg, name string) func() (string, error) {
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

// zetcdProcess is the real zetcd binary running with an embedded etcd in dataDir.
type zetcdProcess struct {
	cmd  *exec.Cmd
	Addr string
	logs *strings.Builder // guarded by mu
	mu   *sync.Mutex
	done chan struct{}
}

// logText returns what the process has logged so far.
func (p *zetcdProcess) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// logOnFailure makes t print the process's log, under name, if the test fails: at its end,
// before the process is killed, with every goroutine's stack (SIGQUIT makes Go write them as
// the process ends).
func (p *zetcdProcess) logOnFailure(t testing.TB, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		t.Logf("%s's log:\n%s", name, p.logText())
	})
}

// freePort returns a loopback address whose port was free a moment ago, for a process the test
// starts to listen on. The port is picked below the kernel's ephemeral range, where outgoing
// connections take their source ports: a port from that range (what listening on port 0 gives)
// can be taken by any connection, such as etcd members dialling each other, before the process
// binds it. Without such a range to pick below, it falls back to port 0.
func freePort(t testing.TB) string {
	t.Helper()
	if low := ephemeralLow(); low > 2048 {
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

// ephemeralLow is the first port of the kernel's ephemeral range, or 0 when unknown.
var ephemeralLow = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	low, _ := strconv.Atoi(strings.Fields(string(b) + " 0")[0])
	return low
})

// startProcess runs zetcd on addr with its embedded etcd in dataDir and waits until ruok works.
func startProcess(t testing.TB, dataDir, addr string) *zetcdProcess {
	t.Helper()
	return startProcessArgs(t, addr, "--data-dir", dataDir)
}

// startProcessArgs runs zetcd on addr with the given extra flags and waits until ruok works.
func startProcessArgs(t testing.TB, addr string, args ...string) *zetcdProcess {
	t.Helper()
	bin, err := buildZetcd()
	if err != nil {
		t.Fatal(err)
	}
	p := &zetcdProcess{Addr: addr, logs: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--zkaddr", addr, "--log-level", "warn"}, args...)...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			p.mu.Lock()
			p.logs.WriteString(s.Text() + "\n")
			p.mu.Unlock()
		}
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	testenv.Eventually(t, 60*time.Second, "zetcd on "+addr+" answering ruok", func() error {
		select {
		case <-p.done:
			t.Fatalf("zetcd exited during start:\n%s", p.logText())
		default:
		}
		if out, err := fourLetter(addr, "ruok"); err != nil || out != "imok" {
			return fmt.Errorf("ruok: %q, %v", out, err)
		}
		return nil
	})
	return p
}

func (p *zetcdProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *zetcdProcess) stop(t testing.TB) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("zetcd did not exit 30s after SIGTERM")
		p.kill()
	}
}

func fourLetter(addr, cmd string) (string, error) {
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

// TestProcessKill9KeepsAcknowledgedWrites: zetcd is killed with SIGKILL in the middle of a write
// load; after a restart on the same data directory every write that was acknowledged is there.
func TestProcessKill9KeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	dataDir := t.TempDir()
	addr := freePort(t)
	p := startProcess(t, dataDir, addr)

	setup := connect(t, addr)
	if _, err := setup.Create("/load", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	setup.Close()

	// Writers create sequential nodes and set a counter node; they record what was acknowledged.
	const writers = 8
	var acked sync.Map // path -> data
	var lastSet [writers]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var total atomic.Int64
	for w := 0; w < writers; w++ {
		c := connect(t, addr)
		counter := fmt.Sprintf("/load/counter-%d", w)
		if _, err := c.Create(counter, []byte("0"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := fmt.Sprintf("w%d-%d", w, i)
				path, err := c.Create("/load/n-", []byte(data), zk.FlagSequence, openACL)
				if err != nil {
					return // the server died: anything not acknowledged may be lost
				}
				acked.Store(path, data)
				if _, err := c.Set(counter, []byte(fmt.Sprint(i)), -1); err != nil {
					return
				}
				lastSet[w].Store(int64(i))
				total.Add(1)
			}
		}()
	}
	time.Sleep(2 * time.Second)
	p.kill()
	close(stop)
	wg.Wait()
	if total.Load() == 0 {
		t.Fatal("no write was acknowledged before the kill")
	}

	p2 := startProcess(t, dataDir, addr)
	c := connect(t, addr)
	n := checkAcknowledged(t, c, &acked, "/load/counter-", lastSet[:])
	t.Logf("%d acknowledged creates (and %d sets) all present after kill -9 and restart", n, total.Load())
	p2.stop(t)
}

// checkAcknowledged checks that every acknowledged write of a load is there: each create in
// acked (path → data) with its data, and each counter node counterPrefix<i> at least at the
// last value acknowledged for it. It returns the number of creates checked.
func checkAcknowledged(t *testing.T, c *zk.Conn, acked *sync.Map, counterPrefix string, lastSet []atomic.Int64) int {
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

// TestProcessResumeOnAnotherZetcd: two zetcd servers on one etcd; a session opened on one is
// resumed on the other with its ephemeral node, and the first server does not expire it later.
func TestProcessResumeOnAnotherZetcd(t *testing.T) {
	cluster := startEtcd(t)
	a := startZetcdOn(t, cluster)
	b := startZetcdOn(t, cluster)

	ca := dialRaw(t, a.Addr)
	sess, err := ca.handshake(encoding.ConnectRequest{TimeOut: 4000, HasReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var cr encoding.CreateResponse
	if code := ca.mustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/owned", ACL: rawOpenACL, Flags: encoding.ModeEphemeral}, &cr); code != 0 {
		t.Fatal(code)
	}
	hdr, err := ca.call(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{})
	if err != nil {
		t.Fatal(err)
	}
	ca.close() // the client loses its server

	cb := dialRaw(t, b.Addr)
	resp, err := cb.handshake(encoding.ConnectRequest{SessionID: sess.SessionID, Passwd: sess.Passwd, TimeOut: 4000, HasReadOnly: true, LastZxidSeen: hdr.Zxid})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionID != sess.SessionID || resp.TimeOut != 4000 {
		t.Fatalf("resume on the second zetcd: %+v", resp)
	}
	// Keep the session alive on b well past the timeout a would have expired it at.
	for i := 0; i < 7; i++ {
		var ex encoding.ExistsResponse
		if code := cb.mustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/owned"}, &ex); code != 0 {
			t.Fatalf("after %ds on the second zetcd: exists /owned: %v", i, code)
		}
		if ex.Stat.EphemeralOwner != sess.SessionID {
			t.Fatalf("owner %v, want %v", ex.Stat.EphemeralOwner, sess.SessionID)
		}
		time.Sleep(time.Second)
	}
	// Ending it on b removes the ephemeral, seen from a.
	if hdr, err := cb.call(encoding.OpCloseSession, nil, nil); err != nil || hdr.Err != 0 {
		t.Fatalf("closeSession: %+v %v", hdr, err)
	}
	other := connectRaw(t, a.Addr)
	if code := other.mustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/owned"}, nil); code != encoding.ErrNoNode {
		t.Errorf("ephemeral after closeSession on the other zetcd: %v", code)
	}
}

// TestProcessKill9OrphanedSession: the zetcd serving a session is killed with SIGKILL and the
// client never comes back. Another zetcd on the same etcd ends the session at its timeout as
// ZooKeeper expires one: the ephemeral is deleted, the watch held on the other zetcd fires, and
// the parent's pzxid is the zxid of that deletion (etcd's own lease expiry would leave it
// behind, and a reconnecting client's setWatches catch-up would miss the change).
func TestProcessKill9OrphanedSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	// The owner's client goes silent, and its zetcd is killed right then or a while later: the
	// session ends no earlier than its timeout after the client's last packet, and not long
	// after (the lease's keepalive cadence and grace; etcdstore's leaseTTL).
	for _, killAfter := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run(fmt.Sprintf("killed%v", killAfter), func(t *testing.T) { killOrphanedSession(t, killAfter) })
	}
}

func killOrphanedSession(t *testing.T, killAfter time.Duration) {
	const timeout = 4 * time.Second
	cluster := startEtcd(t)
	endpoint := cluster.Etcd.Endpoint
	a := startProcessArgs(t, freePort(t), "--endpoints", endpoint)
	b := startProcessArgs(t, freePort(t), "--endpoints", endpoint)

	owner := connectRawTimeout(t, a.Addr, int32(timeout/time.Millisecond))
	owner.mustCreate("/o", nil, 0)
	watcher := connectRawTimeout(t, b.Addr, 40000)
	owner.mustCreate("/o/e", nil, encoding.ModeEphemeral)
	lastPacket := time.Now() // the owner sends nothing more
	// The ephemeral was created through the other zetcd: as on a ZooKeeper follower, a read
	// here sees it once this zetcd has applied it, which sync waits for. Without it the child
	// watch could be set before, and spent on, the create.
	if code := watcher.mustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/o"}, &encoding.SyncResponse{}); code != 0 {
		t.Fatal(code)
	}
	if code := watcher.watch("getChildren", "/o"); code != 0 {
		t.Fatal(code)
	}
	before, _ := watcher.stat("/o")

	waitTakenKeys(t, endpoint, 5*time.Second, 2, "two taken keys with two zetcd processes")
	time.Sleep(killAfter)
	a.kill()
	watcher.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	hdr, body, err := watcher.readReply()
	if err != nil {
		t.Fatalf("no event within 30s of the kill: %v", err)
	}
	ended := time.Since(lastPacket)
	var ev encoding.WatcherEvent
	if err := encoding.DecodeRecord(body, &ev); err != nil || hdr.Xid != encoding.XidNotification {
		t.Fatalf("want a notification, got %+v (%v)", hdr, err)
	}
	if ev.Type != encoding.EventNodeChildrenChanged || ev.Path != "/o" {
		t.Fatalf("event %v %s, want NodeChildrenChanged /o", ev.Type, ev.Path)
	}
	const late = 10 * time.Second // keepalive cadence (lease TTL/3) plus grace, with room
	if ended < timeout || ended > timeout+late {
		t.Errorf("the session ended %v after its client's last packet; want between its timeout %v and %v", ended, timeout, timeout+late)
	}
	t.Logf("the session ended %v after its client's last packet (timeout %v)", ended, timeout)
	after, _ := watcher.stat("/o")
	if after.Pzxid != hdr.Zxid || after.NumChildren != 0 || after.Cversion != before.Cversion+1 {
		t.Errorf("parent after the expiry: pzxid %d numChildren %d cversion %d; want pzxid %d (the event's zxid), 0, %d",
			after.Pzxid, after.NumChildren, after.Cversion, hdr.Zxid, before.Cversion+1)
	}
	// The killed process's taken key (etcdstore/keys.go) goes once its last session has ended;
	// the live one's stays.
	waitTakenKeys(t, endpoint, 5*time.Second, 1, "one taken key (the live zetcd's) after the killed process's last session ended")
}

// waitTakenKeys waits up to wait for the zetcd processes' taken keys under the default prefix
// to number want.
func waitTakenKeys(t *testing.T, endpoint string, wait time.Duration, want int, what string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	testenv.Eventually(t, wait, what, func() error {
		r, err := cli.Get(context.Background(), "/zk/t/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if int(r.Count) != want {
			return fmt.Errorf("%d taken keys", r.Count)
		}
		return nil
	})
}

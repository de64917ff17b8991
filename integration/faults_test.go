package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
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

// Fault tests: a three-member etcd cluster and zetcd processes, each a real process that the
// test pauses (SIGSTOP) and kills (SIGKILL) while clients work. What must hold (DESIGN.md, "The
// guarantees we keep"): no session is expired while its client keeps talking to a live zetcd,
// whatever etcd does for less than the session timeout; a session whose client went away
// expires no earlier than its timeout after the client's last packet, and not long after.

// buildEtcdMember builds the etcd member binary (tools/bench/benchetcd) once per test binary.
var buildEtcdMember = goBinary("github.com/zetcd/zetcd/tools/bench/benchetcd", "benchetcd")

// etcdMember is one member of a test's etcd cluster, running as its own process.
type etcdMember struct {
	name, clientURL string
	cmd             *exec.Cmd
	ready           <-chan error  // start's report: nil once serving, else why not
	exited          chan struct{} // closed once cmd has exited
	pid             atomic.Int64  // cmd's process, as last started, for peerNet's goroutines
}

// signal sends sig to the member's process (SIGSTOP pauses it, SIGCONT resumes it).
func (m *etcdMember) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to etcd member %s: %v", sig, m.name, err)
	}
}

// startEtcdCluster starts a new three-member etcd cluster on loopback and waits until every
// member serves. The members are killed when the test ends. A cluster whose member found its
// port taken (freePort's port is free only until another process binds it) is started again on
// other ports, at most three times in all.
//
// With pn, the members talk to each other through its proxies, which can cut them off.
func startEtcdCluster(t *testing.T, pn *peerNet) []*etcdMember {
	t.Helper()
	bin, err := buildEtcdMember()
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		members, err := tryEtcdCluster(t, bin, pn)
		if err == nil {
			return members
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("etcd cluster, attempt %d: %v; starting it again on other ports", attempt, err)
	}
}

// tryEtcdCluster starts three members on fresh ports (behind pn's proxies, if set) and waits
// until each serves. On an error it has killed the members it started.
func tryEtcdCluster(t *testing.T, bin string, pn *peerNet) ([]*etcdMember, error) {
	const n = 3
	peers, listens := make([]string, n), make([]string, n)
	var cluster []string
	for i := range peers {
		listens[i] = freePort(t)
		peers[i] = listens[i]
		if pn != nil {
			p, err := pn.listen(i, listens[i])
			if err != nil {
				return nil, err
			}
			peers[i] = p
		}
		cluster = append(cluster, fmt.Sprintf("m%d=http://%s", i+1, peers[i]))
	}
	members := make([]*etcdMember, n)
	for i := range members {
		members[i] = &etcdMember{name: fmt.Sprintf("m%d", i+1), clientURL: "http://" + freePort(t)}
	}
	if pn != nil {
		pn.setMembers(members)
	}
	for i, m := range members {
		m.start(t, bin, "--data-dir", t.TempDir(), "--listen", m.clientURL, "--name", m.name,
			"--peer", "http://"+peers[i], "--listen-peer", "http://"+listens[i], "--initial-cluster", strings.Join(cluster, ","))
	}
	for _, m := range members {
		if err := m.waitServing(); err != nil {
			for _, m := range members {
				m.kill()
			}
			return nil, err
		}
	}
	return members, nil
}

// start runs the member's process as bin args; it is killed when the test ends. waitServing
// tells when it serves.
func (m *etcdMember) start(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder // read only after cmd.Wait, which waits for its copying
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, exited := make(chan error, 1), make(chan struct{})
	m.cmd, m.ready, m.exited = cmd, ready, exited
	m.pid.Store(int64(cmd.Process.Pid))
	t.Cleanup(m.kill)
	go func() {
		defer close(exited)
		s := bufio.NewScanner(out)
		served := false
		for s.Scan() {
			if !served && strings.HasPrefix(s.Text(), "ready ") {
				served = true
				ready <- nil
			}
		}
		err := cmd.Wait()
		if !served {
			ready <- fmt.Errorf("etcd member %s exited before serving (%v): %s", m.name, err, strings.TrimSpace(stderr.String()))
		}
	}()
}

// waitServing waits until the member's process, as last started, serves; an error says it
// exited first (with what it printed on stderr) or did not serve within 60 s.
func (m *etcdMember) waitServing() error {
	select {
	case err := <-m.ready:
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("etcd member %s did not serve within 60s", m.name)
	}
}

// kill kills the member's process, as last started, and waits for it to exit; it may be called
// more than once.
func (m *etcdMember) kill() {
	m.cmd.Process.Signal(syscall.SIGCONT)
	m.cmd.Process.Kill()
	<-m.exited
}

// faultCluster is startEtcdCluster for a fault test, which -short skips.
func faultCluster(t *testing.T) []*etcdMember {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an etcd cluster and zetcd as processes")
	}
	return startEtcdCluster(t, nil)
}

// partitionCluster is faultCluster with members that pn can cut off from each other.
func partitionCluster(t *testing.T) (*peerNet, []*etcdMember) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an etcd cluster and zetcd as processes")
	}
	pn := newPeerNet(t)
	return pn, startEtcdCluster(t, pn)
}

// zetcdOn runs a zetcd process in front of the members ms.
func zetcdOn(t *testing.T, ms []*etcdMember) *zetcdProcess {
	t.Helper()
	return startProcessArgs(t, freePort(t), "--endpoints", clusterEndpoints(ms))
}

// clusterEndpoints is the members' client URLs, comma-separated, for zetcd's --endpoints.
func clusterEndpoints(ms []*etcdMember) string {
	var urls []string
	for _, m := range ms {
		urls = append(urls, m.clientURL)
	}
	return strings.Join(urls, ",")
}

// clusterLeader returns the member that leads the cluster now.
func clusterLeader(t *testing.T, ms []*etcdMember) *etcdMember {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(clusterEndpoints(ms), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var leader *etcdMember
	testenv.Eventually(t, 10*time.Second, "an etcd leader", func() error {
		for _, m := range ms {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.clientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				leader = m
				return nil
			}
		}
		return errors.New("no member is the leader")
	})
	return leader
}

// followersOf is the members of ms other than leader.
func followersOf(ms []*etcdMember, leader *etcdMember) []*etcdMember {
	var fs []*etcdMember
	for _, m := range ms {
		if m != leader {
			fs = append(fs, m)
		}
	}
	return fs
}

// talkingSession is a go-zookeeper session on one zetcd that keeps talking (its client pings
// every third of the timeout) and records whether it was ever told its session expired.
type talkingSession struct {
	conn    *zk.Conn
	expired atomic.Bool
}

// startTalking opens a talking session on addrs with an ephemeral node at path.
func startTalking(t *testing.T, addrs []string, timeout time.Duration, path string) *talkingSession {
	t.Helper()
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	s := &talkingSession{conn: conn}
	go func() {
		for ev := range events {
			if ev.State == zk.StateExpired {
				s.expired.Store(true)
			}
		}
	}()
	t.Cleanup(conn.Close)
	if _, err := conn.Create(path, nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatalf("talking session: create %s: %v", path, err)
	}
	return s
}

// leaveAfterEphemeral opens a raw session with the given timeout on addr, creates an
// ephemeral node at path, and goes away at once (closes its socket): it returns the time of
// the client's last packet.
func leaveAfterEphemeral(t *testing.T, addr, path string, timeout time.Duration) time.Time {
	t.Helper()
	c := connectRawTimeout(t, addr, int32(timeout/time.Millisecond))
	c.mustCreate(path, nil, encoding.ModeEphemeral)
	last := time.Now()
	c.close()
	return last
}

// waitNodeGone polls observer until path is gone and returns how long after since that was; it
// fails the test after limit. Each poll syncs first: the node was created through another
// zetcd, which the observer's may not have applied yet (a read there could miss the node that is
// still there, as on a ZooKeeper follower).
func waitNodeGone(t *testing.T, observer *zk.Conn, path string, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	testenv.Eventually(t, time.Until(since.Add(limit)), path+" gone after its client went away", func() error {
		_, serr := observer.Sync(path)
		ok, _, err := observer.Exists(path)
		if serr != nil || err != nil || ok {
			return fmt.Errorf("sync %v, exists %v, %v", serr, ok, err)
		}
		return nil
	})
	return time.Since(since)
}

// leftInBounds waits for the ephemeral /leave of the session whose client went away at
// lastPacket (leaveAfterEphemeral) to go, and checks when.
func leftInBounds(t *testing.T, observer *zk.Conn, lastPacket time.Time, timeout time.Duration) {
	t.Helper()
	expiryBounds(t, "the session that went away", waitNodeGone(t, observer, "/leave", lastPacket, timeout+20*time.Second), timeout)
}

// expiryBounds checks that a session that went away at lastPacket ended (after ended) no
// earlier than its timeout and no later than late after it.
func expiryBounds(t *testing.T, what string, ended, timeout time.Duration) {
	t.Helper()
	const late = 10 * time.Second // etcdstore's leaseTTL: keepalive cadence and grace, with room
	if ended < timeout || ended > timeout+late {
		t.Errorf("%s ended %v after its client's last packet; want between its timeout %v and %v", what, ended, timeout, timeout+late)
	} else {
		t.Logf("%s ended %v after its client's last packet (timeout %v)", what, ended, timeout)
	}
}

// stillTalking checks that the talking session was never expired and its ephemeral node is
// there, as an observer elsewhere sees it.
func stillTalking(t *testing.T, s *talkingSession, observer *zk.Conn, path string) {
	t.Helper()
	if s.expired.Load() {
		t.Errorf("a session whose client kept talking was expired")
	}
	// sync: the node was created through another zetcd (see waitNodeGone).
	if _, err := observer.Sync(path); err != nil {
		t.Errorf("sync before checking %s: %v", path, err)
	}
	if ok, _, err := observer.Exists(path); err != nil || !ok {
		t.Errorf("the talking session's ephemeral %s: exists %v (%v)", path, ok, err)
	}
}

// TestFaultEtcdLeaderPaused: the etcd leader is paused for 5 s, less than the session
// timeout, and a new one elected. zetcd A talks only to that member, so it is cut off from etcd
// for the whole pause and its process key lapses (it is alive all along); zetcd B talks to the
// two others, and its elected reaper adopts A's sessions. Sessions whose clients keep talking
// survive, on A and on B; a session whose client went away just before the pause ends no
// earlier than its timeout after its client's last packet.
func TestFaultEtcdLeaderPaused(t *testing.T) {
	const timeout = 8 * time.Second
	ms := faultCluster(t)
	leader := clusterLeader(t, ms)
	others := followersOf(ms, leader)
	a := startProcessArgs(t, freePort(t), "--endpoints", leader.clientURL)
	b := startProcessArgs(t, freePort(t), "--endpoints", clusterEndpoints(others))
	observer := connect(t, b.Addr)

	talkers := []*talkingSession{startTalking(t, []string{a.Addr}, timeout, "/talk0"), startTalking(t, []string{b.Addr}, timeout, "/talk1")}
	lastPacket := leaveAfterEphemeral(t, a.Addr, "/leave", timeout)

	leader.signal(t, syscall.SIGSTOP)
	time.Sleep(5 * time.Second)
	leader.signal(t, syscall.SIGCONT)

	leftInBounds(t, observer, lastPacket, timeout)
	time.Sleep(time.Until(lastPacket.Add(2 * timeout)))
	for i, s := range talkers {
		stillTalking(t, s, observer, fmt.Sprintf("/talk%d", i))
	}
}

// TestFaultEtcdMemberKilled: an etcd member (the leader) is killed outright while zetcd serves:
// sessions survive and writes go on; a session whose client went away ends in its bounds.
func TestFaultEtcdMemberKilled(t *testing.T) {
	const timeout = 4 * time.Second
	ms := faultCluster(t)
	a := zetcdOn(t, ms)
	observer := connect(t, a.Addr)
	talker := startTalking(t, []string{a.Addr}, timeout, "/talk")
	lastPacket := leaveAfterEphemeral(t, a.Addr, "/leave", timeout)
	a.logOnFailure(t, "zetcd")
	clusterLeader(t, ms).signal(t, syscall.SIGKILL)

	leftInBounds(t, observer, lastPacket, timeout)
	if _, err := talker.conn.Create("/after", []byte("x"), 0, openACL); err != nil {
		t.Errorf("write after an etcd member was killed: %v", err)
	}
	time.Sleep(time.Until(lastPacket.Add(3 * timeout)))
	stillTalking(t, talker, observer, "/talk")
}

// TestFaultZetcdPaused: a zetcd process is paused for 3 s (its process key lapses, so the
// elected zetcd adopts its sessions) and resumed: its clients, which only know it, keep their
// sessions; a session whose client went away ends in its bounds.
func TestFaultZetcdPaused(t *testing.T) {
	const timeout = 8 * time.Second
	ms := faultCluster(t)
	a := zetcdOn(t, ms)
	b := zetcdOn(t, ms)
	observer := connect(t, b.Addr)
	talker := startTalking(t, []string{a.Addr}, timeout, "/talk")
	lastPacket := leaveAfterEphemeral(t, a.Addr, "/leave", timeout)

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	leftInBounds(t, observer, lastPacket, timeout)
	time.Sleep(time.Until(lastPacket.Add(2 * timeout)))
	stillTalking(t, talker, observer, "/talk")
}

package faults

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Fault tests: a three-member etcd cluster and zetcd processes, each a real process that the
// test pauses (SIGSTOP) and kills (SIGKILL) while clients work. What must hold (docs/design.md,
// "Sessions and liveness"): no session is expired while its client keeps talking to a live zetcd,
// whatever etcd does for less than the session timeout; a session whose client went away
// expires no earlier than its timeout after the client's last packet, and not long after.

// partitionCluster is itest.FaultCluster with members that pn can cut off from each other.
func partitionCluster(t *testing.T) (*itest.PeerNet, []*itest.EtcdMember) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an etcd cluster and zetcd as processes")
	}
	pn := newPeerNet(t)
	return pn, itest.StartEtcdCluster(t, pn)
}

// followersOf is the members of ms other than leader.
func followersOf(ms []*itest.EtcdMember, leader *itest.EtcdMember) []*itest.EtcdMember {
	var fs []*itest.EtcdMember
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
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogInfo(false), zk.WithLogger(itest.QuietLogger{}))
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
// ephemeral node at path, and goes away at once (closes its socket): it returns the time the
// client sent its last packet, the create. The server heard it later, so a session ended no
// sooner than its timeout after it was heard ends no sooner than that after this time; the
// time of the create's reply would be up to the create's latency too late.
func leaveAfterEphemeral(t *testing.T, addr, path string, timeout time.Duration) time.Time {
	t.Helper()
	c := itest.ConnectRawTimeout(t, addr, int32(timeout/time.Millisecond))
	last := time.Now()
	c.MustCreate(path, nil, encoding.ModeEphemeral)
	c.Close()
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
	ms := itest.FaultCluster(t)
	leader := itest.ClusterLeader(t, ms)
	others := followersOf(ms, leader)
	a := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", leader.ClientURL)
	b := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(others))
	observer := connect(t, b.Addr)

	talkers := []*talkingSession{startTalking(t, []string{a.Addr}, timeout, "/talk0"), startTalking(t, []string{b.Addr}, timeout, "/talk1")}
	lastPacket := leaveAfterEphemeral(t, a.Addr, "/leave", timeout)

	leader.Signal(t, syscall.SIGSTOP)
	time.Sleep(5 * time.Second)
	leader.Signal(t, syscall.SIGCONT)

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
	ms := itest.FaultCluster(t)
	a := itest.ZetcdOn(t, ms)
	observer := connect(t, a.Addr)
	talker := startTalking(t, []string{a.Addr}, timeout, "/talk")
	lastPacket := leaveAfterEphemeral(t, a.Addr, "/leave", timeout)
	a.LogOnFailure(t, "zetcd")
	itest.ClusterLeader(t, ms).Signal(t, syscall.SIGKILL)

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
	ms := itest.FaultCluster(t)
	a := itest.ZetcdOn(t, ms)
	b := itest.ZetcdOn(t, ms)
	observer := connect(t, b.Addr)
	talker := startTalking(t, []string{a.Addr}, timeout, "/talk")
	lastPacket := leaveAfterEphemeral(t, a.Addr, "/leave", timeout)

	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	leftInBounds(t, observer, lastPacket, timeout)
	time.Sleep(time.Until(lastPacket.Add(2 * timeout)))
	stillTalking(t, talker, observer, "/talk")
}

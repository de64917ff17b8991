package faults

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestFaultEtcdQuorumLost: two of the three etcd members are frozen (SIGSTOP) for 20 s, more
// than three times the sessions' timeout: etcd has no quorum and commits nothing meanwhile.
//
// With two followers frozen, the leader steps down (etcd's CheckQuorum) and the members elect
// a leader once they are back, which extends every lease by its TTL, as a ZooKeeper leader
// elected after a lost quorum gives every session a fresh timeout: writes go on, and the
// sessions whose clients kept trying live on with their ephemeral nodes.
//
// With the leader and a follower frozen, the leader resumes and revokes every lease that it
// heard no refresh of for its TTL, leader still or not (TestFaultEtcdMemberFrozen says why).
// A session's lease outlives the outage by its margin (etcdstore's leaseTTL, 1.5 × timeout +
// 67 s, 76 s here), so the sessions live on in this case too. With a margin of 7 s instead
// (16 s here), the resumed leader would revoke every lease: the talking sessions would expire,
// and the departed one's ephemeral would go with etcd's expiry, its parent's pzxid left behind.
//
// In both, a session whose client went away before the outage ends, its ephemeral deleted
// and counted in its parent's cversion. Its zetcd's attempt to end it failed during the outage
// and is made again until it succeeds; with the leader back, it does before etcd's own expiry
// of the lease would, and the parent's pzxid moves as ZooKeeper's does.
func TestFaultEtcdQuorumLost(t *testing.T) {
	for _, frozen := range []string{"two followers", "the leader and a follower"} {
		t.Run(frozen, func(t *testing.T) {
			ms := itest.FaultCluster(t)
			leader := itest.ClusterLeader(t, ms)
			followers := followersOf(ms, leader)
			if frozen == "two followers" {
				quorumLost(t, ms, followers)
			} else {
				quorumLost(t, ms, []*itest.EtcdMember{leader, followers[0]})
			}
		})
	}
}

// quorumLost freezes the members frozen for 20 s under two zetcd processes on all of ms, with
// two talking sessions, which must live on, and one whose client went away, which must end
// exactly.
func quorumLost(t *testing.T, ms, frozen []*itest.EtcdMember) {
	const (
		timeout = 6 * time.Second
		outage  = 20 * time.Second
	)
	a, b := itest.ZetcdOn(t, ms), itest.ZetcdOn(t, ms)
	a.LogOnFailure(t, "zetcd a")
	b.LogOnFailure(t, "zetcd b")
	setup := connect(t, a.Addr)
	if _, err := setup.Create("/q", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	talkers := []*talkingSession{
		startTalking(t, []string{a.Addr}, timeout, "/q/talk0"),
		startTalking(t, []string{a.Addr, b.Addr}, timeout, "/q/talk1"),
	}
	leaveAfterEphemeral(t, b.Addr, "/q/leave", timeout)
	if _, err := setup.Sync("/q"); err != nil {
		t.Fatal(err)
	}
	_, before, err := setup.Get("/q")
	if err != nil {
		t.Fatal(err)
	}

	for _, m := range frozen {
		m.Signal(t, syscall.SIGSTOP)
	}
	time.Sleep(outage)
	for _, m := range frozen {
		m.Signal(t, syscall.SIGCONT)
	}
	back := time.Now()

	observer := connect(t, b.Addr)
	testenv.Eventually(t, 20*time.Second, "a write after the quorum came back", func() error {
		_, err := observer.Create("/after", nil, 0, openACL)
		return err
	})
	t.Logf("first write %v after the quorum came back", time.Since(back).Round(time.Millisecond))
	waitNodeGone(t, observer, "/q/leave", back, timeout+20*time.Second)
	time.Sleep(time.Until(back.Add(2 * timeout)))

	for i, s := range talkers {
		stillTalking(t, s, observer, fmt.Sprintf("/q/talk%d", i))
	}
	if _, err := observer.Sync("/q"); err != nil {
		t.Fatal(err)
	}
	_, after, err := observer.Get("/q")
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Cversion + 1; after.Cversion != want {
		t.Errorf("/q's cversion %d after /q/leave's delete, want %d (%d before)", after.Cversion, want, before.Cversion)
	}
	t.Logf("/q: czxid %#x, pzxid %#x before the outage, %#x after", before.Czxid, before.Pzxid, after.Pzxid)
	// A zetcd ends a session exactly, its parents' pzxid moved; etcd's own expiry of a lease
	// (or its revocation by a resumed leader) deletes the nodes alone.
	if after.Pzxid <= before.Pzxid {
		t.Errorf("/q's pzxid %#x after its child's delete, want past %#x: the departed session was left to etcd's lease expiry", after.Pzxid, before.Pzxid)
	}
}

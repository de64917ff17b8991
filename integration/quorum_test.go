package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"
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
// heard no refresh of for its TTL (11 s here), leader still or not (TestFaultEtcdMemberFrozen
// says why): etcd ends those sessions, as a ZooKeeper leader's session tracker, which also runs
// on the leader's own clock, would find them untouched after a pause. That is not a choice
// zetcd makes; what it must do is end them exactly: each
// client is told its session expired (none is lost silently), and their ephemerals go with
// their parent's cversion counting every delete. Either outcome is checked for that.
//
// In both, a session whose client went away before the outage ends, its ephemeral deleted
// and counted in its parent's cversion. Its zetcd's attempt to end it failed during the outage
// and is made again until it succeeds; with the leader back, it does before etcd's own expiry
// of the lease would, and the parent's pzxid moves as ZooKeeper's does.
func TestFaultEtcdQuorumLost(t *testing.T) {
	for _, frozen := range []string{"two followers", "the leader and a follower"} {
		t.Run(frozen, func(t *testing.T) {
			ms := faultCluster(t)
			leader := clusterLeader(t, ms)
			followers := followersOf(ms, leader)
			if frozen == "two followers" {
				quorumLost(t, ms, followers, true)
			} else {
				quorumLost(t, ms, []*etcdMember{leader, followers[0]}, false)
			}
		})
	}
}

// quorumLost freezes the members frozen for 20 s under two zetcd processes on all of ms, with
// two talking sessions and one whose client went away; with survive, the talking sessions must
// live on, else each may have been expired, but exactly.
func quorumLost(t *testing.T, ms, frozen []*etcdMember, survive bool) {
	const (
		timeout = 6 * time.Second
		outage  = 20 * time.Second
	)
	a, b := zetcdOn(t, ms), zetcdOn(t, ms)
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
		m.signal(t, syscall.SIGSTOP)
	}
	time.Sleep(outage)
	for _, m := range frozen {
		m.signal(t, syscall.SIGCONT)
	}
	back := time.Now()

	observer := connect(t, b.Addr)
	for {
		_, err := observer.Create("/after", nil, 0, openACL)
		if err == nil {
			break
		}
		if time.Since(back) > 20*time.Second {
			t.Fatalf("no write 20 s after the quorum came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("first write %v after the quorum came back", time.Since(back).Round(time.Millisecond))
	waitNodeGone(t, observer, "/q/leave", back, timeout+20*time.Second)
	time.Sleep(time.Until(back.Add(2 * timeout)))

	deletes := 1 // /q/leave's
	for i, s := range talkers {
		path := fmt.Sprintf("/q/talk%d", i)
		if survive || !s.expired.Load() {
			stillTalking(t, s, observer, path)
			continue
		}
		t.Logf("talking session %d was expired", i)
		deletes++
		if ok, _, err := observer.Exists(path); err != nil || ok {
			t.Errorf("the expired session's ephemeral %s: exists %v (%v)", path, ok, err)
		}
	}
	if _, err := observer.Sync("/q"); err != nil {
		t.Fatal(err)
	}
	_, after, err := observer.Get("/q")
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Cversion + int32(deletes); after.Cversion != want {
		t.Errorf("/q's cversion %d after %d deletes, want %d (%d before)", after.Cversion, deletes, want, before.Cversion)
	}
	t.Logf("/q: czxid %#x, pzxid %#x before the outage, %#x after", before.Czxid, before.Pzxid, after.Pzxid)
	// A zetcd ends a session exactly, its parents' pzxid moved; etcd's own expiry of a lease
	// deletes the nodes alone. The sessions the paused leader expired went that way.
	if survive && after.Pzxid <= before.Pzxid {
		t.Errorf("/q's pzxid %#x after its child's delete, want past %#x: the departed session was left to etcd's lease expiry", after.Pzxid, before.Pzxid)
	}
	if t.Failed() {
		t.Logf("zetcd a's log:\n%s", a.logText())
		t.Logf("zetcd b's log:\n%s", b.logText())
	}
}

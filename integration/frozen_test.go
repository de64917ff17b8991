package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestFaultEtcdMemberFrozen: an etcd follower, and in a second run the leader, is frozen
// (SIGSTOP) for 30 s while a zetcd that knows every member serves; the others elect a new leader
// if they must. The etcd client spreads its requests over the members, and
// the zetcd's streams (the watch feed, the sessions' keepalives) may be on the frozen one.
// Once the client's keepalive has given up on that member (--etcd-keepalive-time and -timeout:
// 13 s), writes and syncs carry on through the others, and a session whose client keeps
// talking keeps its session and its ephemeral node. Without the keepalive, the first write
// sent to the frozen member held every write of the zetcd for the committer's 30 s, and the
// session was lost.
func TestFaultEtcdMemberFrozen(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			ms := faultCluster(t)
			leader, frozen := clusterLeader(t, ms), ms[0]
			switch {
			case role == "leader":
				frozen = leader
			case frozen == leader:
				frozen = ms[1]
			}
			memberFrozen(t, ms, frozen)
		})
	}
}

// memberFrozen freezes the member frozen of ms for 30 s under a zetcd on all of ms, and checks
// that writes carry on once the keepalive has given up on it and that a talking session lives.
func memberFrozen(t *testing.T, ms []*etcdMember, frozen *etcdMember) {
	const (
		timeout = 8 * time.Second
		freeze  = 30 * time.Second
		settle  = 17 * time.Second // the etcd client's keepalive gives up on the frozen member
	)
	z := zetcdOn(t, ms)
	talker := startTalking(t, []string{z.Addr}, timeout, "/talk")
	writer := connect(t, z.Addr)
	if _, err := writer.Create("/frozen", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}

	frozen.signal(t, syscall.SIGSTOP)
	start := time.Now()
	var late []string
	ok := 0
	for i := 0; time.Since(start) < freeze; i++ {
		t0 := time.Now()
		_, err := writer.Set("/frozen", []byte(fmt.Sprint(i)), -1)
		if err == nil {
			_, err = writer.Sync("/frozen")
		}
		d := time.Since(t0)
		t.Logf("%5.1fs write %d: %v in %v", t0.Sub(start).Seconds(), i, err, d.Round(time.Millisecond))
		if t0.Sub(start) >= settle {
			if err != nil || d > 2*time.Second {
				late = append(late, fmt.Sprintf("%.1fs: %v in %v", t0.Sub(start).Seconds(), err, d.Round(time.Millisecond)))
			} else {
				ok++
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	frozen.signal(t, syscall.SIGCONT)
	if len(late) > 0 || ok == 0 {
		t.Errorf("writes from %v into the freeze on: %d answered in time, late or failed: %v", settle, ok, late)
	}
	stillTalking(t, talker, writer, "/talk")
	if t.Failed() {
		t.Logf("zetcd's log:\n%s", z.logText())
	}
}

package faults

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestFaultEtcdMemberFrozen: an etcd follower, and in a second run the leader, is frozen
// (SIGSTOP) for 20 s while a zetcd that knows every member serves; the others elect a new leader
// if they must. The etcd client spreads its requests over the members, and the zetcd's streams
// (the watch feed, the sessions' keepalives) may be on the frozen one. Once zetcd's member guard
// has left the frozen member out (--etcd-member-silence, 2 s, and a probe), closing its
// connections to it, writes and syncs carry on through the others; with the leader frozen, a
// write a follower forwarded to it before is failed then too (etcdstore's FailStuckWrites),
// where it waited for etcd's own request timeout (7 s with a 1 s election timeout). A session
// whose client keeps talking keeps its session and its ephemeral node. Without the guard, the
// gRPC keepalive would give the member up only after 13 s; without either, the first write sent
// to the frozen member would hold every write of the zetcd for the committer's 30 s, and the
// session would be lost.
func TestFaultEtcdMemberFrozen(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			ms := itest.FaultCluster(t)
			leader, frozen := itest.ClusterLeader(t, ms), ms[0]
			switch {
			case role == "leader":
				frozen = leader
			case frozen == leader:
				frozen = ms[1]
			}
			memberOut(t, ms, memberFault{
				what:  "frozen",
				begin: func() { frozen.Signal(t, syscall.SIGSTOP) },
				end:   func() { frozen.Signal(t, syscall.SIGCONT) },
			})
		})
	}
}

// memberFault is a fault of one etcd member that leaves it unable to answer zetcd, though its
// client port still takes connections: begin starts it, end ends it.
type memberFault struct {
	what       string // what the member is, for messages: "frozen", "cut off"
	begin, end func()
}

// memberOut puts one member of ms under the fault f for 20 s under a zetcd on all of ms, and
// checks that every write is answered by a settle time (4 s: the guard has left the member out)
// and 5 s, those sent after it in time, that a talking session lives, and that /metrics counts
// the member left out during the fault and not after.
func memberOut(t *testing.T, ms []*itest.EtcdMember, f memberFault) {
	const (
		settle = 4 * time.Second
		// A frozen leader that resumes revokes the leases it saw no refresh of for their TTL,
		// even once the others have elected a new leader and the leases were refreshed there
		// (its lessor acts before it learns that; etcd's check that the lessor is still the leader
		// passes as soon as its raft ticks again). The talking session's lease outlasts the
		// fault by its margin (etcdstore's leaseTTL: 1.5 × timeout + 67 s = 73 s); a margin of
		// a few seconds lets the resume end the talking session.
		timeout = 4 * time.Second
		length  = 20 * time.Second
	)
	maddr := itest.FreePort(t)
	z := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(ms), "--metrics-addr", maddr)
	z.LogOnFailure(t, "zetcd")
	leftOut := func() float64 { return itest.Scrape(t, "http://"+maddr+"/metrics")["zetcd_etcd_members_left_out"] }
	talker := startTalking(t, []string{z.Addr}, timeout, "/talk")
	writer := connect(t, z.Addr)
	if _, err := writer.Create("/out", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}

	f.begin()
	start := time.Now()
	var late []string
	ok := 0
	for i := 0; time.Since(start) < length; i++ {
		t0 := time.Now()
		_, err := writer.Set("/out", []byte(fmt.Sprint(i)), -1)
		if err == nil {
			_, err = writer.Sync("/out")
		}
		d := time.Since(t0)
		t.Logf("%5.1fs write %d: %v in %v", t0.Sub(start).Seconds(), i, err, d.Round(time.Millisecond))
		// A write sent before settle may fail (its connection closed), but is answered by
		// settle and 5 s; one sent after is answered within 5 s, and succeeds. (A write held
		// for the frozen member waits for etcd's request timeout, much longer.)
		sent, answered := t0.Sub(start), time.Since(start)
		switch {
		case answered > max(sent, settle)+5*time.Second || sent >= settle && err != nil:
			late = append(late, fmt.Sprintf("sent at %.1fs: %v in %v", sent.Seconds(), err, d.Round(time.Millisecond)))
		case sent >= settle:
			ok++
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := leftOut(); n != 1 {
		t.Errorf("zetcd_etcd_members_left_out %v with a member %s, want 1", n, f.what)
	}
	if len(late) > 0 || ok == 0 {
		t.Errorf("writes with a member %s (settle %v): %d sent after settle answered in time; late or failed: %v", f.what, settle, ok, late)
	}
	f.end()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("zetcd_etcd_members_left_out 0 once the member is %s no more", f.what), func() error {
		if n := leftOut(); n != 0 {
			return fmt.Errorf("zetcd_etcd_members_left_out %v", n)
		}
		return nil
	})
	stillTalking(t, talker, writer, "/talk")
}

package faults

import (
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestFaultZetcdCutOff: zetcd A talks only to one etcd member, which for 20 s is frozen (SIGSTOP),
// and in a second run cut off from the other members, while the two others carry on: A is alive
// but cut off from etcd. A cut-off member still answers on its client port what needs no leader,
// but nothing A needs (its sessions' lease refreshes, its watch feed). zetcd B talks to the two
// others; its reaper adopts A's sessions once A's process key lapses, and ends those whose leases
// A no longer refreshes. A must then do what a ZooKeeper follower does when it loses its leader:
// stop serving, by closing its clients' connections, so that
//   - a client that knows only A learns it is disconnected at least its timeout before its
//     session can be ended elsewhere, rather than go on believing it holds an ephemeral node
//     that B has deleted and another session may take (a lock held twice);
//   - a client that knows A and B moves to B and keeps its session and its ephemeral node.
func TestFaultZetcdCutOff(t *testing.T) {
	t.Run("frozen", func(t *testing.T) {
		zetcdCutOff(t, itest.FaultCluster(t), func(m *itest.EtcdMember) memberFault {
			return memberFault{
				what:  "frozen",
				begin: func() { m.Signal(t, syscall.SIGSTOP) },
				end:   func() { _ = m.Cmd.Process.Signal(syscall.SIGCONT) },
			}
		})
	})
	t.Run("partitioned", func(t *testing.T) {
		pn, ms := partitionCluster(t)
		zetcdCutOff(t, ms, func(m *itest.EtcdMember) memberFault {
			i := slices.Index(ms, m)
			return memberFault{what: "cut off", begin: func() { pn.Isolate(i) }, end: pn.Heal}
		})
	})
}

// zetcdCutOff runs TestFaultZetcdCutOff on the cluster ms, with fault as what befalls the member
// A talks to.
func zetcdCutOff(t *testing.T, ms []*itest.EtcdMember, fault func(*itest.EtcdMember) memberFault) {
	const (
		timeout = 4 * time.Second // the least zetcd grants: the narrowest window
		length  = 20 * time.Second
	)
	leader := itest.ClusterLeader(t, ms)
	var cut *itest.EtcdMember
	var others []*itest.EtcdMember
	for _, m := range ms {
		if m != leader && cut == nil {
			cut = m
		} else {
			others = append(others, m)
		}
	}
	f := fault(cut)
	a := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", cut.ClientURL)
	b := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(others))
	observer := connect(t, b.Addr)

	alone := startRecordedSession(t, []string{a.Addr}, a.Addr, timeout, "/alone")
	mover := startRecordedSession(t, []string{a.Addr, b.Addr}, a.Addr, timeout, "/mover")
	if _, err := observer.Sync("/alone"); err != nil {
		t.Fatal(err)
	}
	_, _, aloneGone, err := observer.ExistsW("/alone")
	if err != nil {
		t.Fatal(err)
	}

	f.begin()
	faultAt := time.Now()
	t.Cleanup(f.end)
	select {
	case ev := <-aloneGone:
		ended := time.Now()
		t.Logf("%v after the fault began: %v on /alone", ended.Sub(faultAt).Round(time.Millisecond), ev.Type)
		served, still := alone.lastServed()
		switch {
		case still:
			exists, _, err := alone.conn.Exists("/alone")
			t.Errorf("the session on the cut-off zetcd was ended elsewhere while its connection is still served (exists /alone there: %v, %v); its member %s", exists, err, f.what)
		case ended.Sub(served) < timeout:
			t.Errorf("the session on the cut-off zetcd was ended %v after its connection was last served; want at least its timeout %v",
				ended.Sub(served).Round(time.Millisecond), timeout)
		default:
			t.Logf("its connection was last served %v after the fault began, %v before the session ended",
				served.Sub(faultAt).Round(time.Millisecond), ended.Sub(served).Round(time.Millisecond))
		}
	case <-time.After(length):
		t.Errorf("the session that knows only the cut-off zetcd was not ended within %v", length)
	}
	// A's four-letter words say it is not serving, as a follower without a leader says.
	if out, err := itest.FourLetter(a.Addr, "mntr"); err != nil || !strings.Contains(out, "not currently serving") {
		t.Errorf("mntr on the cut-off zetcd: %q, %v; want the not-serving answer", out, err)
	}
	time.Sleep(time.Until(faultAt.Add(length)))

	// Still inside the fault: the session that could move is served by B, with its ephemeral.
	if mover.expired() {
		t.Errorf("the session that could move to the other zetcd was expired")
	}
	if st, srv := mover.conn.State(), mover.conn.Server(); st != zk.StateHasSession || srv != b.Addr {
		t.Errorf("the moving session: %v on %s; want it established on the other zetcd %s", st, srv, b.Addr)
	}
	if _, err := observer.Sync("/mover"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := observer.Exists("/mover"); err != nil || !ok {
		t.Errorf("the moving session's ephemeral /mover: exists %v (%v)", ok, err)
	}
	f.end()
}

// recordedSession is a go-zookeeper session whose connection states are recorded with the time
// they came.
type recordedSession struct {
	conn   *zk.Conn
	mu     sync.Mutex
	states []stateAt // guarded by mu
}

type stateAt struct {
	state zk.State
	at    time.Time
}

// startRecordedSession connects to servers until the session is established on first (the
// client shuffles its servers), then creates the ephemeral node path.
func startRecordedSession(t *testing.T, servers []string, first string, timeout time.Duration, path string) *recordedSession {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		conn, events, err := zk.Connect(servers, timeout, zk.WithLogInfo(false), zk.WithLogger(itest.QuietLogger{}))
		if err != nil {
			t.Fatal(err)
		}
		s := &recordedSession{conn: conn}
		established := make(chan struct{})
		var once sync.Once
		go func() {
			for ev := range events {
				if ev.Type != zk.EventSession {
					continue
				}
				s.mu.Lock()
				s.states = append(s.states, stateAt{ev.State, time.Now()})
				s.mu.Unlock()
				if ev.State == zk.StateHasSession {
					once.Do(func() { close(established) })
				}
			}
		}()
		select {
		case <-established:
		case <-time.After(10 * time.Second):
			t.Fatalf("session on %v: not established", servers)
		}
		if conn.Server() != first {
			conn.Close()
			continue
		}
		t.Cleanup(conn.Close)
		if _, err := conn.Create(path, nil, zk.FlagEphemeral, openACL); err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
		return s
	}
	t.Fatalf("no session on %s through %v after 50 attempts", first, servers)
	return nil
}

// lastServed is when the session's connection was last lost after being established, or still
// true if it is established now.
func (s *recordedSession) lastServed() (at time.Time, still bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	established := false
	for _, st := range s.states {
		switch st.state {
		case zk.StateHasSession:
			established = true
		case zk.StateDisconnected, zk.StateConnecting, zk.StateExpired:
			if established {
				at, established = st.at, false
			}
		}
	}
	return at, established
}

// expired reports whether the session was ever told it expired.
func (s *recordedSession) expired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.states {
		if st.state == zk.StateExpired {
			return true
		}
	}
	return false
}

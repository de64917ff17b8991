package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// TestEtcdOrphanedSessions: when the zetcd serving a session goes away and the client does not
// come back, the elected leader (another process) ends the session at its timeout exactly as
// its own zetcd would have: ephemerals deleted in one zxid that is also the parent's pzxid,
// cversion moved, events fired with that zxid. A session resumed elsewhere in time is kept. The
// dead process's taken key is collected once it has no sessions left.
func TestEtcdOrphanedSessions(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	leader := electedStore(t, cli)
	dying, _, _ := newTestBackendOn(t, cli, Config{})

	const timeout = 4 * time.Second
	orphan, err := dying.Connect(ctx, zetcd.ConnectParams{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := dying.Connect(ctx, zetcd.ConnectParams{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := orphan.Create(ctx, &encoding.CreateRequest{Path: "/p", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    zetcd.Session
		path string
	}{{orphan, "/p/orphan"}, {resumed, "/p/resumed"}} {
		if _, _, err := c.s.Create(ctx, &encoding.CreateRequest{Path: c.path, ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
			t.Fatal(err)
		}
	}

	sink := &zetcdtest.Events{}
	watching, err := leader.Connect(ctx, zetcd.ConnectParams{Timeout: 30 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/p", Watch: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: "/p/orphan", Watch: true}); err != nil {
		t.Fatal(err)
	}

	// The serving process goes away without ending its sessions; one client comes back
	// elsewhere within its timeout.
	dying.Close()
	gone := time.Now() // the orphan's client cannot have been heard later than this
	if _, err := leader.Connect(ctx, zetcd.ConnectParams{SessionID: resumed.ID(), Passwd: resumed.Password(), Timeout: timeout}); err != nil {
		t.Fatal(err)
	}

	var got []string
	limit := orphanLate(timeout) // well before etcd's expiry (leaseTTL)
	for deadline := time.Now().Add(limit); len(got) < 2; time.Sleep(50 * time.Millisecond) {
		got = append(got, sink.Take()...)
		if time.Now().After(deadline) {
			t.Fatalf("events after %v: %v; the orphaned session was not ended", limit, got)
		}
	}
	if ended := time.Since(gone); ended < timeout {
		t.Errorf("the orphaned session ended %v after its process, before its timeout %v", ended, timeout)
	} else {
		t.Logf("the orphaned session ended %v after its process (timeout %v)", ended, timeout)
	}
	resp, _, err := watching.GetData(ctx, &encoding.GetDataRequest{Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	z := resp.Stat.Pzxid
	want := []string{fmt.Sprintf("NodeDeleted /p/orphan @%d", z), fmt.Sprintf("NodeChildrenChanged /p @%d", z)}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v (the parent's pzxid is the zxid of the deletion)", got, want)
	}
	if resp.Stat.Cversion != 3 || resp.Stat.NumChildren != 1 {
		t.Errorf("parent cversion %d numChildren %d, want 3 and 1", resp.Stat.Cversion, resp.Stat.NumChildren)
	}
	if _, err := leader.Connect(ctx, zetcd.ConnectParams{SessionID: orphan.ID(), Passwd: orphan.Password(), Timeout: timeout}); !errors.Is(err, zetcd.ErrSessionExpired) {
		t.Errorf("resuming the orphaned session: %v, want ErrSessionExpired", err)
	}

	// With neither process key nor sessions, the dead process's taken key is collected; the
	// live process keeps its own.
	taken := func(s *Store) bool {
		r, err := cli.Get(ctx, s.keys.taken(s.process.id))
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Kvs) > 0
	}
	for deadline := time.Now().Add(3 * time.Second); taken(dying); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dead process's taken key is still there 3s after its last session ended")
		}
	}
	if !taken(leader) {
		t.Error("the live process's taken key was collected")
	}

	// The resumed session outlives its old process's lease TTL and timeout.
	time.Sleep(timeout + 2*time.Second)
	if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: "/p/resumed"}); err != nil {
		t.Errorf("the resumed session's ephemeral: %v", err)
	}
}

// TestEtcdOrphanOfLiveProcess: a process whose process key is gone (lost to an etcd stall, say)
// but which still serves its session keeps the session's lease refreshed, and the leader, which
// adopts the session, never ends it; once the process stops refreshing it (its client gone), the
// leader ends it, and no earlier than its timeout after that.
func TestEtcdOrphanOfLiveProcess(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	leader := electedStore(t, cli)
	checker, err := leader.Connect(ctx, zetcd.ConnectParams{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer checker.Detach()
	live, _, _ := newTestBackendOn(t, cli, Config{})
	const timeout = 2 * time.Second
	s, err := live.Connect(ctx, zetcd.ConnectParams{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, &encoding.CreateRequest{Path: "/e", ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, live.keys.process(live.process.id)); err != nil {
		t.Fatal(err)
	}
	late := orphanLate(timeout)
	deadline := time.Now().Add(late + 2*time.Second)
	for time.Now().Before(deadline) {
		if !nodeExists(t, checker, "/e") {
			t.Fatal("the leader ended a session whose process keeps its lease alive")
		}
		time.Sleep(200 * time.Millisecond)
	}

	s.Detach() // the client is gone: its process stops refreshing the lease
	gone := time.Now()
	for nodeExists(t, checker, "/e") {
		if time.Since(gone) > late {
			t.Fatalf("the session outlived its process by %v (its timeout, the keepalive cadence and a margin)", late)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ended := time.Since(gone); ended < timeout {
		t.Errorf("the session ended %v after its client was last heard, before its timeout %v", ended, timeout)
	} else {
		t.Logf("the session ended %v after its client was last heard (timeout %v)", ended, timeout)
	}
}

// orphanLate bounds how long after its process last refreshed its lease the leader ends an
// orphaned session of timeout timeout: no keepalive for the timeout and the cadence
// (orphanEndTTL), a second for etcd's truncated TTL, and two for the leader's reading of it.
// It does not depend on the lease's TTL.
func orphanLate(timeout time.Duration) time.Duration {
	return timeout + keepAliveCadence(timeout) + 3*time.Second
}

// nodeExists reads path through session s.
func nodeExists(t *testing.T, s zetcd.Session, path string) bool {
	t.Helper()
	_, _, err := s.Exists(context.Background(), &encoding.ExistsRequest{Path: path})
	if err != nil && !errors.Is(err, encoding.ErrNoNode) {
		t.Fatal(err)
	}
	return err == nil
}

// TestOrphanEndTTL: for every session timeout, with the default margin and with none, the lease
// leaves the leader a window before etcd's expiry, and ending at that window means no keepalive
// for the session timeout plus the keepalive cadence, and not longer with the margin than
// without: the margin lengthens the lease, not the orphan's life.
func TestOrphanEndTTL(t *testing.T) {
	minimal, dflt := &Store{leaseMargin: time.Nanosecond}, &Store{leaseMargin: defaultLeaseMargin}
	for timeout := 2 * time.Second; timeout <= 60*time.Second; timeout += 500 * time.Millisecond {
		cadence := keepAliveCadence(timeout)
		var silent [2]time.Duration
		for i, b := range []*Store{minimal, dflt} {
			granted := b.leaseTTL(timeout)
			end := orphanEndTTL(granted, timeout)
			if end < 2 {
				t.Errorf("timeout %v: lease %ds, end at %ds left: no window before etcd's expiry", timeout, granted, end)
			}
			// At a reading of end, the last keepalive is more than granted-end-1 seconds old.
			silent[i] = time.Duration(granted-end-1) * time.Second
			if silent[i] < timeout+cadence {
				t.Errorf("timeout %v: lease %ds, end at %ds left: silent %v < timeout + cadence %v", timeout, granted, end, silent[i], timeout+cadence)
			}
			// etcd's own expiry comes no earlier than timeout after the process stopped.
			if etcdExpiry := time.Duration(granted)*time.Second - cadence; etcdExpiry < timeout {
				t.Errorf("timeout %v: etcd may expire the lease %v after the process stopped", timeout, etcdExpiry)
			}
		}
		if silent[1] > silent[0]+time.Second {
			t.Errorf("timeout %v: an orphan ends after %v of silence with the margin, %v without", timeout, silent[1], silent[0])
		}
		// Each TTL is rounded up to whole seconds: the nanosecond costs at most one.
		if d := dflt.leaseTTL(timeout) - minimal.leaseTTL(timeout); d < int64(defaultLeaseMargin/time.Second)-1 {
			t.Errorf("timeout %v: the margin adds %ds to the lease, want %v", timeout, d, defaultLeaseMargin)
		}
	}
}

// electedStore is a Store on cli that has won the reaper's election: the one that ends orphans.
func electedStore(t *testing.T, cli *clientv3.Client) *Store {
	t.Helper()
	leader, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leader.Close)
	for deadline := time.Now().Add(10 * time.Second); !leader.reaper.leader.Load(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader was not elected within 10s")
		}
	}
	return leader
}

// TestOrphanAdoptionEndsWhenOwnerReturns: the leader adopts the sessions of a process whose
// process key went (an etcd stall), and stops watching them once that process has its key
// again: it ends its sessions itself.
func TestOrphanAdoptionEndsWhenOwnerReturns(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	leader := electedStore(t, cli)
	live, _, _ := newTestBackendOn(t, cli, Config{})
	s, err := live.Connect(ctx, zetcd.ConnectParams{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Detach()
	adopted := func() bool {
		leader.orphans.mu.Lock()
		defer leader.orphans.mu.Unlock()
		_, ok := leader.orphans.m[s.ID()]
		return ok
	}
	pk := live.keys.process(live.process.id)
	if _, err := cli.Delete(ctx, pk); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the leader adopts the session", adopted)
	if _, err := cli.Put(ctx, pk, ""); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the adoption ends", func() bool { return !adopted() })
	if !sessionKeyExists(t, leader, s) {
		t.Error("the session ended")
	}
}

// sessionKeyExists reports whether the session key of s is in etcd.
func sessionKeyExists(t *testing.T, b *Store, s zetcd.Session) bool {
	t.Helper()
	r, err := b.kv.Get(context.Background(), b.keys.session(s.ID()))
	if err != nil {
		t.Fatal(err)
	}
	return len(r.Kvs) == 1
}

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/migrate"
)

// migratingProcess is the zetcd binary in migration mode, which a test can kill.
type migratingProcess struct {
	*itest.ZetcdProcess
	metrics net.Addr
}

// startMigratingProcess runs the zetcd binary in migration mode from the ZooKeeper at zkAddr on
// the etcd at endpoints; it waits until the process is the copier if copier is set.
func startMigratingProcess(t *testing.T, zkAddr, endpoints string, copier bool) migratingProcess {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	maddr := itest.FreePort(t)
	p := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", endpoints, "--migrate-from", zkAddr, "--metrics-addr", maddr)
	p.LogOnFailure(t, "zetcd "+p.Addr)
	a, err := net.ResolveTCPAddr("tcp", maddr)
	testenv.Must(t, err)
	mp := migratingProcess{p, a}
	testenv.Eventually(t, 30*time.Second, "zetcd's /migrate on "+maddr, func() error {
		resp, err := http.Get("http://" + maddr + "/migrate")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if copier {
		testenv.Eventually(t, 30*time.Second, "zetcd "+p.Addr+" elected copier", func() error {
			if st := getStatus(t, a); st.Copier != st.Process {
				return fmt.Errorf("copier %q, process %q", st.Copier, st.Process)
			}
			return nil
		})
	}
	return mp
}

// sessionOn is a client of a migrating process holding an ephemeral.
type sessionOn struct {
	c    *cutoverClient
	id   int64
	from int
	path string
}

// ephemeralOn connects to addr and creates the ephemeral path, with a data watch on it.
func ephemeralOn(t *testing.T, addr, path string) sessionOn {
	t.Helper()
	c := connectCutover(t, addr, 10*time.Second)
	_, err := c.Create(path, []byte(addr), zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	_, _, _, err = c.GetW(path)
	testenv.Must(t, err)
	return sessionOn{c: c, id: c.SessionID(), from: c.count(), path: path}
}

// moveTo makes s's client reconnect to addr from now on.
func (s sessionOn) moveTo(addr string) { s.c.target.Store(&addr) }

// check checks that s's session resumed as itself, never Expired, and still owns its ephemeral.
func (s sessionOn) check(t *testing.T) {
	t.Helper()
	waitResumed(t, s.c, s.id, s.from)
	checkOwner(t, s.c, s.path, s.id)
}

// TestMigrateRelayingProcessKilled: a zetcd process that relays, killed (SIGKILL) during the
// migration: its client resumes its session on another process, relayed to ZooKeeper, and
// after the cutover it is still that session, with its ephemeral.
func TestMigrateRelayingProcessKilled(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	etcd := testenv.StartEtcd(t)
	p1 := startMigratingProcess(t, srv.Addr, etcd.Etcd.Endpoint, true)
	p2 := startMigratingProcess(t, srv.Addr, etcd.Etcd.Endpoint, false)
	setup := testenv.Connect(t, srv.Addr)
	_, err := setup.Create("/k", nil, 0, openACL)
	testenv.Must(t, err)
	setup.Close()
	s1, s2 := ephemeralOn(t, p1.Addr, "/k/one"), ephemeralOn(t, p2.Addr, "/k/two")
	waitCopyCaughtUp(t, p1.metrics)

	p2.Kill()
	s2.moveTo(p1.Addr)
	waitResumed(t, s2.c, s2.id, s2.from) // on ZooKeeper, through p1
	s2.from = s2.c.count()
	if _, err := s2.c.Set(s2.path, []byte("moved"), -1); err != nil {
		t.Fatal(err)
	}
	if code, body := cutoverUntil(t, p1.metrics, 30*time.Second); code != http.StatusOK {
		t.Fatalf("POST /migrate/cutover: %d %s", code, body)
	}
	s1.check(t)
	s2.check(t)
	itest.DiffTrees(t, srv.Addr, p1.Addr)
}

// TestMigrateCopierKilled: the copier killed (SIGKILL) during the migration fails the migration
// on every other process (a copy does not resume), which relays on: its client's session and
// ephemeral stay ZooKeeper's, and a cutover is refused.
func TestMigrateCopierKilled(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	etcd := testenv.StartEtcd(t)
	p1 := startMigratingProcess(t, srv.Addr, etcd.Etcd.Endpoint, true)
	p2 := startMigratingProcess(t, srv.Addr, etcd.Etcd.Endpoint, false)
	s2 := ephemeralOn(t, p2.Addr, "/two")
	waitCopyCaughtUp(t, p1.metrics, p2.metrics)

	p1.Kill()
	testenv.Eventually(t, 30*time.Second, "the migration failed on the other process", func() error {
		if st := getStatus(t, p2.metrics); st.State != migrate.StateFailed || !strings.Contains(strings.Join(st.Errors, " "), "copier") {
			return fmt.Errorf("/migrate: %+v", st.Status)
		}
		return nil
	})
	if code, body := postCutover(t, p2.metrics); code != http.StatusConflict {
		t.Errorf("a cutover after the copier died: %d %s", code, body)
	}
	if _, err := s2.c.Set(s2.path, []byte("still relayed"), -1); err != nil {
		t.Fatal(err)
	}
	direct := testenv.Connect(t, srv.Addr)
	data, st, err := direct.Get(s2.path)
	testenv.Must(t, err)
	if string(data) != "still relayed" || st.EphemeralOwner != s2.id || s2.c.SessionID() != s2.id {
		t.Errorf("%s on ZooKeeper: %q owner %#x, want %#x", s2.path, data, st.EphemeralOwner, s2.id)
	}
	direct.Close()
}

// TestMigrateProcessKilledInCutover: a relaying zetcd process killed (SIGKILL) while a cutover
// runs: before the processes hold their connections, as they do, or once it has reported
// holding. The cutover completes, or hands every process back to relaying and a later one
// completes; never half. Killed after its report, the cutover completes. Every client keeps its
// session and ephemeral.
func TestMigrateProcessKilledInCutover(t *testing.T) {
	for _, c := range []struct {
		name     string
		when     func(t *testing.T, asked, killed migratingProcess, cli *clientv3.Client) bool
		complete bool
	}{
		{"catching up", func(t *testing.T, asked, _ migratingProcess, _ *clientv3.Client) bool {
			return getStatus(t, asked.metrics).Cutover.State == cutoverRunning
		}, false},
		{"holding", func(t *testing.T, asked, _ migratingProcess, _ *clientv3.Client) bool {
			return strings.HasPrefix(getStatus(t, asked.metrics).Cutover.Step, "holding")
		}, false},
		{"reported", func(t *testing.T, _, killed migratingProcess, cli *clientv3.Client) bool {
			r, err := cli.Get(context.Background(), etcdstore.MigrationKeys("/zk/")+"held/"+getStatus(t, killed.metrics).Process)
			testenv.Must(t, err)
			return len(r.Kvs) > 0
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) { killedInCutover(t, c.when, c.complete) })
	}
}

func killedInCutover(t *testing.T, when func(t *testing.T, asked, killed migratingProcess, cli *clientv3.Client) bool, complete bool) {
	srv := zkserver.Start(t, zkserver.Options{})
	etcd := testenv.StartEtcd(t)
	p1 := startMigratingProcess(t, srv.Addr, etcd.Etcd.Endpoint, true)
	p2 := startMigratingProcess(t, srv.Addr, etcd.Etcd.Endpoint, false)
	s1, s2 := ephemeralOn(t, p1.Addr, "/one"), ephemeralOn(t, p2.Addr, "/two")
	waitCopyCaughtUp(t, p1.metrics, p2.metrics)
	cli := etcd.Client(t)
	// The killed process's id, read before the kill.
	killed := getStatus(t, p2.metrics).Process
	code, body := cutoverWith(t, p1.metrics, func() bool { return when(t, p1, p2, cli) }, func() {
		p2.Kill()
		s2.moveTo(p1.Addr)
	})
	t.Logf("the cutover with process %s killed: %d %s", killed, code, strings.TrimSpace(body))
	if code != http.StatusOK {
		if complete {
			t.Fatalf("a cutover whose processes all reported holding failed: %d %s", code, body)
		}
		if cs := getStatus(t, p1.metrics).Cutover; cs.State != cutoverNone {
			t.Fatalf("after a failed cutover: %+v", cs)
		}
		if code, body = cutoverUntil(t, p1.metrics, 30*time.Second); code != http.StatusOK {
			t.Fatalf("the cutover after: %d %s", code, body)
		}
	}
	s1.check(t)
	s2.check(t)
	itest.DiffTrees(t, srv.Addr, p1.Addr)
}

// cutoverWith posts a cutover to metrics, runs fault once when says so, and returns the
// cutover's answer. A cutover that ends first has the fault after it.
func cutoverWith(t *testing.T, metrics net.Addr, when func() bool, fault func()) (int, string) {
	t.Helper()
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	deadline := time.Now().Add(15 * time.Second)
	go func() {
		for {
			code, body, err := tryCutover(metrics)
			if err != nil {
				body = err.Error()
			}
			if code != http.StatusConflict || time.Now().After(deadline) {
				done <- answer{code, body}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for !when() {
		select {
		case a := <-done:
			t.Logf("the cutover ended before the fault: %d %s", a.code, a.body)
			fault()
			return a.code, a.body
		case <-time.After(2 * time.Millisecond):
		}
	}
	fault()
	a := <-done
	return a.code, a.body
}

// TestMigrateEtcdLeaderPausedInCutover: etcd's leader of a three-member cluster paused
// (SIGSTOP) for 3 s while a cutover of two zetcd processes runs: the cutover completes after
// the fault, or hands back and a later one completes. Every client keeps its session.
func TestMigrateEtcdLeaderPausedInCutover(t *testing.T) {
	ms := itest.FaultCluster(t)
	srv := zkserver.Start(t, zkserver.Options{})
	ep := itest.ClusterEndpoints(ms)
	p1 := startMigratingProcess(t, srv.Addr, ep, true)
	p2 := startMigratingProcess(t, srv.Addr, ep, false)
	s1, s2 := ephemeralOn(t, p1.Addr, "/one"), ephemeralOn(t, p2.Addr, "/two")
	waitCopyCaughtUp(t, p1.metrics, p2.metrics)

	leader := itest.ClusterLeader(t, ms)
	code, body := cutoverWith(t, p2.metrics, func() bool { return getStatus(t, p1.metrics).Cutover.State == cutoverRunning }, func() {
		leader.Signal(t, syscall.SIGSTOP)
		time.Sleep(3 * time.Second)
		leader.Signal(t, syscall.SIGCONT)
	})
	t.Logf("the cutover with etcd's leader paused: %d %s", code, strings.TrimSpace(body))
	if code != http.StatusOK {
		if code, body = cutoverUntil(t, p2.metrics, 60*time.Second); code != http.StatusOK {
			t.Fatalf("the cutover after: %d %s", code, body)
		}
	}
	for _, p := range []migratingProcess{p1, p2} {
		testenv.Eventually(t, 20*time.Second, "zetcd "+p.Addr+" serving", func() error {
			if cs := getStatus(t, p.metrics).Cutover; cs.State != cutoverDone {
				return fmt.Errorf("cutover %+v", cs)
			}
			return nil
		})
	}
	s1.check(t)
	s2.check(t)
	itest.DiffTrees(t, srv.Addr, p2.Addr)
}

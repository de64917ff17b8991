package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/tcpproxy"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zklive"
	"github.com/zetcd/zetcd/migrate"
)

var openACL = zk.WorldACL(zk.PermAll)

// WaitCaughtUp waits until m's status is caught up with ZooKeeper's zxid read after zxid.
func waitCaughtUp(t testing.TB, m *migrate.Migration, after int64) migrate.Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := m.Status()
		var zk int64
		fmt.Sscanf(s.ZooKeeperZxid, "0x%x", &zk)
		if s.State == migrate.StateFailed {
			t.Fatalf("migration failed: %+v", s)
		}
		if s.State == migrate.StateCaughtUp && zk >= after {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastZxid is a zxid past every transaction ZooKeeper at addr applied before: the czxid of a
// node it creates (left in the tree).
func lastZxid(t testing.TB, addr string) int64 {
	t.Helper()
	c := testenv.Connect(t, addr)
	defer c.Close()
	p, err := c.Create("/last-", nil, zk.FlagSequence, openACL)
	testenv.Must(t, err)
	_, st, err := c.Exists(p)
	testenv.Must(t, err)
	return st.Czxid
}

// migrateUntilEqual migrates from a ZooKeeper while a writer changes it, then checks with zkctl
// diff, through a zetcd started on the copy, that the copy is ZooKeeper's tree. The writer runs
// for 4 s, and longer (up to 30 s) while fault, called every half second, says it has more to do.
func migrateUntilEqual(t *testing.T, maxTxnOps int, fault func(*tcpproxy.Proxy, *migrate.Migration) (more bool)) {
	srv := zkserver.Start(t, zkserver.Options{})
	itest.History(t, srv.Addr, 20, nil)
	c := testenv.Connect(t, srv.Addr)
	_, err := c.Create("/bulk", nil, 0, openACL)
	testenv.Must(t, err)
	// Multis of as many creates as one transaction within maxTxnOps can write.
	multi := min(500, maxTxnOps/8)
	for i := 0; i < 2000; i += multi {
		var ops []any
		for j := i; j < min(i+multi, 2000); j++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/bulk/n%d", j), Data: []byte(fmt.Sprint(j)), Acl: openACL})
		}
		_, err := c.Multi(ops...)
		testenv.Must(t, err)
	}
	p, err := tcpproxy.Start(srv.Addr)
	testenv.Must(t, err)
	defer p.Close()

	e := testenv.StartEtcd(t)
	stop := make(chan struct{})
	rounds := itest.Writer(t, srv.Addr, "/w", stop)
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	m := migrate.Start(ctx, migrate.Config{
		ZooKeeper:    zklive.Config{Servers: []string{p.Addr()}, SweepInterval: 300 * time.Millisecond, Log: log},
		Mirror:       etcdstore.MirrorConfig{Client: e.Client(t), MaxTxnOps: maxTxnOps, MaxRequestBytes: 10 << 20},
		Logger:       log,
		LastInterval: 200 * time.Millisecond,
		SyncInterval: 200 * time.Millisecond,
	})
	for i := 1; i <= 60; i++ {
		time.Sleep(500 * time.Millisecond)
		more := fault != nil && fault(p, m)
		t.Logf("status: %+v", m.Status())
		if i >= 8 && !more {
			break
		}
	}
	close(stop)
	n := <-rounds
	s := waitCaughtUp(t, m, lastZxid(t, srv.Addr))
	t.Logf("writer: %d rounds; caught up: %+v", n, s)
	cancel()
	if err := m.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait: %v", err)
	}
	// A zetcd in normal mode refuses the copy while its marker is there; taking the marker
	// away is the cutover's business, done here by hand.
	cli := e.Client(t)
	_, err = cli.Delete(context.Background(), "/zk/i")
	testenv.Must(t, err)
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
	itest.DiffTrees(t, srv.Addr, z.Addr)
}

// TestMigrateWriter: a copy made while a writer changes ZooKeeper is ZooKeeper's tree once the
// writer stops and the migration says it caught up.
func TestMigrateWriter(t *testing.T) {
	migrateUntilEqual(t, 65536, nil)
}

// TestMigrateSmallTransactions: the same within an external etcd's default --max-txn-ops (128),
// so that the changes settled at once are written in several transactions. (A transaction of
// ZooKeeper whose nodes do not fit one etcd transaction cannot be copied: its zxid is one.)
func TestMigrateSmallTransactions(t *testing.T) {
	migrateUntilEqual(t, 128, nil)
}

// TestMigrateDroppedConnection: the same with the connection to ZooKeeper reset again and again
// once the copy follows it: the follower reads the tree again and the differences reach the copy.
func TestMigrateDroppedConnection(t *testing.T) {
	calls, resets := 0, 0
	migrateUntilEqual(t, 65536, func(p *tcpproxy.Proxy, m *migrate.Migration) bool {
		if m.Status().State == migrate.StateLoading {
			return true
		}
		if calls++; calls%3 == 1 {
			p.Reset()
			resets++
		}
		return resets < 2
	})
	if resets == 0 {
		t.Errorf("the connection was never reset while the copy followed ZooKeeper")
	}
	t.Logf("%d resets", resets)
}

// TestMigrateEnsembleLeaderKilled: a copy of a three-server ZooKeeper, followed through all
// three, stays exact when ZooKeeper's leader is killed during the migration: writes go on
// before and after the election, and once they stop and the copy is caught up, it is the
// surviving servers' tree.
func TestMigrateEnsembleLeaderKilled(t *testing.T) {
	servers := zkserver.StartEnsemble(t, 3, zkserver.Options{})
	var addrs []string
	leader := -1
	for i, s := range servers {
		addrs = append(addrs, s.Addr)
		if out, err := zkserver.FourLetterWord(s.Addr, "srvr", 10*time.Second); err == nil && strings.Contains(out, "Mode: leader") {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no server says it leads")
	}
	follower := servers[(leader+1)%3].Addr
	itest.History(t, follower, 10, nil)

	e := testenv.StartEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	m := migrate.Start(ctx, migrate.Config{
		ZooKeeper:    zklive.Config{Servers: addrs, SweepInterval: 300 * time.Millisecond, Log: log},
		Mirror:       etcdstore.MirrorConfig{Client: e.Client(t), MaxTxnOps: 65536, MaxRequestBytes: 10 << 20},
		Logger:       log,
		LastInterval: 200 * time.Millisecond,
		SyncInterval: 200 * time.Millisecond,
	})
	write := func(root string) {
		stop := make(chan struct{})
		rounds := itest.Writer(t, follower, root, stop)
		time.Sleep(2 * time.Second)
		close(stop)
		t.Logf("writer %s: %d rounds; status %+v", root, <-rounds, m.Status())
	}
	testenv.Eventually(t, 60*time.Second, "the copy loaded", func() error {
		if st := m.Status(); st.State != migrate.StateFollowing && st.State != migrate.StateCaughtUp {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	write("/before")
	servers[leader].Signal(syscall.SIGKILL)
	t.Logf("killed ZooKeeper's leader, server %d", leader+1)
	testenv.Eventually(t, 60*time.Second, "a new leader", func() error {
		c, _, err := zk.Connect([]string{follower}, 5*time.Second, zk.WithLogInfo(false))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Create("/elected-", nil, zk.FlagSequence, openACL)
		return err
	})
	write("/after")
	s := waitCaughtUp(t, m, lastZxid(t, follower))
	t.Logf("caught up: %+v", s)
	cancel()
	if err := m.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait: %v", err)
	}
	_, err := e.Client(t).Delete(context.Background(), "/zk/i") // the cutover's business, by hand
	testenv.Must(t, err)
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
	itest.DiffTrees(t, follower, z.Addr)
}

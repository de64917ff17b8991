package zklive_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/tcpproxy"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zkdata"
	"github.com/zetcd/zetcd/internal/zklive"
)

// applier applies a Follower's changes to the State of its initial read, and checks that no
// node's reported state goes back.
type applier struct {
	t       testing.TB
	mu      sync.Mutex
	nodes   map[string]*zkdata.Node
	changes int
}

func (a *applier) apply(c zklive.Change) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changes++
	old := a.nodes[c.Path]
	if c.Node == nil {
		if old == nil {
			a.t.Errorf("%s: deleted, but it was not there", c.Path)
		}
		delete(a.nodes, c.Path)
		return
	}
	if old != nil && c.Node.Stat.Czxid == old.Stat.Czxid {
		n, o := c.Node.Stat, old.Stat
		if n.Mzxid < o.Mzxid || n.Pzxid < o.Pzxid || n.Version < o.Version || n.Cversion < o.Cversion || n.Aversion < o.Aversion {
			a.t.Errorf("%s: went back from %+v to %+v", c.Path, o, n)
		}
	}
	if old != nil && c.Node.Stat.Czxid < old.Stat.Czxid {
		a.t.Errorf("%s: created at %#x, then reported as created at %#x", c.Path, old.Stat.Czxid, c.Node.Stat.Czxid)
	}
	a.nodes[c.Path] = c.Node
}

func (a *applier) snapshot() (map[string]*zkdata.Node, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.nodes), a.changes
}

// bulk creates n nodes under /bulk, by multis of 500.
func bulk(t testing.TB, addr string, n int) {
	t.Helper()
	c := testenv.Connect(t, addr)
	_, err := c.Create("/bulk", nil, 0, openACL)
	testenv.Must(t, err)
	for i := 0; i < n; i += 500 {
		var ops []any
		for j := i; j < min(i+500, n); j++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/bulk/n%d", j), Data: []byte(fmt.Sprint(j)), Acl: openACL})
		}
		_, err := c.Multi(ops...)
		testenv.Must(t, err)
	}
	c.Close()
}

// followRun is how followUntilEqual follows a ZooKeeper.
type followRun struct {
	servers        []string                  // the follower's; the ZooKeeper's own address when empty
	sessionTimeout time.Duration             // the follower's
	writeFor       time.Duration             // how long the writer runs; 0 means 4 s
	fault          func()                    // called every half second while the writer runs
	hook           func(zapcore.Entry) error // sees what the follower logs
}

// followUntilEqual follows the ZooKeeper at addr while a writer changes it, from before the
// initial read on, then checks that the changes applied to the initial State give what Read
// gives once the writer has stopped and the follower caught up.
func followUntilEqual(t *testing.T, addr string, run followRun) {
	history(t, addr)
	openEphemerals(t, addr, 2)
	bulk(t, addr, 2000) // an initial read long enough for the writer to change the tree during it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	rounds := itest.Writer(t, addr, "/w", stop)
	time.Sleep(200 * time.Millisecond)

	cfg := zklive.Config{Servers: run.servers, Auth: readerAuth, SessionTimeout: run.sessionTimeout, SweepInterval: 300 * time.Millisecond}
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{addr}
	}
	var opts []zap.Option
	if run.hook != nil {
		opts = append(opts, zap.Hooks(run.hook))
	}
	cfg.Log = zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel), zaptest.WrapOptions(opts...))
	a := &applier{t: t}
	// Changes may come before the initial State is taken: the callback waits for it.
	ready := make(chan struct{})
	f, st, err := zklive.Follow(ctx, cfg, func(c zklive.Change) { <-ready; a.apply(c) })
	testenv.Must(t, err)
	a.nodes = maps.Clone(st.Nodes)
	close(ready)
	t.Logf("initial read: %d nodes, up to zxid %#x", len(st.Nodes), st.LastZxid)

	deadline := time.Now().Add(cmp.Or(run.writeFor, 4*time.Second))
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if run.fault != nil {
			run.fault()
		}
	}
	close(stop)
	n := <-rounds
	if run.fault != nil {
		// A fault while the follower is idle: the end of its connection wakes it.
		run.fault()
		time.Sleep(100 * time.Millisecond)
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	zxid, err := f.Sync(syncCtx)
	testenv.Must(t, err)
	want, err := zklive.Read(ctx, zklive.Config{Servers: []string{addr}, Auth: readerAuth})
	testenv.Must(t, err)
	got, changes := a.snapshot()
	equalNodes(t, got, want.Nodes)
	t.Logf("writer: %d rounds; follower: %d changes up to zxid %#x; %d nodes", n, changes, zxid, len(got))
	if n < 10 || changes < n {
		t.Errorf("writer made %d rounds, follower reported %d changes", n, changes)
	}
	cancel()
	if err := f.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait: %v", err)
	}
}

// TestFollowWriter: every change a writer makes during and after the initial read reaches the
// follower, setACLs (which fire no watch) included.
func TestFollowWriter(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	followUntilEqual(t, srv.Addr, followRun{})
}

// TestFollowDroppedConnection: the follower's connection is closed again and again while the
// writer goes on; each time it reads the tree again and reports the differences, and ends equal.
func TestFollowDroppedConnection(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	p, err := tcpproxy.Start(srv.Addr)
	testenv.Must(t, err)
	defer p.Close()
	var again atomic.Int32
	resets := 0
	calls := 0
	fault := func() { // every second: a reset may come during a read of the whole tree, or not
		if calls++; calls%2 == 1 {
			p.Reset()
			resets++
		}
	}
	followUntilEqual(t, srv.Addr, followRun{servers: []string{p.Addr()}, fault: fault, hook: countAgain(&again)})
	if again.Load() == 0 {
		t.Errorf("%d resets, and the follower never read the tree again", resets)
	}
	t.Logf("%d resets, %d reads of the whole tree again", resets, again.Load())
}

// countAgain counts the follower's reads of the whole tree after the first.
func countAgain(n *atomic.Int32) func(zapcore.Entry) error {
	return func(e zapcore.Entry) error {
		if strings.Contains(e.Message, "following ZooKeeper again") {
			n.Add(1)
		}
		return nil
	}
}

// TestFollowExpired: the follower's connection is frozen longer than its session timeout, so
// that ZooKeeper expires its session (and its watch); it opens a new one once the network
// thaws, and ends equal.
func TestFollowExpired(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	p, err := tcpproxy.Start(srv.Addr)
	testenv.Must(t, err)
	defer p.Close()
	var again atomic.Int32
	calls := 0
	fault := func() {
		switch calls++; calls {
		case 1:
			p.Freeze()
		case 14: // 6.5 s later: 4 s is ZooKeeper's shortest session timeout (2 × tickTime)
			p.Thaw()
		}
	}
	followUntilEqual(t, srv.Addr, followRun{servers: []string{p.Addr()}, sessionTimeout: 4 * time.Second, writeFor: 9 * time.Second, fault: fault, hook: countAgain(&again)})
	if again.Load() == 0 {
		t.Errorf("the follower never read the tree again")
	}
}

// TestFollowUnreadable: a node created with an ACL the follower's credentials do not pass, of
// which ZooKeeper sends the follower no event, stops it at the next sweep, and Wait names it.
func TestFollowUnreadable(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	// The follower learns of a transaction without an event from a ping's reply, every third of
	// its session timeout.
	cfg := zklive.Config{Servers: []string{srv.Addr}, Auth: readerAuth, SessionTimeout: 4 * time.Second, SweepInterval: 500 * time.Millisecond}
	f, _, err := zklive.Follow(context.Background(), cfg, func(zklive.Change) {})
	testenv.Must(t, err)
	c := testenv.Connect(t, srv.Addr)
	_, err = c.Create("/private", nil, 0, zk.DigestACL(zk.PermAll, "someone", "else"))
	testenv.Must(t, err)
	done := make(chan error, 1)
	go func() { done <- f.Wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, zklive.ErrUnreadable) || !strings.Contains(err.Error(), "/private") {
			t.Errorf("Wait: %v, want an error naming /private", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the follower goes on without /private")
	}
}

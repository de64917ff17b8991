package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/migrate"
)

// cutoverClient is a go-zookeeper session whose session events are recorded; refuse makes
// its later dials fail, as a client that never comes back.
type cutoverClient struct {
	*zk.Conn
	refuse atomic.Bool
	target atomic.Pointer[string] // if set, where every later dial goes instead
	mu     sync.Mutex
	states []zk.State
}

func connectCutover(t *testing.T, addr string, timeout time.Duration) *cutoverClient {
	t.Helper()
	c := &cutoverClient{}
	dial := func(network, address string, d time.Duration) (net.Conn, error) {
		if c.refuse.Load() {
			return nil, errors.New("refused by the test")
		}
		if p := c.target.Load(); p != nil {
			address = *p
		}
		return net.DialTimeout(network, address, d)
	}
	record := func(ev zk.Event) {
		if ev.Type == zk.EventSession {
			c.mu.Lock()
			c.states = append(c.states, ev.State)
			c.mu.Unlock()
		}
	}
	conn, _, err := zk.Connect([]string{addr}, timeout, zk.WithDialer(dial), zk.WithEventCallback(record), zk.WithLogInfo(false))
	testenv.Must(t, err)
	t.Cleanup(conn.Close)
	c.Conn = conn
	deadline := time.Now().Add(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no session on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// since returns the session states recorded from the n-th on.
func (c *cutoverClient) since(n int) []zk.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]zk.State(nil), c.states[min(n, len(c.states)):]...)
}

func (c *cutoverClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.states)
}

// waitCaughtUp waits until /migrate says caught up at ZooKeeper's zxid least or above.
func waitCaughtUp(t *testing.T, metrics net.Addr, least int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := getStatus(t, metrics)
		var zxid int64
		fmt.Sscanf(st.ZooKeeperZxid, "0x%x", &zxid)
		if st.State == migrate.StateFailed {
			t.Fatalf("/migrate: %+v", st)
		}
		if st.State == migrate.StateCaughtUp && zxid >= least {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/migrate never caught up: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func postCutover(t *testing.T, metrics net.Addr, query ...string) (int, string) {
	t.Helper()
	code, body, err := tryCutover(metrics, query...)
	testenv.Must(t, err)
	return code, body
}

// tryCutover posts a cutover, from any goroutine.
func tryCutover(metrics net.Addr, query ...string) (int, string, error) {
	// A cutover is bounded (cutoverTimeout, twice, and padding): one that never answers fails.
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Post("http://"+metrics.String()+"/migrate/cutover?"+strings.Join(query, "&"), "", nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// migrating is a zetcd in migration mode started by startMigrating.
type migrating struct {
	clients []net.Addr
	metrics net.Addr
}

// startMigrating runs zetcd in migration mode from the ZooKeeper at zkAddr until the test ends.
func startMigrating(t *testing.T, zkAddr string) migrating {
	t.Helper()
	return startMigratingWith(t, zkAddr, "--data-dir", t.TempDir())
}

// startMigratingWith runs zetcd (in the test binary) in migration mode from the ZooKeeper at
// zkAddr on the storage its flags store name, until the test ends.
func startMigratingWith(t *testing.T, zkAddr string, store ...string) migrating {
	t.Helper()
	o, err := parseFlags(append(store, "--zkaddr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--migrate-from", zkAddr))
	testenv.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan migrating, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveMigrate(ctx, o, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), func(c []net.Addr, m net.Addr) { started <- migrating{c, m} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("zetcd stopped: %v", err)
		}
	})
	select {
	case a := <-started:
		return a
	case err := <-done:
		t.Fatalf("migration mode stopped: %v", err)
	}
	return migrating{}
}

// TestMigrateCutover moves clients relayed to ZooKeeper onto zetcd: each keeps its session
// (Disconnected, then HasSession, never Expired), its ephemeral and its watch; every Stat
// shows ZooKeeper's own zxids, and a setWatches compares a relativeZxid of ZooKeeper's with
// them; zetcd's later zxids are above ZooKeeper's; the copy is ZooKeeper's tree; ZooKeeper can
// stop; a session whose client never comes back expires on zetcd, its ephemeral with it.
func TestMigrateCutover(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	itest.History(t, srv.Addr, 5, nil)

	a := startMigrating(t, srv.Addr)
	zetcdAddr := a.clients[0].String()

	const timeout = 6 * time.Second
	holder := connectCutover(t, zetcdAddr, timeout) // an ephemeral and a data watch
	_, err := holder.Create("/cut", nil, 0, openACL)
	testenv.Must(t, err)
	_, err = holder.Create("/cut/holder", []byte("mine"), zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	_, err = holder.Create("/cut/watched", []byte("before"), 0, openACL)
	testenv.Must(t, err)
	_, _, watch, err := holder.GetW("/cut/watched")
	testenv.Must(t, err)
	counter := connectCutover(t, zetcdAddr, timeout) // a sequential counter
	_, err = counter.Create("/cut/seq", nil, 0, openACL)
	testenv.Must(t, err)
	var lastBefore int64
	for range 3 {
		p, err := counter.Create("/cut/seq/n-", nil, zk.FlagSequence, openACL)
		testenv.Must(t, err)
		_, st, err := counter.Get(p)
		testenv.Must(t, err)
		lastBefore = max(lastBefore, st.Czxid)
	}
	// A node written twice, for setWatches with ZooKeeper's zxids after the cutover.
	_, err = counter.Create("/cut/twice", []byte("1"), 0, openACL)
	testenv.Must(t, err)
	_, created, err := counter.Get("/cut/twice")
	testenv.Must(t, err)
	set, err := counter.Set("/cut/twice", []byte("2"), -1)
	testenv.Must(t, err)
	lastBefore = max(lastBefore, set.Mzxid)
	// A write after it, so that no client's newest zxid is the node's mzxid.
	_, err = counter.Create("/cut/other", nil, 0, openACL)
	testenv.Must(t, err)
	gone := connectCutover(t, zetcdAddr, timeout) // never reconnects after the cutover
	_, err = gone.Create("/cut/gone", nil, zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	_, st, err := gone.Exists("/cut/gone")
	testenv.Must(t, err)
	lastBefore = max(lastBefore, st.Czxid)
	holderID, counterID := holder.SessionID(), counter.SessionID()
	nHolder, nCounter := holder.count(), counter.count()
	gone.refuse.Store(true)

	waitCaughtUp(t, a.metrics, lastBefore)
	zkZxids := itest.Zxids(t, holder.Conn) // relayed: ZooKeeper's answers
	// A client of ZooKeeper itself would stay there: the cutover refuses, naming it.
	direct := testenv.Connect(t, srv.Addr)
	code, body := postCutover(t, a.metrics)
	if code != http.StatusConflict || !strings.Contains(body, fmt.Sprintf("%#x", direct.SessionID())) ||
		strings.Contains(body, fmt.Sprintf("%#x", holderID)) {
		t.Errorf("cutover with a client on ZooKeeper %#x: %d %s", direct.SessionID(), code, body)
	}
	direct.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body = postCutover(t, a.metrics)
		if code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("POST /migrate/cutover: %d %s; /migrate: %+v", code, body, getStatus(t, a.metrics))
	}
	// Every Stat shows ZooKeeper's zxids, read through a client zetcd serves, before the
	// session that never comes back ends (its ephemeral's parent's pzxid would move).
	if got := itest.Zxids(t, testenv.Connect(t, zetcdAddr)); !maps.Equal(got, zkZxids) {
		for _, p := range slices.Sorted(maps.Keys(zkZxids)) {
			if got[p] != zkZxids[p] {
				t.Errorf("%s after the cutover: czxid, mzxid, pzxid %#x, on ZooKeeper %#x", p, got[p], zkZxids[p])
			}
		}
		t.Errorf("after the cutover: %d nodes, on ZooKeeper %d", len(got), len(zkZxids))
	}
	// A setWatches whose relativeZxid is ZooKeeper's catches up as on ZooKeeper: a change after
	// it fires the watch, none before it.
	for _, c := range []struct {
		rel  int64
		want string
	}{{set.Mzxid, "[]"}, {created.Mzxid, "[NodeDataChanged /cut/twice]"}, {created.Mzxid - 1, "[NodeDataChanged /cut/twice]"}} {
		raw := itest.ConnectRaw(t, zetcdAddr)
		req := &encoding.SetWatches{RelativeZxid: encoding.Zxid(c.rel), DataWatches: []string{"/cut/twice"}, ExistWatches: []string{}, ChildWatches: []string{}}
		if code := raw.MustCall(encoding.OpSetWatches, req, nil); code != encoding.ErrOK {
			t.Fatalf("setWatches: %v", code)
		}
		raw.Barrier()
		if got := fmt.Sprint(raw.TakeEvents()); got != c.want {
			t.Errorf("setWatches from ZooKeeper's zxid %#x (the node's mzxid %#x): events %s, want %s", c.rel, set.Mzxid, got, c.want)
		}
		raw.Close()
	}
	if code, body := postCutover(t, a.metrics); code != http.StatusConflict {
		t.Errorf("a second cutover: %d %s", code, body)
	}
	cs := getStatus(t, a.metrics).Cutover
	t.Logf("cutover: %+v", cs)
	if cs.State != cutoverDone || len(cs.TakenOver) != 3 {
		t.Errorf("/migrate's cutover: %+v, want done with 3 sessions", cs)
	}

	// zetcd's operator endpoint is served beside /migrate.
	for path, want := range map[string]string{"/healthz": "", "/metrics": "zetcd_"} {
		resp, err := http.Get("http://" + a.metrics.String() + path)
		testenv.Must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s after the cutover: %d %.200s", path, resp.StatusCode, b)
		}
	}

	// Each client resumes its session on zetcd.
	for _, c := range []struct {
		cl   *cutoverClient
		id   int64
		from int
	}{{holder, holderID, nHolder}, {counter, counterID, nCounter}} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			states := c.cl.since(c.from)
			if len(states) >= 2 && states[len(states)-1] == zk.StateHasSession {
				want := []zk.State{zk.StateDisconnected, zk.StateConnecting, zk.StateConnected, zk.StateHasSession}
				for _, s := range states {
					if s == zk.StateExpired {
						t.Errorf("session %#x: states %v", c.id, states)
					}
				}
				if states[0] != want[0] {
					t.Errorf("session %#x: states %v, want %v", c.id, states, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %#x never resumed: states %v", c.id, states)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if c.cl.SessionID() != c.id {
			t.Errorf("session %#x became %#x", c.id, c.cl.SessionID())
		}
	}
	_, st, err = counter.Exists("/cut/holder")
	testenv.Must(t, err)
	if st == nil || st.EphemeralOwner != holderID {
		t.Errorf("/cut/holder on zetcd: %+v, owner want %#x", st, holderID)
	}

	// The watch re-armed by setWatches has nothing to catch up on: a read after it on the same
	// connection comes back after any event it gave.
	_, _, err = holder.Get("/cut")
	testenv.Must(t, err)
	select {
	case ev := <-watch:
		t.Errorf("the data watch fired before any change: %+v", ev)
	default:
	}

	// The copy is ZooKeeper's tree.
	itest.DiffTrees(t, srv.Addr, zetcdAddr)

	// Writes go to zetcd: above every zxid before, the watch fires, reads are newest.
	st, err = counter.Set("/cut/watched", []byte("after"), -1)
	testenv.Must(t, err)
	if st.Mzxid <= lastBefore {
		t.Errorf("a write after the cutover: mzxid %#x, not above %#x", st.Mzxid, lastBefore)
	}
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/cut/watched" {
			t.Errorf("watch: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Error("the data watch set before the cutover did not fire")
	}
	data, _, err := holder.Get("/cut/watched")
	testenv.Must(t, err)
	if string(data) != "after" {
		t.Errorf("read after the cutover: %q", data)
	}
	p, err := counter.Create("/cut/seq/n-", nil, zk.FlagSequence, openACL)
	testenv.Must(t, err)
	if !strings.HasSuffix(p, "0000000003") {
		t.Errorf("sequential create after the cutover: %s", p)
	}

	// ZooKeeper stops; zetcd serves on, and ends the session that never came back.
	srv.Stop()
	_, err = holder.Set("/cut/watched", []byte("without ZooKeeper"), -1)
	testenv.Must(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _, err := counter.Exists("/cut/gone")
		testenv.Must(t, err)
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ephemeral of a session that never reconnected is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ok, _, err := counter.Exists("/cut/holder"); err != nil || !ok {
		t.Errorf("/cut/holder after ZooKeeper stopped: %v %v", ok, err)
	}
}

// TestMigrateCutoverFails: a cutover that cannot catch up (ZooKeeper not answering) leaves the
// clients on ZooKeeper, relayed again, their sessions and ephemerals ZooKeeper's; a later
// cutover moves them.
func TestMigrateCutoverFails(t *testing.T) {
	defer func(d time.Duration) { cutoverTimeout = d }(cutoverTimeout)
	cutoverTimeout = 3 * time.Second
	srv := zkserver.Start(t, zkserver.Options{})
	a := startMigrating(t, srv.Addr)
	zetcdAddr := a.clients[0].String()
	c := connectCutover(t, zetcdAddr, 10*time.Second)
	_, err := c.Create("/cut", nil, 0, openACL)
	testenv.Must(t, err)
	_, err = c.Create("/cut/mine", nil, zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	id, n := c.SessionID(), c.count()
	waitCaughtUp(t, a.metrics, 0)

	testenv.Must(t, srv.Signal(syscall.SIGSTOP))
	code, body := postCutover(t, a.metrics, "force=true") // cons does not answer either
	testenv.Must(t, srv.Signal(syscall.SIGCONT))
	if code != http.StatusInternalServerError {
		t.Errorf("cutover with ZooKeeper stopped: %d %s", code, body)
	}
	if cs := getStatus(t, a.metrics).Cutover; cs.State != cutoverNone || len(cs.Errors) != 1 {
		t.Errorf("/migrate's cutover after a failure: %+v", cs)
	}

	// The client is still ZooKeeper's, and new ones are relayed to it.
	var st *zk.Stat
	for deadline := time.Now().Add(20 * time.Second); ; {
		if st, err = c.Set("/cut/mine", []byte("still ZooKeeper's"), -1); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	testenv.Must(t, err)
	late := connectCutover(t, zetcdAddr, 10*time.Second)
	_, err = late.Create("/cut/late", nil, zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	direct := testenv.Connect(t, srv.Addr)
	for p, owner := range map[string]int64{"/cut/mine": id, "/cut/late": late.SessionID()} {
		_, st, err = direct.Get(p)
		testenv.Must(t, err)
		if st.EphemeralOwner != owner {
			t.Errorf("%s on ZooKeeper: owner %#x, want %#x", p, st.EphemeralOwner, owner)
		}
	}
	direct.Close()

	waitCaughtUp(t, a.metrics, st.Mzxid)
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body = postCutover(t, a.metrics)
		if code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("cutover after the failure: %d %s", code, body)
	}
	for deadline := time.Now().Add(20 * time.Second); c.State() != zk.StateHasSession || late.State() != zk.StateHasSession; {
		if time.Now().After(deadline) {
			t.Fatalf("no session after the cutover: %v %v", c.since(n), late.since(0))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, st, err = late.Get("/cut/mine")
	testenv.Must(t, err)
	if c.SessionID() != id || st.EphemeralOwner != id || slices.Contains(c.since(n), zk.StateExpired) {
		t.Errorf("session %#x after the cutover: %#x, owner %#x, states %v", id, c.SessionID(), st.EphemeralOwner, c.since(n))
	}
}

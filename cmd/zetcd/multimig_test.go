package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/migrate"
)

// startMigratingOn runs a zetcd process (in the test binary) in migration mode from the
// ZooKeeper at zkAddr on the etcd at endpoints, until the test ends.
func startMigratingOn(t *testing.T, zkAddr, endpoints string) migrating {
	t.Helper()
	return startMigratingWith(t, zkAddr, "--endpoints", endpoints)
}

// cutoverUntil posts a cutover to metrics until it is not refused (409: a relayed session not
// recorded yet, a process's lease not expired yet) or within the wait, and returns the answer.
func cutoverUntil(t *testing.T, metrics net.Addr, wait time.Duration, query ...string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		code, body := postCutover(t, metrics, query...)
		if code == http.StatusOK || time.Now().After(deadline) {
			return code, body
		}
		t.Logf("cutover: %d %s", code, strings.TrimSpace(body))
		time.Sleep(200 * time.Millisecond)
	}
}

// waitResumed waits until c has a session again after its from-th state, and checks that it
// is session id, never Expired.
func waitResumed(t *testing.T, c *cutoverClient, id int64, from int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		states := c.since(from)
		if slices.Contains(states, zk.StateExpired) {
			t.Fatalf("session %#x expired: states %v", id, states)
		}
		if len(states) >= 2 && states[len(states)-1] == zk.StateHasSession && c.State() == zk.StateHasSession {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %#x never resumed: states %v", id, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.SessionID() != id {
		t.Fatalf("session %#x became %#x", id, c.SessionID())
	}
}

// checkOwner checks that c reads path as an ephemeral of session owner.
func checkOwner(t *testing.T, c *cutoverClient, path string, owner int64) {
	t.Helper()
	_, st, err := c.Get(path)
	if err != nil || st.EphemeralOwner != owner {
		t.Errorf("%s: %+v %v, want owner %#x", path, st, err, owner)
	}
}

// waitCopyCaughtUp waits until every process's /migrate says the copy is caught up.
func waitCopyCaughtUp(t *testing.T, metrics ...net.Addr) {
	t.Helper()
	for _, m := range metrics {
		waitCaughtUp(t, m, 0)
	}
}

// TestMigrateSeveralProcesses: two zetcd processes in migration mode on one etcd prefix, one
// copier between them, each relaying its own clients; one cutover asked of one of them moves
// every client of both: each keeps its session (never Expired), its ephemeral and its watch,
// the copy is ZooKeeper's tree, and both processes serve afterwards. A process of another
// migration is refused the prefix.
func TestMigrateSeveralProcesses(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	itest.History(t, srv.Addr, 3, nil)
	etcd := testenv.StartEtcd(t)
	a := startMigratingOn(t, srv.Addr, etcd.Etcd.Endpoint)
	b := startMigratingOn(t, srv.Addr, etcd.Etcd.Endpoint)
	sa, sb := getStatus(t, a.metrics), getStatus(t, b.metrics)
	if sa.Process == sb.Process {
		t.Fatalf("two processes, one id %s", sa.Process)
	}

	const timeout = 8 * time.Second
	ca := connectCutover(t, a.clients[0].String(), timeout)
	_, err := ca.Create("/multi", nil, 0, openACL)
	testenv.Must(t, err)
	_, err = ca.Create("/multi/a", []byte("a"), zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	_, err = ca.Create("/multi/watched", []byte("before"), 0, openACL)
	testenv.Must(t, err)
	_, _, dataWatch, err := ca.GetW("/multi/watched")
	testenv.Must(t, err)
	cb := connectCutover(t, b.clients[0].String(), timeout)
	_, err = cb.Create("/multi/b", []byte("b"), zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	_, _, childWatch, err := cb.ChildrenW("/multi")
	testenv.Must(t, err)
	ida, idb, na, nb := ca.SessionID(), cb.SessionID(), ca.count(), cb.count()
	waitCopyCaughtUp(t, a.metrics, b.metrics)
	if sa, sb = getStatus(t, a.metrics), getStatus(t, b.metrics); sa.Copier == "" || sa.Copier != sb.Copier {
		t.Errorf("copier: %q on one, %q on the other", sa.Copier, sb.Copier)
	}

	// A process of another migration (another ZooKeeper) on the prefix is refused.
	other, err := parseFlags([]string{"--endpoints", etcd.Etcd.Endpoint, "--zkaddr", "127.0.0.1:0", "--migrate-from", "127.0.0.1:1"})
	testenv.Must(t, err)
	if err := serveMigrate(context.Background(), other, zaptest.NewLogger(t), nil); err == nil || !strings.Contains(err.Error(), "another copy") {
		t.Errorf("another migration on the prefix: %v", err)
	}

	// Asked of the process that does not copy.
	asked := b
	if sb.Copier == sb.Process {
		asked = a
	}
	if code, body := cutoverUntil(t, asked.metrics, 15*time.Second); code != http.StatusOK {
		t.Fatalf("POST /migrate/cutover: %d %s", code, body)
	}
	for _, m := range []net.Addr{a.metrics, b.metrics} {
		cs := getStatus(t, m).Cutover
		if cs.State != cutoverDone || !slices.Contains(cs.TakenOver, fmt.Sprintf("%#x", ida)) || !slices.Contains(cs.TakenOver, fmt.Sprintf("%#x", idb)) {
			t.Errorf("%s: cutover %+v, want done with %#x and %#x", m, cs, ida, idb)
		}
	}
	waitResumed(t, ca, ida, na)
	waitResumed(t, cb, idb, nb)
	checkOwner(t, cb, "/multi/a", ida)
	checkOwner(t, ca, "/multi/b", idb)
	itest.DiffTrees(t, srv.Addr, a.clients[0].String())

	// Both serve from zetcd: a write through one fires the watches set through either.
	_, err = cb.Set("/multi/watched", []byte("after"), -1)
	testenv.Must(t, err)
	_, err = ca.Create("/multi/new", nil, 0, openACL)
	testenv.Must(t, err)
	for name, w := range map[string]<-chan zk.Event{"data": dataWatch, "child": childWatch} {
		select {
		case ev := <-w:
			if ev.Type != zk.EventNodeDataChanged && ev.Type != zk.EventNodeChildrenChanged {
				t.Errorf("%s watch: %+v", name, ev)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the %s watch set before the cutover did not fire", name)
		}
	}
	srv.Stop()
	for _, addr := range []net.Addr{a.clients[0], b.clients[0]} {
		c := testenv.Connect(t, addr.String())
		if data, _, err := c.Get("/multi/watched"); err != nil || string(data) != "after" {
			t.Errorf("%s after ZooKeeper stopped: %q %v", addr, data, err)
		}
		c.Close()
	}
	if st := getStatus(t, a.metrics); st.State == migrate.StateFailed {
		t.Errorf("/migrate after the cutover: %+v", st)
	}
}

package integration

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// orderedHosts is a go-zookeeper HostProvider that tries its servers in its own order, so a
// test decides which server a client starts on (Connect shuffles the list it is given).
type orderedHosts struct {
	mu      sync.Mutex
	servers []string
	next    int
	tried   int // servers tried since the last successful connection
}

func (h *orderedHosts) Init(servers []string) error {
	if len(servers) != len(h.servers) {
		return fmt.Errorf("orderedHosts: given %v, has %v", servers, h.servers)
	}
	return nil
}

func (h *orderedHosts) Len() int { return len(h.servers) }

func (h *orderedHosts) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[h.next%len(h.servers)]
	h.next++
	h.tried++
	return s, h.tried > len(h.servers)
}

func (h *orderedHosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried = 0
}

// connectOrdered opens a session through servers tried in order and waits until it has one.
func connectOrdered(t *testing.T, servers []string) *zk.Conn {
	t.Helper()
	return testenv.ConnectServers(t, servers, &orderedHosts{servers: servers})
}

// TestProcessDrain: two zetcd processes share one etcd. Clients given both addresses start on
// the first and keep writing; the first gets SIGTERM and drains. Every client resumes on the
// second with the same session, its ephemeral node (same owner) and its watch (which fires for
// a change made after the move), and every write that was acknowledged, before or after, is
// there.
func TestProcessDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	cluster := startEtcd(t)
	endpoint := cluster.Etcd.Endpoint
	addrA, addrB := itest.FreePort(t), itest.FreePort(t)
	a := itest.StartProcessArgs(t, addrA, "--endpoints", endpoint, "--drain-timeout", "10s", "--log-level", "info")
	itest.StartProcessArgs(t, addrB, "--endpoints", endpoint)

	obs := connect(t, addrB)
	if _, err := obs.Create("/drain", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}

	const clients = 6
	type client struct {
		conn    *zk.Conn
		session int64
		eph     string
		wpath   string
		watch   <-chan zk.Event
	}
	var (
		cs       []*client
		acked    sync.Map // path → data, for every acknowledged create
		lastSet  [clients]atomic.Int64
		acks     atomic.Int64
		stop     = make(chan struct{})
		writers  sync.WaitGroup
		failures atomic.Int64 // requests that failed (not acknowledged) around the move
	)
	for i := 0; i < clients; i++ {
		conn := connectOrdered(t, []string{addrA, addrB})
		if got := conn.Server(); got != addrA {
			t.Fatalf("client %d connected to %s, want %s", i, got, addrA)
		}
		c := &client{conn: conn, session: conn.SessionID(), eph: fmt.Sprintf("/drain/eph-%d", i), wpath: fmt.Sprintf("/drain/w-%d", i)}
		if _, err := conn.Create(c.eph, []byte("mine"), zk.FlagEphemeral, openACL); err != nil {
			t.Fatal(err)
		}
		if _, err := obs.Create(c.wpath, []byte("0"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		counter := fmt.Sprintf("/drain/counter-%d", i)
		if _, err := conn.Create(counter, []byte("0"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		_, _, ch, err := conn.GetW(c.wpath)
		if err != nil {
			t.Fatal(err)
		}
		c.watch = ch
		cs = append(cs, c)

		writers.Add(1)
		go func() {
			defer writers.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				data := fmt.Sprintf("c%d-%d", i, n)
				path, err := conn.Create(fmt.Sprintf("/drain/seq-%d-", i), []byte(data), zk.FlagSequence, openACL)
				if err != nil {
					failures.Add(1) // not acknowledged: may or may not have happened
					time.Sleep(10 * time.Millisecond)
					continue
				}
				acked.Store(path, data)
				if _, err := conn.Set(counter, []byte(fmt.Sprint(n)), -1); err != nil {
					failures.Add(1)
					continue
				}
				lastSet[i].Store(int64(n))
				acks.Add(1)
			}
		}()
	}

	time.Sleep(500 * time.Millisecond)
	before := acks.Load()
	if before == 0 {
		t.Fatal("no write acknowledged before the drain")
	}
	start := time.Now()
	a.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("zetcd did not exit 20s after SIGTERM")
	}
	took := time.Since(start)
	if code := a.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("drained zetcd exited with %d:\n%s", code, a.Logs.String())
	}
	if !strings.Contains(a.Logs.String(), "connections drained") {
		t.Errorf("drained zetcd did not report a complete drain:\n%s", a.Logs.String())
	}
	t.Logf("SIGTERM to exit: %v; %d writes acknowledged before", took, before)

	// Every client resumes on B with its session.
	for i, c := range cs {
		testenv.Eventually(t, 20*time.Second, fmt.Sprintf("client %d with a session on B after the drain", i), func() error {
			if st, srv := c.conn.State(), c.conn.Server(); st != zk.StateHasSession || srv != addrB {
				return fmt.Errorf("state %v on %s", st, srv)
			}
			return nil
		})
		if got := c.conn.SessionID(); got != c.session {
			t.Errorf("client %d: session %#x after the move, want %#x", i, got, c.session)
		}
		// Its ephemeral, seen by another session, is still there and still its own.
		data, st, err := obs.Get(c.eph)
		if err != nil || string(data) != "mine" || st.EphemeralOwner != c.session {
			t.Errorf("client %d: ephemeral %s: %q owner %#x, %v; want owner %#x", i, c.eph, data, st.EphemeralOwner, err, c.session)
		}
	}
	// Every watch set on A fires for a change made after the move.
	for _, c := range cs {
		if _, err := obs.Set(c.wpath, []byte("1"), -1); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		select {
		case ev := <-c.watch:
			if ev.Type != zk.EventNodeDataChanged || ev.Path != c.wpath {
				t.Errorf("client %d: watch fired %+v, want NodeDataChanged on %s", i, ev, c.wpath)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("client %d: the watch set before the drain did not fire after it", i)
		}
	}

	// The load carries on on B; then check every acknowledged write.
	time.Sleep(500 * time.Millisecond)
	close(stop)
	writers.Wait()
	after := acks.Load()
	if after <= before {
		t.Errorf("no write acknowledged after the drain (%d before, %d after)", before, after)
	}
	n := itest.CheckAcknowledged(t, obs, &acked, "/drain/counter-", lastSet[:])
	t.Logf("%d clients moved with sessions, ephemerals and watches; %d acknowledged creates all present (%d requests failed around the move)",
		clients, n, failures.Load())
}

package integration

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// contentionSessions × contentionCreates sequential creates run at once under one parent.
const (
	contentionSessions = 64
	contentionCreates  = 25
)

// runSessions connects n sessions to addr, starts work(i, session i) on all of them at once, and
// returns how long they took together; a session whose work returns an error fails the test.
func runSessions(t *testing.T, addr string, n int, work func(i int, c *zk.Conn) error) time.Duration {
	t.Helper()
	conns := make([]*zk.Conn, n)
	for i := range conns {
		conns[i] = connect(t, addr)
	}
	errs := make(chan error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i, c := range conns {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			if err := work(i, c); err != nil {
				errs <- err
			}
		}()
	}
	t0 := time.Now()
	start.Done()
	done.Wait()
	elapsed := time.Since(t0)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return elapsed
}

// TestContentionSequential: 64 sessions create sequential children of one parent at the same
// time. Every create succeeds once, the suffixes are unique and gapless (0 … n-1), and each
// session sees its own suffixes increase. The rate is logged, never asserted.
// Not through xchk: concurrent creates get their numbers in a different order on each server.
func TestContentionSequential(t *testing.T) {
	forServers(t, directServers, func(t *testing.T, addr string) {
		setup := connect(t, addr)
		if _, err := setup.Create("/seq", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		names := make([][]string, contentionSessions)
		elapsed := runSessions(t, addr, contentionSessions, func(i int, c *zk.Conn) error {
			for j := 0; j < contentionCreates; j++ {
				p, err := c.Create("/seq/n-", []byte{byte(i)}, zk.FlagSequence, openACL)
				if err != nil {
					return fmt.Errorf("session %d create %d: %w", i, j, err)
				}
				names[i] = append(names[i], p)
			}
			return nil
		})
		total := contentionSessions * contentionCreates
		t.Logf("%d sessions × %d sequential creates under one parent: %v, %.0f creates/s",
			contentionSessions, contentionCreates, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())

		var suffixes []int
		for i, ns := range names {
			prev := -1
			for _, p := range ns {
				n, err := strconv.Atoi(p[len("/seq/n-"):])
				if err != nil {
					t.Fatalf("session %d got %q", i, p)
				}
				if n <= prev {
					t.Errorf("session %d: suffix %d after %d", i, n, prev)
				}
				prev = n
				suffixes = append(suffixes, n)
			}
		}
		slices.Sort(suffixes)
		for i, n := range suffixes {
			if n != i {
				t.Fatalf("suffixes are not 0..%d without gaps or duplicates: position %d holds %d", total-1, i, n)
			}
		}
		if len(suffixes) != total {
			t.Fatalf("%d creates succeeded, want %d", len(suffixes), total)
		}
		children, st, err := setup.Children("/seq")
		if err != nil {
			t.Fatal(err)
		}
		if len(children) != total || st.NumChildren != int32(total) || st.Cversion != int32(total) {
			t.Errorf("/seq: %d children, stat %+v; want %d", len(children), st, total)
		}
	})
}

// TestContentionMulti: sessions increment one counter with multis [check version, setData,
// sequential create] at the same time, retrying on BadVersion as a client of ZooKeeper does.
// Every successful multi applies whole and alone: the counter ends at the number of successes
// and every success left exactly one child, numbered without gaps. The rate is logged.
func TestContentionMulti(t *testing.T) {
	const sessions, increments = 32, 10
	forServers(t, directServers, func(t *testing.T, addr string) {
		setup := connect(t, addr)
		if _, err := setup.Create("/ctr", []byte("0"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		if _, err := setup.Create("/kids", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		var conflicts atomic.Int64
		elapsed := runSessions(t, addr, sessions, func(i int, c *zk.Conn) error {
			for n := 0; n < increments; {
				data, st, err := c.Get("/ctr")
				if err != nil {
					return fmt.Errorf("session %d: get: %w", i, err)
				}
				v, _ := strconv.Atoi(string(data))
				_, err = c.Multi(
					&zk.CheckVersionRequest{Path: "/ctr", Version: st.Version},
					&zk.SetDataRequest{Path: "/ctr", Data: []byte(strconv.Itoa(v + 1)), Version: st.Version},
					&zk.CreateRequest{Path: "/kids/k-", Data: []byte(strconv.Itoa(v)), Acl: openACL, Flags: zk.FlagSequence},
				)
				switch {
				case err == nil:
					n++
				case errors.Is(err, zk.ErrBadVersion):
					conflicts.Add(1)
				default:
					return fmt.Errorf("session %d: multi: %w", i, err)
				}
			}
			return nil
		})
		total := sessions * increments
		t.Logf("%d sessions × %d conflicting multis: %v, %.0f successful multis/s, %d BadVersion retries",
			sessions, increments, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), conflicts.Load())
		data, st, err := setup.Get("/ctr")
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != strconv.Itoa(total) || st.Version != int32(total) {
			t.Errorf("/ctr = %q version %d, want %d", data, st.Version, total)
		}
		children, _, err := setup.Children("/kids")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(children)
		for i, name := range children {
			if want := fmt.Sprintf("k-%010d", i); name != want {
				t.Fatalf("child %d is %s, want %s (%d children)", i, name, want, len(children))
			}
			// The child numbered i was created by the multi that moved the counter from i.
			d, _, err := setup.Get("/kids/" + name)
			if err != nil || string(d) != strconv.Itoa(i) {
				t.Fatalf("/kids/%s holds %q (%v), want %d", name, d, err, i)
			}
		}
		if len(children) != total {
			t.Errorf("%d children, want %d", len(children), total)
		}
	})
}

// TestContentionMultiParent: sessions run multis that all create under one parent (a
// sequential child and a child of their own, then setData on it) at the same time; none may
// fail, every multi applies whole, and the sequential names are gapless.
func TestContentionMultiParent(t *testing.T) {
	const sessions, multis = 64, 10
	forServers(t, directServers, func(t *testing.T, addr string) {
		setup := connect(t, addr)
		if _, err := setup.Create("/mp", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		elapsed := runSessions(t, addr, sessions, func(i int, c *zk.Conn) error {
			for n := 0; n < multis; n++ {
				own := fmt.Sprintf("/mp/own-%d-%d", i, n)
				_, err := c.Multi(
					&zk.CreateRequest{Path: "/mp/s-", Acl: openACL, Flags: zk.FlagSequence},
					&zk.CreateRequest{Path: own, Acl: openACL},
					&zk.SetDataRequest{Path: own, Data: []byte("x"), Version: 0},
				)
				if err != nil {
					return fmt.Errorf("session %d multi %d: %w", i, n, err)
				}
			}
			return nil
		})
		total := sessions * multis
		t.Logf("%d sessions × %d multis under one parent: %v, %.0f multis/s", sessions, multis, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
		children, st, err := setup.Children("/mp")
		if err != nil {
			t.Fatal(err)
		}
		var seq []string
		for _, c := range children {
			if len(c) > 2 && c[:2] == "s-" {
				seq = append(seq, c)
			}
		}
		slices.Sort(seq)
		for i, name := range seq {
			if want := fmt.Sprintf("s-%010d", 2*i); name != want {
				t.Fatalf("sequential child %d is %s, want %s", i, name, want)
			}
		}
		if len(children) != 2*total || len(seq) != total || st.Cversion != int32(2*total) {
			t.Errorf("/mp: %d children (%d sequential), stat %+v; want %d", len(children), len(seq), st, 2*total)
		}
	})
}

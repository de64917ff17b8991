package integration

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// contentionSessions × contentionCreates sequential creates run at once under one parent.
const (
	contentionSessions = 64
	contentionCreates  = 25
)

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
		conns := make([]*zk.Conn, contentionSessions)
		for i := range conns {
			conns[i] = connect(t, addr)
		}
		names := make([][]string, contentionSessions)
		errs := make(chan error, contentionSessions)
		var start, done sync.WaitGroup
		start.Add(1)
		for i, c := range conns {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				for j := 0; j < contentionCreates; j++ {
					p, err := c.Create("/seq/n-", []byte{byte(i)}, zk.FlagSequence, openACL)
					if err != nil {
						errs <- fmt.Errorf("session %d create %d: %w", i, j, err)
						return
					}
					names[i] = append(names[i], p)
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

package integration

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/gomaxprocs"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestProcessAdaptsGOMAXPROCS runs the zetcd binary and reads its GOMAXPROCS from /metrics: one
// P while it idles; every core while clients keep it busy; one P again once they stop. With
// --adapt-gomaxprocs=false it keeps every core.
func TestProcessAdaptsGOMAXPROCS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	if gomaxprocs.SetByEnvironment() {
		t.Skip("GOMAXPROCS is set in the environment: zetcd keeps it")
	}
	procs := func(maddr string) int {
		return int(itest.Scrape(t, "http://"+maddr+"/metrics")["go_sched_gomaxprocs_threads"])
	}
	waitProcs := func(maddr string, want int, what string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s: GOMAXPROCS %d", what, want), func() error {
			if got := procs(maddr); got != want {
				return fmt.Errorf("GOMAXPROCS %d", got)
			}
			return nil
		})
	}
	// The runtime's default, which a zetcd that does not adapt keeps.
	off, moff := itest.FreePort(t), itest.FreePort(t)
	itest.StartProcessArgs(t, off, "--data-dir", t.TempDir(), "--metrics-addr", moff, "--adapt-gomaxprocs=false")
	all := procs(moff)
	if all < 2 {
		t.Skip("the runtime's default is one P")
	}

	addr, maddr := itest.FreePort(t), itest.FreePort(t)
	itest.StartProcessArgs(t, addr, "--data-dir", t.TempDir(), "--metrics-addr", maddr)
	waitProcs(maddr, 1, "idle")

	// 32 sessions reading as fast as they can.
	setup := connect(t, addr)
	if _, err := setup.Create("/busy", []byte("v"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 32 {
		c := connect(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, _, err := c.Get("/busy"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	waitBusyProcs(t, maddr, all)
	stop.Store(true)
	wg.Wait()
	waitProcs(maddr, 1, "idle again")

	// The other process has idled all along, long past the adaptation's second.
	if got := procs(moff); got != all {
		t.Errorf("--adapt-gomaxprocs=false: GOMAXPROCS %d after idling, want %d", got, all)
	}
}

// waitBusyProcs waits, while clients load the zetcd at maddr, for it to run on all Ps. It
// measures the process's own CPU each second (process_cpu_seconds_total): the adaptation takes
// every core once zetcd uses gomaxprocs.DefaultUpCores of CPU over a second, so three seconds in
// a row at 0.8 cores or more, still on one P, fail the test. A machine so loaded that zetcd
// never gets the CPU in two minutes shows nothing either way, and the test is skipped.
func waitBusyProcs(t *testing.T, maddr string, all int) {
	t.Helper()
	scrape := func() (procs int, cpu float64) {
		m := itest.Scrape(t, "http://"+maddr+"/metrics")
		return int(m["go_sched_gomaxprocs_threads"]), m["process_cpu_seconds_total"]
	}
	_, lastCPU := scrape()
	last, hot, most := time.Now(), 0, 0.0
	for deadline := last.Add(2 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		procs, cpu := scrape()
		if procs == all {
			return
		}
		now := time.Now()
		cores := (cpu - lastCPU) / now.Sub(last).Seconds()
		lastCPU, last, most = cpu, now, max(most, cores)
		if cores < 0.8 {
			hot = 0
			continue
		}
		if hot++; hot >= 3 {
			t.Fatalf("32 sessions reading: zetcd used %.2f cores for %d seconds and still runs on %d P, want %d", cores, hot, procs, all)
		}
	}
	t.Skipf("32 sessions reading: zetcd got at most %.2f cores of CPU in two minutes (the adaptation takes every core from %.1f): the machine is too busy to tell", most, gomaxprocs.DefaultUpCores)
}

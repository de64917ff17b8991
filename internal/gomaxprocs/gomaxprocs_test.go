package gomaxprocs

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

func TestPolicyStep(t *testing.T) {
	p := Policy{UpCores: 0.6, DownCores: 0.3, DownAfter: 3}.withDefaults()
	run := func(cores ...float64) []state {
		var st state
		var out []state
		for _, c := range cores {
			st = p.step(st, c)
			out = append(out, st)
		}
		return out
	}
	cases := []struct {
		name  string
		cores []float64
		want  []state
	}{
		{"idle goes to one P after DownAfter samples", []float64{0.1, 0.1, 0.1, 0.1},
			[]state{{low: 1}, {low: 2}, {one: true}, {one: true}}},
		{"a busy sample restarts the count", []float64{0.1, 0.1, 0.3, 0.1, 0.1, 0.1},
			[]state{{low: 1}, {low: 2}, {}, {low: 1}, {low: 2}, {one: true}}},
		{"one P holds inside the band", []float64{0, 0, 0, 0.59, 0.4, 0.3},
			[]state{{low: 1}, {low: 2}, {one: true}, {one: true}, {one: true}, {one: true}}},
		{"one P leaves at UpCores", []float64{0, 0, 0, 0.6, 0.1},
			[]state{{low: 1}, {low: 2}, {one: true}, {}, {low: 1}}},
		{"the default holds inside the band", []float64{0.3, 0.5, 0.59},
			[]state{{}, {}, {}}},
	}
	for _, c := range cases {
		got := run(c.cores...)
		for i := range c.want {
			if got[i] != c.want[i] {
				t.Errorf("%s: after sample %d (%v cores): state %+v, want %+v", c.name, i, c.cores[i], got[i], c.want[i])
			}
		}
	}
}

// TestRunFollowsTheLoad runs the controller in this process: it goes to one P while the
// process idles, back to the default while two goroutines spin, to one P again when they stop,
// and leaves the default when it ends.
func TestRunFollowsTheLoad(t *testing.T) {
	if ok, why := Adaptable(); !ok {
		t.Skip(why)
	}
	def := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Thresholds well below a spinning goroutine's core, for a loaded test machine.
		Run(ctx, Policy{Interval: 20 * time.Millisecond, UpCores: 0.3, DownCores: 0.15, DownAfter: 5}, zaptest.NewLogger(t))
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitProcs := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for runtime.GOMAXPROCS(0) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOMAXPROCS %d, want %d", what, runtime.GOMAXPROCS(0), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitProcs(1, "idle")

	var stop atomic.Bool
	spun := make(chan struct{}, 2)
	for range 2 {
		go func() {
			defer func() { spun <- struct{}{} }()
			for !stop.Load() {
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		}()
	}
	waitProcs(def, "spinning")
	stop.Store(true)
	<-spun
	<-spun
	waitProcs(1, "idle again")

	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("after Run: GOMAXPROCS %d, want the default %d", got, def)
	}
}

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
	cases := []struct {
		name  string
		cores []float64
		one   []bool // after each sample
	}{
		{"idle goes to one P after DownAfter samples", []float64{0.1, 0.1, 0.1, 0.1},
			[]bool{false, false, true, true}},
		{"the average of a period decides, not one sample", []float64{0.1, 0.1, 0.6, 0.1, 0.1, 0.1},
			[]bool{false, false, true, true, true, true}},
		{"a busy period keeps every core, the next idle one leaves", []float64{0.1, 0.1, 0.9, 0.1, 0.1, 0.1},
			[]bool{false, false, false, false, false, true}},
		{"one P holds inside the band", []float64{0, 0, 0, 0.59, 0.4, 0.3},
			[]bool{false, false, true, true, true, true}},
		{"one P leaves at UpCores, and a new period starts", []float64{0, 0, 0, 0.6, 0.1, 0.1, 0.1},
			[]bool{false, false, true, false, false, false, true}},
		{"the default holds inside the band", []float64{0.3, 0.5, 0.59, 0.3, 0.3, 0.3},
			[]bool{false, false, false, false, false, false}},
	}
	for _, c := range cases {
		var st state
		for i, cores := range c.cores {
			st = p.step(st, cores)
			if st.one != c.one[i] {
				t.Errorf("%s: after sample %d (%v cores): one P %v, want %v", c.name, i, cores, st.one, c.one[i])
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

package gomaxprocs

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// The thresholds of the default Policy, in cores of CPU.
const (
	DefaultUpCores   = 0.6
	DefaultDownCores = 0.3
)

// Policy says when to switch. Zero fields take the defaults named.
type Policy struct {
	// Interval is how often the process's CPU use is sampled (20ms): at one P, a load that
	// needs more waits at most this long, which keeps it out of all but the far tail of a
	// run's latencies.
	Interval time.Duration
	// UpCores: at one P, CPU use (in cores, over one Interval) at or above which the process
	// goes back to the runtime's default (0.6). One P serves up to about one core, and waits
	// grow fast as it fills: switch well before.
	UpCores float64
	// DownCores and DownAfter: at the default, CPU use below which, on average over DownAfter
	// Intervals (50: a second), the process goes to one P (0.3 cores). The band between
	// DownCores and UpCores keeps a steady load on one side; the average keeps a pause in a
	// busy load from switching, and a burst of a few Intervals in a light one (the collector,
	// etcd's compaction) from keeping it on every core.
	DownCores float64
	DownAfter int
}

func (p Policy) withDefaults() Policy {
	if p.Interval <= 0 {
		p.Interval = 20 * time.Millisecond
	}
	if p.UpCores <= 0 {
		p.UpCores = DefaultUpCores
	}
	if p.DownCores <= 0 {
		p.DownCores = DefaultDownCores
	}
	if p.DownAfter <= 0 {
		p.DownAfter = 50
	}
	return p
}

// state is the controller's: whether it runs on one P; at the default, the samples taken in
// the current period of DownAfter samples and their sum.
type state struct {
	one bool
	n   int
	sum float64
}

// step takes one sample of cores (CPU used over the last Interval) and returns the next state.
func (p Policy) step(st state, cores float64) state {
	if st.one {
		if cores >= p.UpCores {
			return state{}
		}
		return st
	}
	st.n, st.sum = st.n+1, st.sum+cores
	if st.n < p.DownAfter {
		return st
	}
	return state{one: st.sum/float64(st.n) < p.DownCores}
}

// Adaptable reports whether Run would adapt anything in this process, and if not, why.
func Adaptable() (bool, string) {
	if SetByEnvironment() {
		return false, "GOMAXPROCS is set in the environment"
	}
	if runtime.GOMAXPROCS(0) <= 1 {
		return false, "the runtime's default is one P"
	}
	if _, ok := processCPU(); !ok {
		return false, "the process's CPU time cannot be read on " + runtime.GOOS
	}
	return true, ""
}

// SetByEnvironment reports whether the GOMAXPROCS environment variable sets the number of Ps:
// the runtime takes a positive number and ignores any other value.
func SetByEnvironment() bool {
	n, err := strconv.Atoi(os.Getenv("GOMAXPROCS"))
	return err == nil && n > 0
}

// Run adapts GOMAXPROCS to the process's CPU use until ctx ends, and then leaves the runtime's
// default in place. It returns at once, changing nothing, when the process is not Adaptable.
// One Run per process: GOMAXPROCS is the process's.
func Run(ctx context.Context, p Policy, log *zap.Logger) {
	if ok, why := Adaptable(); !ok {
		log.Debug("GOMAXPROCS not adapted", zap.String("why", why))
		return
	}
	p = p.withDefaults()
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	defer runtime.SetDefaultGOMAXPROCS()
	var st state
	last, _ := processCPU()
	lastAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// The time read with the CPU time: the tick may be late when the P is busy.
			cpu, _ := processCPU()
			now := time.Now()
			cores := float64(cpu-last) / float64(now.Sub(lastAt))
			last, lastAt = cpu, now
			next := p.step(st, cores)
			if next.one != st.one {
				apply(next.one)
				log.Debug("GOMAXPROCS adapted", zap.Int("procs", runtime.GOMAXPROCS(0)), zap.Float64("cores", cores))
			}
			st = next
		}
	}
}

// apply sets one P, or the runtime's default (which also resumes the runtime's own updates of
// it as the process's CPU limit changes). Either stops the world for a moment.
func apply(one bool) {
	if one {
		runtime.GOMAXPROCS(1)
		return
	}
	runtime.SetDefaultGOMAXPROCS()
}

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// request performs one request of one client and returns its latency.
type request func(ctx context.Context) (time.Duration, error)

// target is a server under load: zetcd or ZooKeeper (zkTarget) or etcd (etcdTarget).
type target interface {
	// client returns the request function of client number id, which runs on connection conn.
	// A client's function is only called from one goroutine.
	client(conn, id int) (request, error)
	// errorName names an error for the report ("NoNode", "Unimplemented", "DeadlineExceeded").
	errorName(err error) string
	// describe says what was measured, for the report.
	describe() string
	// rootPath is the node or key prefix everything the run creates is under.
	rootPath() string
	close()
}

// clientResult is what one client measured; only its goroutine writes it until the run ends.
type clientResult struct {
	latencies []time.Duration
	errors    map[string]int64
}

// benchmark sets up the target, runs the clients and summarises what they measured.
func benchmark(ctx context.Context, cfg *config, progressOut io.Writer) (*report, error) {
	var (
		t   target
		err error
	)
	setupCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	if cfg.etcd {
		t, err = newEtcdTarget(setupCtx, cfg)
	} else {
		t, err = newZKTarget(setupCtx, cfg)
	}
	cancel()
	if err != nil {
		return nil, err
	}
	defer t.close()

	n := cfg.conns * cfg.clients
	reqs := make([]request, n)
	for id := range n {
		if reqs[id], err = t.client(id%cfg.conns, id); err != nil {
			return nil, err
		}
	}
	results := make([]clientResult, n)

	runCtx := ctx
	if cfg.duration > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(ctx, cfg.duration)
		defer stop()
	}
	var issued, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for id := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[id]
			r.errors = map[string]int64{}
			for runCtx.Err() == nil {
				seq := issued.Add(1) - 1
				if cfg.total > 0 && seq >= int64(cfg.total) {
					return
				}
				if cfg.rate > 0 {
					slot := start.Add(time.Duration(float64(seq) / cfg.rate * float64(time.Second)))
					if d := time.Until(slot); d > 0 {
						select {
						case <-time.After(d):
						case <-runCtx.Done():
							return
						}
					}
				}
				// A request in flight when the duration ends is finished and counted: it was sent.
				lat, err := reqs[id](context.WithoutCancel(runCtx))
				if err != nil {
					r.errors[t.errorName(err)]++
				} else {
					r.latencies = append(r.latencies, lat)
				}
				done.Add(1)
			}
		}()
	}
	stopBar := func() {}
	if cfg.progress {
		stopBar = progressBar(progressOut, cfg, start, &done)
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopBar()
	rep := summarise(cfg, t.describe(), results, elapsed)
	rep.Root = t.rootPath()
	return rep, nil
}

// progressBar redraws a one-line bar on w every 200ms until the returned function is called.
func progressBar(w io.Writer, cfg *config, start time.Time, done *atomic.Int64) func() {
	quit, finished := make(chan struct{}), make(chan struct{})
	draw := func() {
		var frac float64
		if cfg.total > 0 {
			frac = float64(done.Load()) / float64(cfg.total)
		} else {
			frac = float64(time.Since(start)) / float64(cfg.duration)
		}
		frac = min(max(frac, 0), 1)
		const width = 40
		full := int(frac * width)
		fmt.Fprintf(w, "\r[%s%s] %3.0f%% %d requests", strings.Repeat("#", full), strings.Repeat(" ", width-full), frac*100, done.Load())
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				draw()
				fmt.Fprint(w, "\n")
				return
			case <-t.C:
				draw()
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// keyName is node (or key) number i of a kind, zero-padded to size bytes.
func keyName(prefix string, i int, size int) string {
	s := fmt.Sprintf("%s%x", prefix, i)
	if len(s) < size {
		s = strings.Repeat("0", size-len(s)) + s
	}
	return s
}

// seed writes with put, before the run, the nodes (etcd: keys) that cfg.op reads or deletes:
// cfg.keys under base+"k/" for set, get, exists and mixed; cfg.total under base+"d/" for delete;
// 10 under base+"list/" for children and mixed. It returns the paths of the first two kinds,
// which the clients pick from (nil where the op needs none).
func seed(cfg *config, base string, put func(path string) error) (keys, deletes []string, err error) {
	putAll := func(paths []string) error {
		return parallel(len(paths), setupWidth, func(i int) error { return put(paths[i]) })
	}
	switch cfg.op {
	case "set", "get", "exists", "mixed":
		keys = keyNames(base+"k/", "k", cfg.keys, cfg.keySize)
		if err := putAll(keys); err != nil {
			return nil, nil, err
		}
	case "delete":
		deletes = keyNames(base+"d/", "d", cfg.total, cfg.keySize)
		if err := putAll(deletes); err != nil {
			return nil, nil, err
		}
	}
	if cfg.op == "children" || cfg.op == "mixed" {
		if err := putAll(keyNames(base+"list/", "l", 10, cfg.keySize)); err != nil {
			return nil, nil, err
		}
	}
	return keys, deletes, nil
}

// keyNames is dir followed by keyName(kind, i, size), for i in [0, n).
func keyNames(dir, kind string, n, size int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = dir + keyName(kind, i, size)
	}
	return names
}

// newRand is a client's own random source, so clients never contend on one.
func newRand(id int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))
}

// parallel runs f(i) for i in [0, n) on up to width goroutines and returns the first error.
func parallel(n, width int, f func(i int) error) error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		err  error
		wg   sync.WaitGroup
	)
	for range min(width, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if e := f(i); e != nil {
					mu.Lock()
					if err == nil {
						err = e
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return err
}

package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// getRun is a scale step's get run: sc.getSessions sessions, each sending getData of a random
// znode of the loaded tree, one at a time, for sc.getDuration. A latency is from just before a
// request is written to its reply's end.
type getRun struct {
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"opsPerSec"`
	P50Ms     float64 `json:"p50Ms"`
	P99Ms     float64 `json:"p99Ms"`
}

// measureGets runs the get run of sc against the server at addr, whose tree is loaded whole;
// any failed read fails it.
func measureGets(addr string, sc scaleOptions) (*getRun, error) {
	sessions := make([]*rawSession, sc.getSessions)
	for i := range sessions {
		c, err := dialSession(addr)
		if err != nil {
			for _, c := range sessions[:i] {
				c.close()
			}
			return nil, err
		}
		sessions[i] = c
	}
	lats := make([][]time.Duration, len(sessions))
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(sc.getDuration)
	for i, c := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.close()
			r := rand.New(rand.NewPCG(uint64(i), uint64(t0.UnixNano())))
			for time.Now().Before(deadline) {
				path := scaleNode(r.IntN(sc.znodes))
				start := time.Now()
				if err := c.call(encoding.OpGetData, &encoding.GetDataRequest{Path: path}); err != nil {
					errs[i] = fmt.Errorf("getData %s: %w", path, err)
					return
				}
				lats[i] = append(lats[i], time.Since(start))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return summarizeGets(slices.Concat(lats...), elapsed), nil
}

// summarizeGets is the get run of the latencies lats of requests answered in elapsed.
func summarizeGets(lats []time.Duration, elapsed time.Duration) *getRun {
	slices.Sort(lats)
	ms := func(q float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		i := min(int(q*float64(len(lats))), len(lats)-1)
		return float64(lats[i]) / float64(time.Millisecond)
	}
	return &getRun{Requests: int64(len(lats)), Seconds: elapsed.Seconds(),
		OpsPerSec: float64(len(lats)) / elapsed.Seconds(), P50Ms: ms(0.50), P99Ms: ms(0.99)}
}

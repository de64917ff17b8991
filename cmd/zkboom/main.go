// Command zkboom is a load generator for zetcd or any ZooKeeper server: N connections issue one
// operation in a closed loop for a duration, and it reports throughput and latency percentiles.
//
//	zkboom [--endpoints host:port] [--conns N] [--duration D] [--val-size N] create|set|get
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "zkboom:", err)
		os.Exit(1)
	}
}

type result struct {
	latencies []time.Duration
	errors    int
}

func run(args []string) error {
	fs := flag.NewFlagSet("zkboom", flag.ContinueOnError)
	endpoints := fs.String("endpoints", "127.0.0.1:2181", "comma-separated ZooKeeper servers")
	conns := fs.Int("conns", 16, "connections (sessions), each issuing one request at a time")
	duration := fs.Duration("duration", 10*time.Second, "how long to run")
	valSize := fs.Int("val-size", 128, "bytes of data per create/set")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: zkboom [flags] create|set|get")
	}
	op := fs.Arg(0)
	value := make([]byte, *valSize)
	root := fmt.Sprintf("/zkboom-%d", time.Now().UnixNano())

	setup, _, err := zk.Connect(strings.Split(*endpoints, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	if _, err := setup.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("create %s: %w", root, err)
	}

	results := make([]result, *conns)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(*duration)
	for i := 0; i < *conns; i++ {
		c, _, err := zk.Connect(strings.Split(*endpoints, ","), 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			return err
		}
		defer c.Close()
		own := fmt.Sprintf("%s/c%d", root, i)
		if _, err := c.Create(own, value, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return fmt.Errorf("create %s: %w", own, err)
		}
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				t0 := time.Now()
				var err error
				switch op {
				case "create":
					_, err = c.Create(fmt.Sprintf("%s/n%d", own, n), value, 0, zk.WorldACL(zk.PermAll))
				case "set":
					_, err = c.Set(own, value, -1)
				case "get":
					_, _, err = c.Get(own)
				default:
					err = fmt.Errorf("unknown op %q", op)
				}
				if err != nil {
					r.errors++
					if r.errors > 100 {
						return
					}
					continue
				}
				r.latencies = append(r.latencies, time.Since(t0))
			}
		}(&results[i])
	}
	wg.Wait()
	elapsed := time.Since(start)
	setup.Close()

	var all []time.Duration
	errs := 0
	for _, r := range results {
		all = append(all, r.latencies...)
		errs += r.errors
	}
	if len(all) == 0 {
		return fmt.Errorf("no request succeeded (%d errors)", errs)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	var sum time.Duration
	for _, l := range all {
		sum += l
	}
	fmt.Printf("op %s conns %d: %d requests in %.1fs, %.0f ops/s, errors %d\n", op, *conns, len(all), elapsed.Seconds(), float64(len(all))/elapsed.Seconds(), errs)
	fmt.Printf("latency min %v avg %v p50 %v p90 %v p99 %v p99.9 %v max %v\n",
		all[0], sum/time.Duration(len(all)), pct(0.5), pct(0.9), pct(0.99), pct(0.999), all[len(all)-1])
	return nil
}

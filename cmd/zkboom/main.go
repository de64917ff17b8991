// Command zkboom is a load generator for zetcd or any ZooKeeper server, and, with --etcd, for
// etcd itself, so the ceiling zetcd is measured against comes from the same tool measured the
// same way.
//
//	zkboom [--endpoints ADDR[,ADDR...]] [--conns N] [--clients N] [--total N | --duration D]
//	       [--rate R] [--key-size N] [--val-size N] [--sequential] [--ephemeral] [--json] [--etcd] OP
//
// OP is create, set, get, delete, exists, children, mixed (--mix sets the ratios), watch or multi.
// --conns sessions each carry --clients requests in flight at once (pipelined on the one
// connection, as Kafka's brokers do); each client issues its next request when the last one is
// answered. It reports the requests made, errors by ZooKeeper code, throughput, latency
// percentiles and a histogram, like etcd's benchmark tool; --json prints the same figures as one
// JSON object.
//
// What each OP does, on ZooKeeper and (--etcd) on etcd:
//
//	create    create a new node (--sequential, --ephemeral)  | txn: if key absent, put
//	set       setData on one of --keys existing nodes         | put on an existing key
//	get       getData of one of --keys nodes                  | get (linearizable)
//	exists    exists on one of --keys nodes                   | get, count only
//	children  getChildren2 of a node with 10 children         | get of a prefix, keys only
//	delete    delete one of --total nodes created beforehand  | delete a key put beforehand
//	mixed     --mix ratios of get, set, create, exists, children
//	watch     the time from just before a setData on one session to the event's arrival on
//	          another, which watches the node (each client its own node; the watch is re-armed,
//	          unmeasured, before each write; --rate paces the writes) | put, watch on another client
//	multi     multi{create node, setData node version 0}, Kafka's broker registration shape
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stdout))
	stop()
	os.Exit(code)
}

// run runs one zkboom command line and returns the exit status: main without the process.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr, false)
}

// isTerminal reports whether f is a character device (a terminal), where a progress bar helps.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// config is the parsed command line.
type config struct {
	endpoints  []string
	conns      int
	clients    int
	total      int
	duration   time.Duration
	rate       float64
	keySize    int
	valSize    int
	keys       int
	sequential bool
	ephemeral  bool
	json       bool
	etcd       bool
	mix        []mixEntry
	op         string
	progress   bool
}

var ops = []string{"create", "set", "get", "delete", "exists", "children", "mixed", "watch", "multi"}

func parseConfig(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("zkboom", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	endpoints := fs.String("endpoints", "", "comma-separated servers (default 127.0.0.1:2181; with --etcd http://127.0.0.1:2379)")
	fs.IntVar(&c.conns, "conns", 1, "connections (sessions); with --etcd, etcd clients")
	fs.IntVar(&c.clients, "clients", 1, "requests in flight per connection")
	fs.IntVar(&c.total, "total", 0, "stop after this many requests")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (default 10s unless --total)")
	fs.Float64Var(&c.rate, "rate", 0, "requests per second across all clients (0: as fast as answered)")
	fs.IntVar(&c.keySize, "key-size", 8, "bytes of each node name (key)")
	fs.IntVar(&c.valSize, "val-size", 128, "bytes of data per create/set")
	fs.IntVar(&c.keys, "keys", 1000, "existing nodes that set, get and exists pick from")
	fs.BoolVar(&c.sequential, "sequential", false, "create sequential nodes")
	fs.BoolVar(&c.ephemeral, "ephemeral", false, "create ephemeral nodes")
	fs.BoolVar(&c.json, "json", false, "print one JSON object instead of the report")
	fs.BoolVar(&c.etcd, "etcd", false, "run the equivalent raw etcd operations against etcd endpoints")
	mix := fs.String("mix", "get=80,set=10,create=10", "ratios for OP mixed: op=weight,...")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, fmt.Errorf("want one OP (%s), got %d arguments", strings.Join(ops, ", "), fs.NArg())
	}
	c.op = fs.Arg(0)
	known := false
	for _, o := range ops {
		known = known || o == c.op
	}
	if !known {
		return nil, fmt.Errorf("unknown OP %q (want one of %s)", c.op, strings.Join(ops, ", "))
	}
	switch {
	case c.conns < 1 || c.clients < 1:
		return nil, errors.New("--conns and --clients must be at least 1")
	case c.total < 0 || c.duration < 0 || c.rate < 0:
		return nil, errors.New("--total, --duration and --rate cannot be negative")
	case c.total > 0 && c.duration > 0:
		return nil, errors.New("give --total or --duration, not both")
	case c.keySize < 1 || c.keySize > 1024 || c.valSize < 0 || c.keys < 1:
		return nil, errors.New("--key-size must be 1..1024, --val-size >= 0, --keys >= 1")
	case c.op == "delete" && c.total == 0:
		return nil, errors.New("delete needs --total: it deletes nodes created beforehand")
	}
	if c.total == 0 && c.duration == 0 {
		c.duration = 10 * time.Second
	}
	if *endpoints == "" {
		*endpoints = "127.0.0.1:2181"
		if c.etcd {
			*endpoints = "http://127.0.0.1:2379"
		}
	}
	c.endpoints = strings.Split(*endpoints, ",")
	if c.op == "mixed" {
		var err error
		if c.mix, err = parseMix(*mix); err != nil {
			return nil, err
		}
	}
	if c.etcd && c.op == "multi" {
		return nil, errors.New("multi has no single etcd equivalent; --etcd runs create, set, get, delete, exists, children, mixed and watch")
	}
	return c, nil
}

// mixEntry is one op of --mix with its cumulative weight.
type mixEntry struct {
	op  string
	cum int
}

func parseMix(s string) ([]mixEntry, error) {
	var mix []mixEntry
	sum := 0
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("--mix %q: want op=weight[,op=weight]", s)
		}
		switch name {
		case "get", "set", "create", "exists", "children":
		default:
			return nil, fmt.Errorf("--mix: op %q cannot be mixed (get, set, create, exists, children can)", name)
		}
		if n > 0 {
			sum += n
			mix = append(mix, mixEntry{name, sum})
		}
	}
	if sum == 0 {
		return nil, fmt.Errorf("--mix %q: weights add up to 0", s)
	}
	return mix, nil
}

// pick returns the mix's op for r in [0, total weight).
func pickMix(mix []mixEntry, r int) string {
	for _, m := range mix {
		if r < m.cum {
			return m.op
		}
	}
	return mix[len(mix)-1].op
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, progress bool) int {
	cfg, err := parseConfig(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "zkboom: %v\n%s", err, usage)
		return 2
	}
	cfg.progress = progress && !cfg.json
	rep, err := benchmark(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "zkboom: %v\n", err)
		return 1
	}
	if cfg.json {
		err = rep.writeJSON(stdout)
	} else {
		rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "zkboom: %v\n", err)
		return 1
	}
	if rep.Requests == 0 && rep.Errors > 0 {
		fmt.Fprintf(stderr, "zkboom: every request failed (%s)\n", rep.errorSummary())
		return 1
	}
	return 0
}

const usage = `usage: zkboom [--endpoints ADDR[,ADDR...]] [--conns N] [--clients N] [--total N | --duration D]
              [--rate R] [--key-size N] [--val-size N] [--keys N] [--sequential] [--ephemeral]
              [--mix get=80,set=10,create=10] [--json] [--etcd] OP
OP: create, set, get, delete, exists, children, mixed, watch, multi
`

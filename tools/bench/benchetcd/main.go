// Command benchetcd runs a bare single-member etcd (internal/embedetcd, the same embedded etcd
// zetcd starts, with nothing in front of it) for `make bench`, which measures zetcd against it.
//
//	benchetcd --data-dir DIR --listen http://127.0.0.1:2379
//
// It prints "ready <client URL>" once etcd serves, and stops on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/zetcd/zetcd/internal/embedetcd"
)

func main() {
	dir := flag.String("data-dir", "benchetcd.data", "etcd's data directory")
	listen := flag.String("listen", "http://127.0.0.1:0", "client URL to serve on (loopback)")
	flag.Parse()
	e, err := embedetcd.Start(embedetcd.Config{Dir: *dir, ClientURL: *listen})
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchetcd:", err)
		os.Exit(1)
	}
	fmt.Println("ready", e.Endpoint)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "benchetcd:", err)
		e.Close()
		os.Exit(1)
	}
	e.Close()
}

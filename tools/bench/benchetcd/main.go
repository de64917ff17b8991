// Command benchetcd runs a bare single-member etcd (internal/embedetcd, the same embedded etcd
// zetcd starts, with nothing in front of it) for `make bench`, which measures zetcd against it;
// with --name, --peer and --initial-cluster it is one member of a new cluster, which the fault
// tests (integration/faults) run three of, as processes they can pause and kill, and,
// with --listen-peer behind proxies at --peer, cut off from each other.
//
//	benchetcd --data-dir DIR --listen http://127.0.0.1:2379
//	benchetcd --data-dir DIR --listen URL --name m1 --peer http://127.0.0.1:2380 \
//	    --initial-cluster m1=http://127.0.0.1:2380,m2=...,m3=...
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
	name := flag.String("name", "", "this member's name in --initial-cluster (empty: a cluster of one)")
	peer := flag.String("peer", "", "this member's peer URL (with --name)")
	listenPeer := flag.String("listen-peer", "", "where to listen for the other members, if not at --peer (behind a proxy)")
	cluster := flag.String("initial-cluster", "", "every member as name=peerURL, comma-separated (with --name)")
	flag.Parse()
	cfg := embedetcd.Config{Dir: *dir, ClientURL: *listen}
	if *name != "" {
		cfg.Member = &embedetcd.Member{Name: *name, PeerURL: *peer, ListenPeerURL: *listenPeer, Cluster: *cluster}
	}
	e, err := embedetcd.Start(cfg)
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

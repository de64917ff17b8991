// Command zkctl is a small ZooKeeper command-line client that works against zetcd or any
// ZooKeeper server.
//
//	zkctl [--server host:port[,host:port...]] COMMAND ARGS
//
// Commands: ls PATH, get PATH, stat PATH, set PATH DATA, create [-e] [-s] PATH [DATA],
// delete PATH. The server defaults to $ZK_SERVER, then 127.0.0.1:2181.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "zkctl:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("zkctl", flag.ContinueOnError)
	server := os.Getenv("ZK_SERVER")
	if server == "" {
		server = "127.0.0.1:2181"
	}
	fs.StringVar(&server, "server", server, "comma-separated ZooKeeper servers (default $ZK_SERVER or 127.0.0.1:2181)")
	timeout := fs.Duration("timeout", 10*time.Second, "session timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return errors.New("usage: zkctl [--server addr] ls|get|stat|set|create|delete PATH [ARGS]")
	}
	conn, _, err := zk.Connect(strings.Split(server, ","), *timeout, zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer conn.Close()

	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "ls":
		children, _, err := conn.Children(rest[0])
		if err != nil {
			return fmt.Errorf("ls %s: %w", rest[0], err)
		}
		for _, c := range children {
			fmt.Fprintln(out, c)
		}
	case "get":
		data, _, err := conn.Get(rest[0])
		if err != nil {
			return fmt.Errorf("get %s: %w", rest[0], err)
		}
		fmt.Fprintf(out, "%s\n", data)
	case "stat":
		_, st, err := conn.Get(rest[0])
		if err != nil {
			return fmt.Errorf("stat %s: %w", rest[0], err)
		}
		fmt.Fprintf(out, "cZxid = 0x%x\nctime = %s\nmZxid = 0x%x\nmtime = %s\npZxid = 0x%x\ncversion = %d\ndataVersion = %d\naclVersion = %d\nephemeralOwner = 0x%x\ndataLength = %d\nnumChildren = %d\n",
			st.Czxid, time.UnixMilli(st.Ctime).UTC().Format(time.RFC3339Nano), st.Mzxid, time.UnixMilli(st.Mtime).UTC().Format(time.RFC3339Nano),
			st.Pzxid, st.Cversion, st.Version, st.Aversion, st.EphemeralOwner, st.DataLength, st.NumChildren)
	case "set":
		if len(rest) != 2 {
			return errors.New("usage: zkctl set PATH DATA")
		}
		if _, err := conn.Set(rest[0], []byte(rest[1]), -1); err != nil {
			return fmt.Errorf("set %s: %w", rest[0], err)
		}
	case "create":
		cfs := flag.NewFlagSet("create", flag.ContinueOnError)
		eph := cfs.Bool("e", false, "ephemeral")
		seq := cfs.Bool("s", false, "sequential")
		if err := cfs.Parse(rest); err != nil {
			return err
		}
		if cfs.NArg() < 1 {
			return errors.New("usage: zkctl create [-e] [-s] PATH [DATA]")
		}
		var flags int32
		if *eph {
			flags |= zk.FlagEphemeral
		}
		if *seq {
			flags |= zk.FlagSequence
		}
		var data []byte
		if cfs.NArg() > 1 {
			data = []byte(cfs.Arg(1))
		}
		p, err := conn.Create(cfs.Arg(0), data, flags, zk.WorldACL(zk.PermAll))
		if err != nil {
			return fmt.Errorf("create %s: %w", cfs.Arg(0), err)
		}
		fmt.Fprintln(out, p)
	case "delete":
		if err := conn.Delete(rest[0], -1); err != nil {
			return fmt.Errorf("delete %s: %w", rest[0], err)
		}
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

// Command zkctl is a ZooKeeper command-line client for zetcd or any ZooKeeper server.
//
//	zkctl [--server host:port[,host:port...][/chroot]] [--auth user:pass] [--json] COMMAND [ARGS]
//
// The server defaults to $ZK_SERVER, then 127.0.0.1:2181. A "/chroot" suffix roots every path
// at that node, as ZooKeeper's own clients do. `zkctl help` lists the commands.
//
// Output is meant for people and scripts alike: `get` prints the data alone, `--json` prints one
// JSON document per command (one per line for `watch`). An error is one line on stderr naming
// the command, the path and the ZooKeeper error ("zkctl: get /a: NoNode: node does not exist"),
// and the exit status is 1, as zkCli's; bad usage exits 2. `diff` exits 1 when the trees
// differ and 2 on errors, as diff(1) does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&env{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}).run(os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs one zkctl command line and returns the exit status. It is main without the process:
// tests call it.
func run(args []string, stdout, stderr io.Writer) int {
	return (&env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: stdout, stderr: stderr}).run(args)
}

// env is what one invocation reads from and writes to.
type env struct {
	ctx    context.Context // cancelled on SIGINT/SIGTERM; ends `watch`
	stdin  io.Reader       // `load` reads its dump here
	stdout io.Writer
	stderr io.Writer

	// Set from the global flags.
	server  string
	auth    string
	json    bool
	timeout time.Duration
}

// usageError is bad command-line usage: exit status 2 and the usage line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitStatus is an error that sets the exit status itself. A nil err prints nothing: diff
// exits 1 when it found differences, which it has already printed.
type exitStatus struct {
	code int
	err  error
}

func (e exitStatus) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitStatus) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// command is one zkctl command.
type command struct {
	usage string // arguments, for help
	help  string // one line
	run   func(e *env, args []string) error
}

// commands are filled in by init functions of the files that implement them.
var commands = map[string]command{}

func (e *env) run(args []string) int {
	fs := flag.NewFlagSet("zkctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defServer := os.Getenv("ZK_SERVER")
	if defServer == "" {
		defServer = "127.0.0.1:2181"
	}
	fs.StringVar(&e.server, "server", defServer, "")
	fs.StringVar(&e.auth, "auth", "", "")
	fs.BoolVar(&e.json, "json", false, "")
	fs.DurationVar(&e.timeout, "timeout", 10*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			e.usage(e.stdout)
			return 0
		}
		return e.fail(usageError{err.Error()})
	}
	if fs.NArg() == 0 {
		e.usage(e.stderr)
		return 2
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		e.usage(e.stdout)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		return e.fail(usagef("unknown command %q (zkctl help lists them)", name))
	}
	if err := cmd.run(e, rest); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return e.fail(usagef("%s (usage: zkctl %s %s)", ue.msg, name, cmd.usage))
		}
		return e.fail(err)
	}
	return 0
}

// fail reports err as one line on stderr (a JSON object with --json) and returns the exit status.
func (e *env) fail(err error) int {
	code := 1
	var ue usageError
	var es exitStatus
	switch {
	case errors.As(err, &es):
		if es.err == nil {
			return es.code
		}
		code, err = es.code, es.err
	case errors.As(err, &ue):
		code = 2
	}
	if e.json {
		obj := map[string]any{"error": err.Error()}
		var oe *opError
		if errors.As(err, &oe) {
			obj["op"], obj["path"] = oe.op, oe.path
			if name := errName(oe.err); name != "" {
				obj["code"] = name
			}
		}
		b, _ := json.Marshal(obj)
		fmt.Fprintf(e.stderr, "%s\n", b)
	} else {
		fmt.Fprintf(e.stderr, "zkctl: %v\n", err)
	}
	return code
}

func (e *env) usage(w io.Writer) {
	fmt.Fprint(w, `usage: zkctl [--server host:port[,host:port...][/chroot]] [--auth user:pass] [--json] [--timeout D] COMMAND [ARGS]

  --server   ZooKeeper servers, optionally with a chroot suffix (default $ZK_SERVER, then 127.0.0.1:2181)
  --auth     digest credentials user:pass added to the session
  --json     print JSON (one document per command; one object per line for watch)
  --timeout  how long to wait for a session (default 10s)

commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  %s %s\n      %s\n", n, c.usage, c.help)
	}
	fmt.Fprint(w, `
Errors print one line on stderr and exit 1; bad usage exits 2. diff exits 0 when the trees are
equal, 1 when they differ and 2 on errors.
`)
}

// printJSON writes v as one line of JSON.
func (e *env) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

// cmdLine is one zkCli-style command line: the command's own flags, declared on the embedded
// FlagSet, come before its arguments, as in zkCli.
type cmdLine struct {
	*flag.FlagSet
	min, max int     // how many arguments the command takes
	v        *string // -v VERSION, for the commands that declare it (withVersion)
	version  int32   // -v's value after parse; -1 (any version) without it
}

func newCmdLine(name string, min, max int) *cmdLine {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &cmdLine{FlagSet: fs, min: min, max: max, version: -1}
}

// twoServers are the --from and --to servers of copy and diff, each with its own digest auth
// (--from-auth, --to-auth; default --auth); --from defaults to --server.
type twoServers struct{ from, to, fromAuth, toAuth *string }

// withServers declares twoServers' flags.
func (l *cmdLine) withServers(e *env) twoServers {
	return twoServers{
		from:     l.String("from", e.server, ""),
		to:       l.String("to", "", ""),
		fromAuth: l.String("from-auth", e.auth, ""),
		toAuth:   l.String("to-auth", e.auth, ""),
	}
}

// check reports a usage error when --to is missing.
func (s twoServers) check() error {
	if *s.to == "" {
		return usagef("--to is required")
	}
	return nil
}

// withVersion declares -v VERSION, the version a write is conditional on.
func (l *cmdLine) withVersion() *cmdLine {
	l.v = l.String("v", "", "")
	return l
}

// parse parses the flags, checks that min to max arguments follow them and reads -v. Any
// failure is a usage error.
func (l *cmdLine) parse(args []string) error {
	if err := l.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if n := l.NArg(); n < l.min || n > l.max {
		return usagef("want %s, got %d", plural(l.min, l.max), n)
	}
	if l.v == nil {
		return nil
	}
	var err error
	l.version, err = parseVersion(*l.v)
	return err
}

// path is the first argument: the node the command works on.
func (l *cmdLine) path() string { return l.Arg(0) }

// parseVersion parses a -v flag's value; "" is -1, any version.
func parseVersion(s string) (int32, error) {
	if s == "" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, usagef("-v %q: not a version", s)
	}
	return int32(v), nil
}

// session opens the session of the global flags, runs do on it and closes it.
func (e *env) session(do func(c *client) error) error {
	c, err := connect(e.server, e.auth, e.timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	return do(c)
}

// onPath is session for a command on path p: it checks p first, so that a malformed path is an
// error without a server round trip.
func (e *env) onPath(p string, do func(c *client) error) error {
	if err := validatePath(p); err != nil {
		return err
	}
	return e.session(do)
}

func plural(min, max int) string {
	switch {
	case min == max && min == 1:
		return "1 argument"
	case min == max:
		return fmt.Sprintf("%d arguments", min)
	default:
		return fmt.Sprintf("%d to %d arguments", min, max)
	}
}

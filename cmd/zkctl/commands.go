package main

import (
	"flag"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
)

func init() {
	commands["ls"] = command{"[-s] [-R] PATH", "list the children of PATH (-s: and its stat; -R: every descendant's path)", cmdLs}
	commands["get"] = command{"[-s] [-w] PATH", "print the data of PATH (-s: and its stat; -w: then wait for its next change)", cmdGet}
	commands["set"] = command{"[-s] [-v VERSION] PATH DATA", "set the data of PATH (-v: only at that version; -s: print the new stat)", cmdSet}
	commands["create"] = command{"[-e] [-s] [-c] [-t TTL] PATH [DATA [ACL]]", "create a node: -e ephemeral, -s sequential, -c container, -t TTL (ms or 10s)", cmdCreate}
	commands["delete"] = command{"[-v VERSION] PATH", "delete a node that has no children", cmdDelete}
	commands["deleteall"] = command{"PATH", "delete PATH and everything under it", cmdDeleteAll}
	commands["stat"] = command{"PATH", "print the stat of PATH", cmdStat}
	commands["tree"] = command{"PATH", "print the tree under PATH", cmdTree}
	commands["getacl"] = command{"PATH", "print the ACL of PATH, one scheme:id:perms per line", cmdGetACL}
	commands["setacl"] = command{"[-v ACLVERSION] PATH ACL", "set the ACL of PATH: scheme:id:perms[,scheme:id:perms...]", cmdSetACL}
	commands["sync"] = command{"PATH", "make the server catch up with the leader for PATH", cmdSync}
}

// dial opens the session of the global flags.
func (e *env) dial() (*client, error) { return connect(e.server, e.auth, e.timeout) }

// dialFor checks the path a command was given before connecting for it, so that a malformed
// path is a usage error rather than a server round trip.
func (e *env) dialFor(path string) (*client, error) {
	if err := validatePath(path); err != nil {
		return nil, err
	}
	return e.dial()
}

// statJSON is a Stat as --json prints it.
type statJSON struct {
	Czxid          int64 `json:"czxid"`
	Mzxid          int64 `json:"mzxid"`
	Pzxid          int64 `json:"pzxid"`
	Ctime          int64 `json:"ctime"`
	Mtime          int64 `json:"mtime"`
	Version        int32 `json:"version"`
	Cversion       int32 `json:"cversion"`
	Aversion       int32 `json:"aversion"`
	EphemeralOwner int64 `json:"ephemeralOwner"`
	DataLength     int32 `json:"dataLength"`
	NumChildren    int32 `json:"numChildren"`
}

func toStatJSON(s *zk.Stat) *statJSON {
	if s == nil {
		return nil
	}
	return &statJSON{s.Czxid, s.Mzxid, s.Pzxid, s.Ctime, s.Mtime, s.Version, s.Cversion, s.Aversion, s.EphemeralOwner, s.DataLength, s.NumChildren}
}

// printStat prints a Stat the way zkCli does.
func (e *env) printStat(s *zk.Stat) {
	ms := func(v int64) string { return time.UnixMilli(v).Format(time.UnixDate) }
	fmt.Fprintf(e.stdout, "cZxid = 0x%x\nctime = %s\nmZxid = 0x%x\nmtime = %s\npZxid = 0x%x\ncversion = %d\ndataVersion = %d\naclVersion = %d\nephemeralOwner = 0x%x\ndataLength = %d\nnumChildren = %d\n",
		s.Czxid, ms(s.Ctime), s.Mzxid, ms(s.Mtime), s.Pzxid, s.Cversion, s.Version, s.Aversion, s.EphemeralOwner, s.DataLength, s.NumChildren)
}

// dataJSON puts data into obj: "data" as text (null for null data), or "dataBase64" when it is
// not UTF-8.
func dataJSON(obj map[string]any, data []byte) {
	switch {
	case data == nil:
		obj["data"] = nil
	case utf8.Valid(data):
		obj["data"] = string(data)
	default:
		obj["dataBase64"] = data // encoding/json writes []byte as base64
	}
}

func cmdLs(e *env, args []string) error {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	withStat := fs.Bool("s", false, "")
	recursive := fs.Bool("R", false, "")
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	p := fs.Arg(0)
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if *recursive {
		var paths []string
		err := c.walk(p, func(p string, _ []string) error {
			paths = append(paths, p)
			return nil
		})
		if err != nil {
			return err
		}
		var st *zk.Stat
		if *withStat {
			if st, err = c.stat(p); err != nil {
				return err
			}
		}
		if e.json {
			return e.printJSON(map[string]any{"path": p, "paths": paths, "stat": toStatJSON(st)})
		}
		for _, q := range paths {
			fmt.Fprintln(e.stdout, q)
		}
		if st != nil {
			e.printStat(st)
		}
		return nil
	}
	children, st, err := c.children(p)
	if err != nil {
		return err
	}
	if e.json {
		obj := map[string]any{"path": p, "children": children}
		if *withStat {
			obj["stat"] = toStatJSON(st)
		}
		return e.printJSON(obj)
	}
	for _, ch := range children {
		fmt.Fprintln(e.stdout, ch)
	}
	if *withStat {
		e.printStat(st)
	}
	return nil
}

// children lists p's children, sorted.
func (c *client) children(p string) ([]string, *zk.Stat, error) {
	if err := validatePath(p); err != nil {
		return nil, nil, err
	}
	children, st, err := c.conn.Children(c.abs(p))
	if err != nil {
		return nil, nil, opErr("getChildren", p, err)
	}
	sort.Strings(children)
	return children, st, nil
}

func (c *client) stat(p string) (*zk.Stat, error) {
	if err := validatePath(p); err != nil {
		return nil, err
	}
	ok, st, err := c.conn.Exists(c.abs(p))
	if err != nil {
		return nil, opErr("stat", p, err)
	}
	if !ok {
		return nil, opErr("stat", p, zk.ErrNoNode)
	}
	return st, nil
}

// walk calls f for p and every node under it in pre-order, children sorted by name. A node that
// vanishes during the walk is skipped, except p itself.
func (c *client) walk(p string, f func(p string, children []string) error) error {
	children, _, err := c.children(p)
	if err != nil {
		return err
	}
	if err := f(p, children); err != nil {
		return err
	}
	for _, ch := range children {
		if err := c.walk(path.Join(p, ch), f); err != nil {
			if isCode(err, encoding.ErrNoNode) {
				continue
			}
			return err
		}
	}
	return nil
}

func cmdGet(e *env, args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	withStat := fs.Bool("s", false, "")
	watch := fs.Bool("w", false, "")
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	p := fs.Arg(0)
	c, err := e.dialFor(p)
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		data   []byte
		st     *zk.Stat
		events <-chan zk.Event
	)
	if *watch {
		data, st, events, err = c.conn.GetW(c.abs(p))
	} else {
		data, st, err = c.conn.Get(c.abs(p))
	}
	if err != nil {
		return opErr("get", p, err)
	}
	if e.json {
		obj := map[string]any{"path": p}
		dataJSON(obj, data)
		if *withStat {
			obj["stat"] = toStatJSON(st)
		}
		if err := e.printJSON(obj); err != nil {
			return err
		}
	} else {
		e.stdout.Write(data)
		fmt.Fprintln(e.stdout)
		if *withStat {
			e.printStat(st)
		}
	}
	if !*watch {
		return nil
	}
	select {
	case ev := <-events:
		if ev.Err != nil {
			return opErr("get -w", p, ev.Err)
		}
		return e.printEvent(strings.TrimPrefix(ev.Type.String(), "Event"), c.rel(ev.Path))
	case <-e.ctx.Done():
		return nil
	}
}

// printEvent prints one watch event: "NodeDataChanged /a" or its JSON object.
func (e *env) printEvent(typ, p string) error {
	if e.json {
		return e.printJSON(map[string]any{"event": typ, "path": p})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", typ, p)
	return err
}

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

func cmdSet(e *env, args []string) error {
	fs := flag.NewFlagSet("set", flag.ContinueOnError)
	withStat := fs.Bool("s", false, "")
	version := fs.String("v", "", "")
	if err := parseArgs(fs, args, 2, 2); err != nil {
		return err
	}
	v, err := parseVersion(*version)
	if err != nil {
		return err
	}
	p := fs.Arg(0)
	c, err := e.dialFor(p)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.conn.Set(c.abs(p), []byte(fs.Arg(1)), v)
	if err != nil {
		return opErr("set", p, err)
	}
	if e.json {
		return e.printJSON(map[string]any{"path": p, "stat": toStatJSON(st)})
	}
	if *withStat {
		e.printStat(st)
	}
	return nil
}

// parseTTL reads -t: milliseconds as zkCli takes them, or a Go duration ("10s").
func parseTTL(s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, usagef("-t %q: want milliseconds or a duration such as 10s", s)
	}
	return d, nil
}

func cmdCreate(e *env, args []string) error {
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	ephemeral := fs.Bool("e", false, "")
	sequential := fs.Bool("s", false, "")
	container := fs.Bool("c", false, "")
	ttlFlag := fs.String("t", "", "")
	if err := parseArgs(fs, args, 1, 3); err != nil {
		return err
	}
	var ttl time.Duration
	if *ttlFlag != "" {
		var err error
		if ttl, err = parseTTL(*ttlFlag); err != nil {
			return err
		}
	}
	switch {
	case *container && (*ephemeral || *sequential || *ttlFlag != ""):
		return usagef("-c cannot be combined with -e, -s or -t")
	case *ephemeral && *ttlFlag != "":
		return usagef("-t cannot be combined with -e")
	}
	p := fs.Arg(0)
	if p == "" || p[0] != '/' {
		return fmt.Errorf("path %q must start with '/'", p)
	}
	var data []byte
	if fs.NArg() > 1 {
		data = []byte(fs.Arg(1))
	}
	acl := zk.WorldACL(zk.PermAll)
	if fs.NArg() > 2 {
		var err error
		if acl, err = parseACL(fs.Arg(2)); err != nil {
			return err
		}
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var flags int32
	if *ephemeral {
		flags |= zk.FlagEphemeral
	}
	if *sequential {
		flags |= zk.FlagSequence
	}
	var created string
	switch {
	case *container:
		created, err = c.conn.CreateContainer(c.abs(p), data, zk.FlagContainer, acl)
	case *ttlFlag != "":
		flags = zk.FlagTTL
		if *sequential {
			flags = zk.FlagPersistentSequentialWithTTL
		}
		created, err = c.conn.CreateTTL(c.abs(p), data, flags, acl, ttl)
	default:
		created, err = c.conn.Create(c.abs(p), data, flags, acl)
	}
	if err != nil {
		return opErr("create", p, err)
	}
	created = c.rel(created)
	if e.json {
		return e.printJSON(map[string]any{"path": created})
	}
	fmt.Fprintln(e.stdout, created)
	if *ephemeral {
		fmt.Fprintf(e.stderr, "zkctl: note: %s is ephemeral and is deleted as zkctl's session ends now\n", created)
	}
	return nil
}

func cmdDelete(e *env, args []string) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	version := fs.String("v", "", "")
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	v, err := parseVersion(*version)
	if err != nil {
		return err
	}
	p := fs.Arg(0)
	c, err := e.dialFor(p)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.conn.Delete(c.abs(p), v); err != nil {
		return opErr("delete", p, err)
	}
	return nil
}

func cmdDeleteAll(e *env, args []string) error {
	fs := flag.NewFlagSet("deleteall", flag.ContinueOnError)
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.deleteAll(fs.Arg(0))
}

// deleteAll deletes p and its subtree, children first. Nodes that vanish meanwhile are fine;
// children created meanwhile are deleted too (NotEmpty makes it list again).
func (c *client) deleteAll(p string) error {
	for attempt := 0; ; attempt++ {
		children, _, err := c.children(p)
		if err != nil {
			return err
		}
		for _, ch := range children {
			if err := c.deleteAll(path.Join(p, ch)); err != nil && !isCode(err, encoding.ErrNoNode) {
				return err
			}
		}
		err = c.conn.Delete(c.abs(p), -1)
		if err == nil || (attempt > 0 && isCode(err, encoding.ErrNoNode)) {
			return nil
		}
		if !isCode(err, encoding.ErrNotEmpty) || attempt >= 10 {
			return opErr("delete", p, err)
		}
	}
}

func cmdStat(e *env, args []string) error {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.stat(fs.Arg(0))
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(map[string]any{"path": fs.Arg(0), "stat": toStatJSON(st)})
	}
	e.printStat(st)
	return nil
}

// treeNode is a node of `tree --json`.
type treeNode struct {
	Name     string      `json:"name"`
	Children []*treeNode `json:"children,omitempty"`
}

func cmdTree(e *env, args []string) error {
	fs := flag.NewFlagSet("tree", flag.ContinueOnError)
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	root := fs.Arg(0)
	nodes := map[string]*treeNode{}
	err = c.walk(root, func(p string, children []string) error {
		n := &treeNode{Name: p}
		if p != root {
			n.Name = path.Base(p)
			if parent := nodes[path.Dir(p)]; parent != nil {
				parent.Children = append(parent.Children, n)
			}
		}
		nodes[p] = n
		return nil
	})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(nodes[root])
	}
	fmt.Fprintln(e.stdout, root)
	printTree(e, nodes[root].Children, "")
	return nil
}

func printTree(e *env, nodes []*treeNode, indent string) {
	for i, n := range nodes {
		branch, more := "├── ", "│   "
		if i == len(nodes)-1 {
			branch, more = "└── ", "    "
		}
		fmt.Fprintf(e.stdout, "%s%s%s\n", indent, branch, n.Name)
		printTree(e, n.Children, indent+more)
	}
}

// aclJSON is one ACL entry in --json output and in dumps.
type aclJSON struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
	Perms  string `json:"perms"`
}

func toACLJSON(acl []zk.ACL) []aclJSON {
	out := make([]aclJSON, len(acl))
	for i, a := range acl {
		out[i] = aclJSON{a.Scheme, a.ID, encoding.Perm(a.Perms).String()}
	}
	return out
}

func fromACLJSON(in []aclJSON) ([]zk.ACL, error) {
	out := make([]zk.ACL, len(in))
	for i, a := range in {
		perms, err := parsePerms(a.Perms)
		if err != nil {
			return nil, err
		}
		out[i] = zk.ACL{Perms: perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out, nil
}

// formatACL is the text form setacl takes: "world:anyone:cdrwa".
func formatACL(a zk.ACL) string {
	return fmt.Sprintf("%s:%s:%s", a.Scheme, a.ID, encoding.Perm(a.Perms))
}

// parseACL reads "scheme:id:perms[,scheme:id:perms...]". The id may itself contain colons
// (digest:user:hash, ip:::1), so the scheme ends at the first colon and the perms start after
// the last.
func parseACL(s string) ([]zk.ACL, error) {
	var acl []zk.ACL
	for _, entry := range strings.Split(s, ",") {
		first, last := strings.IndexByte(entry, ':'), strings.LastIndexByte(entry, ':')
		if first < 0 || first == last {
			return nil, usagef("ACL entry %q: want scheme:id:perms", entry)
		}
		perms, err := parsePerms(entry[last+1:])
		if err != nil {
			return nil, err
		}
		acl = append(acl, zk.ACL{Perms: perms, Scheme: entry[:first], ID: entry[first+1 : last]})
	}
	return acl, nil
}

// parsePerms reads zkCli's permission letters: any of "cdrwa".
func parsePerms(s string) (int32, error) {
	var p int32
	if s == "none" {
		return 0, nil
	}
	for _, r := range s {
		switch r {
		case 'c':
			p |= zk.PermCreate
		case 'd':
			p |= zk.PermDelete
		case 'r':
			p |= zk.PermRead
		case 'w':
			p |= zk.PermWrite
		case 'a':
			p |= zk.PermAdmin
		default:
			return 0, usagef("permissions %q: want letters of cdrwa", s)
		}
	}
	return p, nil
}

func cmdGetACL(e *env, args []string) error {
	fs := flag.NewFlagSet("getacl", flag.ContinueOnError)
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	p := fs.Arg(0)
	c, err := e.dialFor(p)
	if err != nil {
		return err
	}
	defer c.Close()
	acl, st, err := c.conn.GetACL(c.abs(p))
	if err != nil {
		return opErr("getacl", p, err)
	}
	if e.json {
		return e.printJSON(map[string]any{"path": p, "acl": toACLJSON(acl), "aclVersion": st.Aversion})
	}
	for _, a := range acl {
		fmt.Fprintln(e.stdout, formatACL(a))
	}
	return nil
}

func cmdSetACL(e *env, args []string) error {
	fs := flag.NewFlagSet("setacl", flag.ContinueOnError)
	version := fs.String("v", "", "")
	if err := parseArgs(fs, args, 2, 2); err != nil {
		return err
	}
	v, err := parseVersion(*version)
	if err != nil {
		return err
	}
	p := fs.Arg(0)
	if err := validatePath(p); err != nil {
		return err
	}
	acl, err := parseACL(fs.Arg(1))
	if err != nil {
		return err
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.conn.SetACL(c.abs(p), acl, v)
	if err != nil {
		return opErr("setacl", p, err)
	}
	if e.json {
		return e.printJSON(map[string]any{"path": p, "stat": toStatJSON(st)})
	}
	return nil
}

func cmdSync(e *env, args []string) error {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	if err := parseArgs(fs, args, 1, 1); err != nil {
		return err
	}
	p := fs.Arg(0)
	c, err := e.dialFor(p)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.conn.Sync(c.abs(p)); err != nil {
		return opErr("sync", p, err)
	}
	if e.json {
		return e.printJSON(map[string]any{"path": p, "synced": true})
	}
	return nil
}

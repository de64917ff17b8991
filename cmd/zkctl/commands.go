package main

import (
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
	l := newCmdLine("ls", 1, 1)
	withStat := l.Bool("s", false, "")
	recursive := l.Bool("R", false, "")
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
		if *recursive {
			return e.lsRecursive(c, p, *withStat)
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
	})
}

// lsRecursive is ls -R: the path of p and of every node under it, then p's stat (-s).
func (e *env) lsRecursive(c *client, p string, withStat bool) error {
	var paths []string
	err := c.walk(p, func(p string, _ []string) error {
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	var st *zk.Stat
	if withStat {
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
	l := newCmdLine("get", 1, 1)
	withStat := l.Bool("s", false, "")
	watch := l.Bool("w", false, "")
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
		var (
			data   []byte
			st     *zk.Stat
			events <-chan zk.Event
			err    error
		)
		if *watch {
			data, st, events, err = c.conn.GetW(c.abs(p))
		} else {
			data, st, err = c.conn.Get(c.abs(p))
		}
		if err != nil {
			return opErr("get", p, err)
		}
		if err := e.printData(p, data, st, *withStat); err != nil {
			return err
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
	})
}

// printData prints what get read: the data alone, then the stat with -s.
func (e *env) printData(p string, data []byte, st *zk.Stat, withStat bool) error {
	if e.json {
		obj := map[string]any{"path": p}
		dataJSON(obj, data)
		if withStat {
			obj["stat"] = toStatJSON(st)
		}
		return e.printJSON(obj)
	}
	e.stdout.Write(data)
	fmt.Fprintln(e.stdout)
	if withStat {
		e.printStat(st)
	}
	return nil
}

// printEvent prints one watch event: "NodeDataChanged /a" or its JSON object.
func (e *env) printEvent(typ, p string) error {
	if e.json {
		return e.printJSON(map[string]any{"event": typ, "path": p})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", typ, p)
	return err
}

func cmdSet(e *env, args []string) error {
	l := newCmdLine("set", 2, 2).withVersion()
	withStat := l.Bool("s", false, "")
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
		st, err := c.conn.Set(c.abs(p), []byte(l.Arg(1)), l.version)
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
	})
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

// createArgs is what a create command line asks for.
type createArgs struct {
	path                             string
	data                             []byte
	acl                              []zk.ACL
	ephemeral, sequential, container bool
	withTTL                          bool // -t
	ttl                              time.Duration
}

func cmdCreate(e *env, args []string) error {
	a, err := parseCreate(args)
	if err != nil {
		return err
	}
	return e.session(func(c *client) error {
		created, err := c.create(a)
		if err != nil {
			return opErr("create", a.path, err)
		}
		created = c.rel(created)
		if e.json {
			return e.printJSON(map[string]any{"path": created})
		}
		fmt.Fprintln(e.stdout, created)
		if a.ephemeral {
			fmt.Fprintf(e.stderr, "zkctl: note: %s is ephemeral and is deleted as zkctl's session ends now\n", created)
		}
		return nil
	})
}

// parseCreate reads create's command line: [-e] [-s] [-c] [-t TTL] PATH [DATA [ACL]].
func parseCreate(args []string) (createArgs, error) {
	var a createArgs
	l := newCmdLine("create", 1, 3)
	l.BoolVar(&a.ephemeral, "e", false, "")
	l.BoolVar(&a.sequential, "s", false, "")
	l.BoolVar(&a.container, "c", false, "")
	ttlFlag := l.String("t", "", "")
	if err := l.parse(args); err != nil {
		return a, err
	}
	if a.withTTL = *ttlFlag != ""; a.withTTL {
		var err error
		if a.ttl, err = parseTTL(*ttlFlag); err != nil {
			return a, err
		}
	}
	switch {
	case a.container && (a.ephemeral || a.sequential || a.withTTL):
		return a, usagef("-c cannot be combined with -e, -s or -t")
	case a.ephemeral && a.withTTL:
		return a, usagef("-t cannot be combined with -e")
	}
	a.path = l.path()
	if a.path == "" || a.path[0] != '/' {
		return a, fmt.Errorf("path %q must start with '/'", a.path)
	}
	if l.NArg() > 1 {
		a.data = []byte(l.Arg(1))
	}
	a.acl = zk.WorldACL(zk.PermAll)
	if l.NArg() > 2 {
		var err error
		if a.acl, err = parseACL(l.Arg(2)); err != nil {
			return a, err
		}
	}
	return a, nil
}

// create creates the node a asks for and returns its path (sequential: with the suffix).
func (c *client) create(a createArgs) (string, error) {
	switch {
	case a.container:
		return c.conn.CreateContainer(c.abs(a.path), a.data, zk.FlagContainer, a.acl)
	case a.withTTL:
		flags := int32(zk.FlagTTL)
		if a.sequential {
			flags = zk.FlagPersistentSequentialWithTTL
		}
		return c.conn.CreateTTL(c.abs(a.path), a.data, flags, a.acl, a.ttl)
	}
	var flags int32
	if a.ephemeral {
		flags |= zk.FlagEphemeral
	}
	if a.sequential {
		flags |= zk.FlagSequence
	}
	return c.conn.Create(c.abs(a.path), a.data, flags, a.acl)
}

func cmdDelete(e *env, args []string) error {
	l := newCmdLine("delete", 1, 1).withVersion()
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
		if err := c.conn.Delete(c.abs(p), l.version); err != nil {
			return opErr("delete", p, err)
		}
		return nil
	})
}

func cmdDeleteAll(e *env, args []string) error {
	l := newCmdLine("deleteall", 1, 1)
	if err := l.parse(args); err != nil {
		return err
	}
	return e.onPath(l.path(), func(c *client) error { return c.deleteAll(l.path()) })
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
	l := newCmdLine("stat", 1, 1)
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
		st, err := c.stat(p)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"path": p, "stat": toStatJSON(st)})
		}
		e.printStat(st)
		return nil
	})
}

// treeNode is a node of `tree --json`.
type treeNode struct {
	Name     string      `json:"name"`
	Children []*treeNode `json:"children,omitempty"`
}

func cmdTree(e *env, args []string) error {
	l := newCmdLine("tree", 1, 1)
	if err := l.parse(args); err != nil {
		return err
	}
	root := l.path()
	return e.onPath(root, func(c *client) error {
		tree, err := c.tree(root)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(tree)
		}
		fmt.Fprintln(e.stdout, root)
		printTree(e, tree.Children, "")
		return nil
	})
}

// tree reads the names under root; the root node's name is root itself.
func (c *client) tree(root string) (*treeNode, error) {
	nodes := map[string]*treeNode{}
	err := c.walk(root, func(p string, children []string) error {
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
	return nodes[root], err
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
	l := newCmdLine("getacl", 1, 1)
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
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
	})
}

func cmdSetACL(e *env, args []string) error {
	l := newCmdLine("setacl", 2, 2).withVersion()
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	if err := validatePath(p); err != nil {
		return err
	}
	acl, err := parseACL(l.Arg(1))
	if err != nil {
		return err
	}
	return e.session(func(c *client) error {
		st, err := c.conn.SetACL(c.abs(p), acl, l.version)
		if err != nil {
			return opErr("setacl", p, err)
		}
		if e.json {
			return e.printJSON(map[string]any{"path": p, "stat": toStatJSON(st)})
		}
		return nil
	})
}

func cmdSync(e *env, args []string) error {
	l := newCmdLine("sync", 1, 1)
	if err := l.parse(args); err != nil {
		return err
	}
	p := l.path()
	return e.onPath(p, func(c *client) error {
		if _, err := c.conn.Sync(c.abs(p)); err != nil {
			return opErr("sync", p, err)
		}
		if e.json {
			return e.printJSON(map[string]any{"path": p, "synced": true})
		}
		return nil
	})
}

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
)

// dump, load and copy move a subtree between servers: data (null kept apart from empty), ACLs,
// node modes and sequential counters.
//
// What a client can and cannot see:
//   - Ephemeral nodes (ephemeralOwner != 0) belong to a live session elsewhere; they are left
//     out and listed.
//   - Container and TTL nodes report ephemeralOwner 0, exactly like persistent nodes (ZooKeeper's
//     DataTree hides its internal markers), so no client can tell them apart. dump and
//     copy take the modes from the caller instead: --container PATTERN and --ttl PATTERN=TTL,
//     PATTERN a path.Match glob ('*' stays within one path segment). A dump file records each
//     node's mode and can be edited before load. A TTL restarts from the copy's mtime.
//   - Sequential counters: ZooKeeper names a sequential child after the parent's create counter
//     C = (cversion + numChildren) / 2, the number of children ever created under it (PrepRequestProcessor).
//     Creating the copied children advances the target's counter by one each; where the
//     source's counter is higher (children were deleted, or ephemerals left out), the copy
//     creates and deletes placeholder children until it matches, in multi batches when the
//     server has multi. The next sequential child then gets the number it would have got on
//     the source. cversion itself ends lower by the number of left-out ephemerals, since it
//     also counts deletes.
//   - Not preserved: zxids, times, data and ACL versions (a new server assigns its own).
//
// ACLs are set last on nodes that have children, so an ACL that denies this client CREATE does
// not stop the copy of the subtree under it.

func init() {
	commands["dump"] = command{"[--container PATTERN]... [--ttl PATTERN=TTL]... PATH", "write PATH's subtree as JSON to stdout (data, ACLs, modes, sequential counters)", cmdDump}
	commands["load"] = command{"PATH", "create the subtree of a dump (stdin) at PATH; existing nodes get the dump's data and ACL", cmdLoad}
	commands["copy"] = command{"[--from ADDR] --to ADDR [--from-auth U:P] [--to-auth U:P] [--container PATTERN]... [--ttl PATTERN=TTL]... PATH [TOPATH]", "copy a live subtree from one server (default --server) to another (auth defaults to --auth)", cmdCopy}
}

const dumpFormat = "zkctl-dump/1"

// dumpFile is the JSON of `zkctl dump`.
type dumpFile struct {
	Format string `json:"format"` // dumpFormat
	Root   string `json:"root"`   // the dumped path on the source
	// Nodes in pre-order: each parent before its children.
	Nodes []dumpNode `json:"nodes"`
	// SkippedEphemerals are the ephemeral nodes left out.
	SkippedEphemerals []string `json:"skippedEphemerals,omitempty"`
}

// dumpNode is one node of a dump.
type dumpNode struct {
	// Path is relative to the dump's root: "/" is the root itself, "/a" its child a.
	Path string `json:"path"`
	// Data is the data as text, null for null data and for data that is not UTF-8, which is
	// in DataBase64 instead.
	Data       *string   `json:"data"`
	DataBase64 []byte    `json:"dataBase64,omitempty"`
	ACL        []aclJSON `json:"acl"`
	// Mode is "persistent", "container" or "ttl" (with TTLMs).
	Mode  string `json:"mode"`
	TTLMs int64  `json:"ttlMs,omitempty"`
	// NextSequence is the sequential counter the node had (the suffix its next sequential child
	// would get), present where creating the dumped children does not reproduce it.
	NextSequence int32 `json:"nextSequence,omitempty"`
}

func (n *dumpNode) data() []byte {
	if n.DataBase64 != nil {
		return n.DataBase64
	}
	if n.Data == nil {
		return nil
	}
	return []byte(*n.Data)
}

func (n *dumpNode) setData(b []byte) {
	switch {
	case b == nil:
	case utf8.Valid(b):
		s := string(b)
		n.Data = &s
	default:
		n.DataBase64 = b
	}
}

// modeRules are the --container and --ttl flags.
type modeRules struct {
	containers []string
	ttls       []ttlRule
}

type ttlRule struct {
	pattern string
	ttl     time.Duration
}

func (m *modeRules) register(fs *flag.FlagSet) {
	fs.Func("container", "", func(s string) error {
		if _, err := path.Match(s, "/"); err != nil {
			return fmt.Errorf("pattern %q: %v", s, err)
		}
		m.containers = append(m.containers, s)
		return nil
	})
	fs.Func("ttl", "", func(s string) error {
		pat, val, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%q: want PATTERN=TTL", s)
		}
		if _, err := path.Match(pat, "/"); err != nil {
			return fmt.Errorf("pattern %q: %v", pat, err)
		}
		ttl, err := parseTTL(val)
		if err != nil {
			return err
		}
		if ttl < time.Millisecond {
			return fmt.Errorf("%q: TTL must be at least 1ms", s)
		}
		m.ttls = append(m.ttls, ttlRule{pat, ttl})
		return nil
	})
}

// mode returns the mode of the node at p (a source path).
func (m *modeRules) mode(p string) (string, int64) {
	for _, r := range m.ttls {
		if ok, _ := path.Match(r.pattern, p); ok {
			return "ttl", r.ttl.Milliseconds()
		}
	}
	for _, pat := range m.containers {
		if ok, _ := path.Match(pat, p); ok {
			return "container", 0
		}
	}
	return "persistent", 0
}

// relPath is p relative to root, "/" for root itself.
func relPath(root, p string) string {
	if root == "/" {
		return p
	}
	if p == root {
		return "/"
	}
	return strings.TrimPrefix(p, root)
}

// joinPath places the relative path rel under root.
func joinPath(root, rel string) string {
	if rel == "/" {
		return root
	}
	if root == "/" {
		return rel
	}
	return root + rel
}

// isSystem reports whether p is ZooKeeper's own /zookeeper subtree, which is never copied.
func isSystem(p string) bool { return p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") }

// readTree reads the subtree at root.
func (c *client) readTree(root string, modes *modeRules) (*dumpFile, error) {
	if err := validatePath(root); err != nil {
		return nil, err
	}
	f := &dumpFile{Format: dumpFormat, Root: root}
	var visit func(p string) error
	visit = func(p string) error {
		data, st, err := c.conn.Get(c.abs(p))
		if err != nil {
			return opErr("get", p, err)
		}
		if st.EphemeralOwner != 0 {
			f.SkippedEphemerals = append(f.SkippedEphemerals, p)
			return nil
		}
		acl, _, err := c.conn.GetACL(c.abs(p))
		if err != nil {
			return opErr("getacl", p, err)
		}
		for _, a := range acl {
			// Without ADMIN on the node, ZooKeeper answers getACL with each digest's hash
			// replaced by "x". Copying that would lock the user out for good.
			if a.Scheme == "digest" && strings.HasSuffix(a.ID, ":x") {
				return fmt.Errorf("getacl %s: the server hid the password hash of %s:%s (it shows digests only to a client with ADMIN on the node); run again with --auth of a user who has it, or the super user", p, a.Scheme, a.ID)
			}
		}
		children, st, err := c.children(p)
		if err != nil {
			return err
		}
		n := dumpNode{Path: relPath(root, p), ACL: toACLJSON(acl)}
		n.setData(data)
		n.Mode, n.TTLMs = modes.mode(p)
		f.Nodes = append(f.Nodes, n)
		idx := len(f.Nodes) - 1
		copied := int32(0)
		for _, ch := range children {
			cp := path.Join(p, ch)
			if isSystem(cp) {
				continue
			}
			before := len(f.Nodes)
			if err := visit(cp); err != nil {
				if isCode(err, encoding.ErrNoNode) {
					continue // deleted while we walked
				}
				return err
			}
			if len(f.Nodes) > before {
				copied++
			}
		}
		if counter := (st.Cversion + st.NumChildren) / 2; counter > copied {
			f.Nodes[idx].NextSequence = counter
		}
		return nil
	}
	if err := visit(root); err != nil {
		return nil, err
	}
	if len(f.Nodes) == 0 {
		return nil, fmt.Errorf("dump %s: the node is ephemeral; nothing to dump", root)
	}
	return f, nil
}

// loadStats summarises a load or copy.
type loadStats struct {
	Created           int      `json:"created"`
	Updated           int      `json:"updated"`
	CountersAdvanced  int      `json:"countersAdvanced"`
	Placeholders      int      `json:"placeholders"`
	SkippedEphemerals []string `json:"skippedEphemerals,omitempty"`
}

var openACL = zk.WorldACL(zk.PermAll)

// writeTree creates the nodes of f under root: see the comment at the top of this file.
func (c *client) writeTree(root string, f *dumpFile) (*loadStats, error) {
	if err := validatePath(root); err != nil {
		return nil, err
	}
	if f.Format != dumpFormat {
		return nil, fmt.Errorf("load: not a zkctl dump (format %q, want %q)", f.Format, dumpFormat)
	}
	stats := &loadStats{SkippedEphemerals: f.SkippedEphemerals}
	if err := c.createAncestors(root); err != nil {
		return nil, err
	}
	// aclAfter: nodes that get children (copied ones or placeholders) keep an open ACL until
	// their subtree exists.
	aclAfter := map[string]bool{}
	for _, n := range f.Nodes {
		if n.Path != "/" {
			aclAfter[path.Dir(n.Path)] = true
		}
		if n.NextSequence > 0 {
			aclAfter[n.Path] = true
		}
	}
	var aclLater []int // nodes whose ACL is set after their subtree exists
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if err := validatePath(n.Path); err != nil {
			return stats, fmt.Errorf("load: node %d: %v", i, err)
		}
		p := joinPath(root, n.Path)
		if isSystem(p) {
			continue
		}
		acl, err := fromACLJSON(n.ACL)
		if err != nil {
			return stats, fmt.Errorf("load %s: %v", p, err)
		}
		createACL := acl
		if aclAfter[n.Path] {
			createACL = openACL
			aclLater = append(aclLater, i)
		}
		err = c.createMode(p, n.data(), createACL, n.Mode, n.TTLMs)
		switch {
		case err == nil:
			stats.Created++
		case isCode(err, encoding.ErrNodeExists):
			// An existing node gets the dump's data and ACL, each written only if it differs,
			// so loading the same dump twice changes nothing.
			old, _, err := c.conn.Get(c.abs(p))
			if err != nil {
				return stats, opErr("get", p, err)
			}
			if !bytes.Equal(old, n.data()) || (old == nil) != (n.data() == nil) {
				if _, err := c.conn.Set(c.abs(p), n.data(), -1); err != nil {
					return stats, opErr("set", p, err)
				}
			}
			if !aclAfter[n.Path] {
				aclLater = append(aclLater, i)
			}
			stats.Updated++
		default:
			return stats, err
		}
	}
	for _, n := range f.Nodes {
		if n.NextSequence == 0 || isSystem(joinPath(root, n.Path)) {
			continue
		}
		made, err := c.advanceCounter(joinPath(root, n.Path), n.NextSequence)
		if err != nil {
			return stats, err
		}
		if made > 0 {
			stats.CountersAdvanced++
			stats.Placeholders += made
		}
	}
	for _, i := range slices.Backward(aclLater) {
		n := &f.Nodes[i]
		p := joinPath(root, n.Path)
		acl, _ := fromACLJSON(n.ACL)
		if cur, _, err := c.conn.GetACL(c.abs(p)); err == nil && slices.Equal(cur, acl) {
			continue
		}
		if _, err := c.conn.SetACL(c.abs(p), acl, -1); err != nil {
			return stats, opErr("setacl", p, err)
		}
	}
	return stats, nil
}

// createMode creates one node in the given dump mode.
func (c *client) createMode(p string, data []byte, acl []zk.ACL, mode string, ttlMs int64) error {
	var err error
	switch mode {
	case "", "persistent":
		_, err = c.conn.Create(c.abs(p), data, zk.FlagPersistent, acl)
	case "container":
		_, err = c.conn.CreateContainer(c.abs(p), data, zk.FlagContainer, acl)
	case "ttl":
		if ttlMs <= 0 {
			return fmt.Errorf("load %s: mode ttl needs ttlMs > 0", p)
		}
		_, err = c.conn.CreateTTL(c.abs(p), data, zk.FlagTTL, acl, time.Duration(ttlMs)*time.Millisecond)
	default:
		return fmt.Errorf("load %s: unknown mode %q (want persistent, container or ttl)", p, mode)
	}
	return opErr("create", p, err)
}

// createAncestors creates the missing ancestors of p as empty persistent nodes.
func (c *client) createAncestors(p string) error {
	if p == "/" {
		return nil
	}
	parent := path.Dir(p)
	if ok, _, err := c.conn.Exists(c.abs(parent)); err != nil {
		return opErr("stat", parent, err)
	} else if ok {
		return nil
	}
	if err := c.createAncestors(parent); err != nil {
		return err
	}
	if _, err := c.conn.Create(c.abs(parent), nil, 0, openACL); err != nil && !isCode(err, encoding.ErrNodeExists) {
		return opErr("create", parent, err)
	}
	return nil
}

// placeholderBatch is how many placeholder children one multi creates and deletes.
const placeholderBatch = 256

// advanceCounter raises p's create counter to want by creating and deleting placeholder
// children; it returns how many it made.
func (c *client) advanceCounter(p string, want int32) (int, error) {
	st, err := c.stat(p)
	if err != nil {
		return 0, err
	}
	need := int(want - (st.Cversion+st.NumChildren)/2)
	if need <= 0 {
		return 0, nil
	}
	name := path.Join(c.abs(p), fmt.Sprintf("zkctl-placeholder-%x", time.Now().UnixNano()))
	made := 0
	useMulti := true
	for made < need {
		k := min(placeholderBatch, need-made)
		if useMulti {
			ops := make([]any, 0, 2*k)
			for range k {
				ops = append(ops, &zk.CreateRequest{Path: name, Acl: openACL}, &zk.DeleteRequest{Path: name, Version: -1})
			}
			_, err := c.conn.Multi(ops...)
			if err == nil {
				made += k
				continue
			}
			if !isCode(err, encoding.ErrUnimplemented) {
				return made, opErr("multi", p, err)
			}
			useMulti = false // a server without multi: one create and one delete at a time
		}
		// Pipelined: several placeholders in flight on the one session.
		const inflight = 16
		var wg sync.WaitGroup
		errs := make([]error, inflight)
		for w := range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < k; i += inflight {
					ph := fmt.Sprintf("%s-%d", name, w)
					if _, err := c.conn.Create(ph, nil, 0, openACL); err != nil {
						errs[w] = opErr("create", c.rel(ph), err)
						return
					}
					if err := c.conn.Delete(ph, -1); err != nil {
						errs[w] = opErr("delete", c.rel(ph), err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return made, err
			}
		}
		made += k
	}
	return made, nil
}

func cmdDump(e *env, args []string) error {
	l := newCmdLine("dump", 1, 1)
	var modes modeRules
	modes.register(l.FlagSet)
	if err := l.parse(args); err != nil {
		return err
	}
	return e.onPath(l.path(), func(c *client) error {
		f, err := c.readTree(l.path(), &modes)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f); err != nil {
			return err
		}
		if n := len(f.SkippedEphemerals); n > 0 {
			fmt.Fprintf(e.stderr, "zkctl: dumped %d nodes; left out %d ephemeral nodes\n", len(f.Nodes), n)
		}
		return nil
	})
}

func cmdLoad(e *env, args []string) error {
	l := newCmdLine("load", 1, 1)
	if err := l.parse(args); err != nil {
		return err
	}
	var f dumpFile
	dec := json.NewDecoder(e.stdin)
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("load: reading the dump from stdin: %v", err)
	}
	return e.onPath(l.path(), func(c *client) error {
		stats, err := c.writeTree(l.path(), &f)
		if err != nil {
			return err
		}
		return e.report("loaded", stats)
	})
}

func cmdCopy(e *env, args []string) error {
	l := newCmdLine("copy", 1, 2)
	srv := l.withServers(e)
	var modes modeRules
	modes.register(l.FlagSet)
	if err := l.parse(args); err != nil {
		return err
	}
	if err := srv.check(); err != nil {
		return err
	}
	src, dst := l.Arg(0), l.Arg(0)
	if l.NArg() == 2 {
		dst = l.Arg(1)
	}
	sc, err := connect(*srv.from, *srv.fromAuth, e.timeout)
	if err != nil {
		return err
	}
	defer sc.Close()
	tree, err := sc.readTree(src, &modes)
	if err != nil {
		return err
	}
	dc, err := connect(*srv.to, *srv.toAuth, e.timeout)
	if err != nil {
		return err
	}
	defer dc.Close()
	stats, err := dc.writeTree(dst, tree)
	if err != nil {
		return err
	}
	return e.report("copied", stats)
}

// report prints a load or copy summary: JSON on stdout with --json, a line on stderr otherwise.
func (e *env) report(verb string, s *loadStats) error {
	if e.json {
		return e.printJSON(s)
	}
	fmt.Fprintf(e.stderr, "zkctl: %s %d nodes (%d created, %d existing updated); advanced %d sequential counters with %d placeholders; left out %d ephemeral nodes\n",
		verb, s.Created+s.Updated, s.Created, s.Updated, s.CountersAdvanced, s.Placeholders, len(s.SkippedEphemerals))
	return nil
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
)

// diff compares the trees under one path on two live servers, node by node.
//
// What is compared, for every node present on both sides:
//   - the data (null kept apart from empty), the ACL (in the order the server returns it);
//   - the Stat fields version, cversion, aversion, numChildren, dataLength and
//     ephemeralOwner exactly, and ctime and mtime exactly to the millisecond (--skip-times
//     leaves the times out; --skip-owners compares ephemeralOwner only as zero or not, since
//     two servers never share a session);
//   - czxid, mzxid and pzxid by order, not by value (--skip-zxids leaves them out). A server
//     may number its transactions its own way, but must keep their order (DataTree records
//     the zxid of the transaction that last touched each field). So each side's zxids are
//     ranked among that side's distinct zxids of the nodes present on both sides, and the
//     ranks are compared. A node on one side only does not shift the others' ranks; a write
//     that one side has and the other lacks still shifts the ranks of every later zxid it
//     leaves behind in a Stat (a parent's pzxid, say), so the first such difference is the
//     one to look at.
//
// A node on one side only is one difference, with the size of its subtree; its subtree is not
// listed. /zookeeper, ZooKeeper's own subtree (DataTree), is left out unless --system or PATH
// is in it: its Stats are the server's own and /zookeeper/config names the server's own
// ensemble, so two servers may differ there by construction. Quotas (/zookeeper/quota) are
// compared with --system. --ignore PATH leaves out PATH and its subtree.
//
// What a client may not read (NoAuth) compares as "<NoAuth>": the data without READ, the ACL
// and the Stat without READ or ADMIN; children it may not list are not walked.
//
// Each side is read with getData, getACL and getChildren2 (only for nodes with children), by
// diffInflight workers at a time, so up to diffInflight requests are in flight on each session:
// go-zookeeper pipelines calls made from several goroutines on one connection.

func init() {
	commands["diff"] = command{"[--from ADDR] --to ADDR [--from-auth U:P] [--to-auth U:P] [--ignore PATH]... [--system] [--skip-zxids] [--skip-times] [--skip-owners] [--progress] [PATH]",
		strings.Join([]string{
			"compare the trees under PATH (default /) on two servers, one line per difference, then a summary;",
			"exit 0 if equal, 1 if not, 2 on error. --from defaults to --server, the auth options to --auth.",
			"Data, ACLs and Stat fields compare exactly, czxid/mzxid/pzxid by their order among each side's zxids.",
			"--skip-zxids, --skip-times (ctime, mtime): leave those out; --skip-owners: ephemeralOwner only as",
			"zero or not; --ignore PATH: leave out PATH's subtree; --system: compare /zookeeper too (left out",
			"otherwise); --progress: a line on stderr every 10000 nodes (the default when stderr is a terminal)",
		}, "\n      "),
		cmdDiff}
}

// diffInflight is how many nodes are read at once; each is read from both servers.
const diffInflight = 64

// progressEvery is how many nodes pass between two progress lines.
var progressEvery int64 = 10000

// diffOptions are the diff command's flags.
type diffOptions struct {
	ignore     []string
	system     bool
	skipZxids  bool
	skipTimes  bool
	skipOwners bool
	progress   io.Writer // nil for no progress lines
}

func cmdDiff(e *env, args []string) error {
	l := newCmdLine("diff", 0, 1)
	srv := l.withServers(e)
	var o diffOptions
	l.Func("ignore", "", func(s string) error {
		if err := validatePath(s); err != nil {
			return err
		}
		o.ignore = append(o.ignore, s)
		return nil
	})
	l.BoolVar(&o.system, "system", false, "")
	l.BoolVar(&o.skipZxids, "skip-zxids", false, "")
	l.BoolVar(&o.skipTimes, "skip-times", false, "")
	l.BoolVar(&o.skipOwners, "skip-owners", false, "")
	progress := l.Bool("progress", false, "")
	if err := l.parse(args); err != nil {
		return err
	}
	if err := srv.check(); err != nil {
		return err
	}
	root := "/"
	if l.NArg() == 1 {
		root = l.Arg(0)
	}
	if err := validatePath(root); err != nil {
		return usageError{err.Error()}
	}
	if isSystem(root) {
		o.system = true // asked for by name
	}
	if *progress || isTerminal(e.stderr) {
		o.progress = e.stderr
	}
	fc, err := connect(*srv.from, *srv.fromAuth, e.timeout)
	if err != nil {
		return exitStatus{2, fmt.Errorf("diff: --from: %w", err)}
	}
	defer fc.Close()
	tc, err := connect(*srv.to, *srv.toAuth, e.timeout)
	if err != nil {
		return exitStatus{2, fmt.Errorf("diff: --to: %w", err)}
	}
	defer tc.Close()
	d := &differ{e: e, from: fc, to: tc, opts: o}
	if err := d.run(root); err != nil {
		return exitStatus{2, fmt.Errorf("diff: %w", err)}
	}
	if len(d.diffs) == 0 && d.nodes.Load() == 0 {
		return exitStatus{2, fmt.Errorf("diff: %s exists on neither server", root)}
	}
	if err := d.print(); err != nil {
		return exitStatus{2, err}
	}
	if len(d.diffs) > 0 {
		return exitStatus{1, nil}
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// differ is one diff run.
type differ struct {
	e        *env
	from, to *client
	opts     diffOptions
	nodes    atomic.Int64 // nodes seen on either side

	mu    sync.Mutex // guards the fields below and the progress lines
	diffs []difference
	zxids []zxidPair // of the nodes on both sides
	only  []*onlyOn
}

// side says which servers a walked path exists on.
type side int

const (
	onBoth side = iota
	onFrom
	onTo
)

func (s side) String() string {
	if s == onFrom {
		return "from"
	}
	return "to"
}

// difference is one line of output. Lines are ordered by path, then by field.
type difference struct {
	path     string
	field    string
	order    int // the field's place in diffFields
	from, to string
}

// diffFields are the fields in the order a node's differences print.
var diffFields = []string{"only", "data", "acl", "children", "version", "cversion", "aversion", "numChildren", "dataLength", "ephemeralOwner", "ctime", "mtime", "czxid", "mzxid", "pzxid"}

// onlyOn is a node present on one side only, with the size of its subtree so far.
type onlyOn struct {
	path  string
	side  side
	nodes atomic.Int64
}

// zxidPair is a node's zxids on both sides: czxid, mzxid, pzxid.
type zxidPair struct {
	path     string
	from, to [3]int64
}

// walkItem is one path to visit; only is set on the paths of a one-sided subtree.
type walkItem struct {
	path string
	side side
	only *onlyOn
}

// nodeState is what one server shows of a node.
type nodeState struct {
	exists   bool
	data     []byte
	dataErr  string // "NoAuth" when the data may not be read
	acl      []zk.ACL
	aclErr   string   // "NoAuth" when neither the ACL nor the Stat may be read
	stat     *zk.Stat // nil with aclErr
	children []string // sorted
	childErr string   // "NoAuth" when the children may not be listed
}

// readNode reads p from c. A node that does not exist is no error.
func (c *client) readNode(p string) (nodeState, error) {
	var n nodeState
	data, st, err := c.conn.Get(c.abs(p))
	switch {
	case err == nil:
		n.data = data
	case isCode(err, encoding.ErrNoNode):
		return n, nil
	case isCode(err, encoding.ErrNoAuth):
		// exists needs READ as well; getACL, which returns the Stat too, needs READ or ADMIN.
		n.dataErr = "NoAuth"
	default:
		return n, opErr("get", p, err)
	}
	acl, ast, err := c.conn.GetACL(c.abs(p))
	switch {
	case isCode(err, encoding.ErrNoNode):
		return nodeState{}, nil
	case isCode(err, encoding.ErrNoAuth):
		// Nothing of the node can be read but that its parent lists it.
		n.exists, n.aclErr, n.childErr = true, "NoAuth", "NoAuth"
		return n, nil
	case err != nil:
		return n, opErr("getacl", p, err)
	}
	if st == nil || n.dataErr != "" {
		st = ast
	}
	n.acl, n.stat, n.exists = acl, st, true
	if st.NumChildren == 0 {
		return n, nil
	}
	children, err := c.readChildren(p)
	switch {
	case isCode(err, encoding.ErrNoNode):
		return nodeState{}, nil
	case isCode(err, encoding.ErrNoAuth):
		n.childErr = "NoAuth"
	case err != nil:
		return n, err
	}
	n.children = children
	return n, nil
}

// readChildren lists p's children, sorted.
func (c *client) readChildren(p string) ([]string, error) {
	children, _, err := c.conn.Children(c.abs(p))
	if err != nil {
		return nil, opErr("getChildren", p, err)
	}
	slices.Sort(children)
	return children, nil
}

// ignored reports whether p is left out of the comparison.
func (d *differ) ignored(p string) bool {
	for _, ig := range d.opts.ignore {
		if p == ig || ig == "/" || strings.HasPrefix(p, ig+"/") {
			return true
		}
	}
	return !d.opts.system && (isSystem(d.from.abs(p)) || isSystem(d.to.abs(p)))
}

// run walks both trees under root with diffInflight workers and collects the differences.
func (d *differ) run(root string) error {
	w := newWalker()
	w.stack = []walkItem{{path: root}}
	var wg sync.WaitGroup
	for range diffInflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work(d.visit)
		}()
	}
	wg.Wait()
	if w.err != nil {
		return w.err
	}
	if !d.opts.skipZxids {
		d.compareZxids()
	}
	for _, o := range d.only {
		if n := o.nodes.Load(); n > 0 {
			d.diffs = append(d.diffs, difference{path: o.path, field: "only", from: o.side.String(), to: strconv.FormatInt(n, 10)})
		}
	}
	slices.SortFunc(d.diffs, func(a, b difference) int {
		if c := comparePaths(a.path, b.path); c != 0 {
			return c
		}
		return a.order - b.order
	})
	return nil
}

// comparePaths orders paths as a tree: a node before its children, siblings by name. It
// compares the bytes with '/' below every other byte.
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x == '/' {
			return -1
		}
		if y == '/' {
			return 1
		}
		return int(x) - int(y)
	}
	return len(a) - len(b)
}

// visit reads one path and returns the children to visit next. It fails once the command is
// interrupted.
func (d *differ) visit(it walkItem) ([]walkItem, error) {
	if err := d.e.ctx.Err(); err != nil {
		return nil, err
	}
	if it.side != onBoth {
		return d.visitOneSide(it)
	}
	var fn nodeState
	var ferr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn, ferr = d.from.readNode(it.path)
	}()
	tn, terr := d.to.readNode(it.path)
	<-done
	if ferr != nil {
		return nil, fmt.Errorf("--from %s: %w", d.from.addr, ferr)
	}
	if terr != nil {
		return nil, fmt.Errorf("--to %s: %w", d.to.addr, terr)
	}
	switch {
	case !fn.exists && !tn.exists:
		return nil, nil // deleted while we walked
	case !tn.exists:
		return d.onlyOnOneSide(it.path, onFrom, fn.children), nil
	case !fn.exists:
		return d.onlyOnOneSide(it.path, onTo, tn.children), nil
	}
	d.count()
	d.compare(it.path, &fn, &tn)
	if fn.childErr != "" || tn.childErr != "" {
		return nil, nil // the children line tells; one side's list alone says nothing
	}
	return d.children(it.path, fn.children, tn.children), nil
}

// visitOneSide counts a node of a one-sided subtree and returns its children.
func (d *differ) visitOneSide(it walkItem) ([]walkItem, error) {
	c := d.from
	if it.side == onTo {
		c = d.to
	}
	children, err := c.readChildren(it.path)
	switch {
	case isCode(err, encoding.ErrNoNode):
		return nil, nil
	case isCode(err, encoding.ErrNoAuth):
		children = nil
	case err != nil:
		return nil, fmt.Errorf("--%s %s: %w", it.side, c.addr, err)
	}
	d.count()
	it.only.nodes.Add(1)
	return d.sideItems(it.path, children, it.side, it.only), nil
}

// onlyOnOneSide records p, read on s only, and returns its children to count.
func (d *differ) onlyOnOneSide(p string, s side, children []string) []walkItem {
	o := &onlyOn{path: p, side: s}
	o.nodes.Add(1)
	d.count()
	d.mu.Lock()
	d.only = append(d.only, o)
	d.mu.Unlock()
	return d.sideItems(p, children, s, o)
}

func (d *differ) sideItems(p string, children []string, s side, o *onlyOn) []walkItem {
	var items []walkItem
	for _, ch := range children {
		if cp := joinChild(p, ch); !d.ignored(cp) {
			items = append(items, walkItem{path: cp, side: s, only: o})
		}
	}
	return items
}

// children merges both sides' children of p into the paths to visit next.
func (d *differ) children(p string, from, to []string) []walkItem {
	var items []walkItem
	add := func(name string, s side) {
		cp := joinChild(p, name)
		if d.ignored(cp) {
			return
		}
		it := walkItem{path: cp, side: s}
		if s != onBoth {
			it.only = &onlyOn{path: cp, side: s}
			d.mu.Lock()
			d.only = append(d.only, it.only)
			d.mu.Unlock()
		}
		items = append(items, it)
	}
	i, j := 0, 0
	for i < len(from) || j < len(to) {
		switch {
		case j == len(to) || (i < len(from) && from[i] < to[j]):
			add(from[i], onFrom)
			i++
		case i == len(from) || to[j] < from[i]:
			add(to[j], onTo)
			j++
		default:
			add(from[i], onBoth)
			i++
			j++
		}
	}
	return items
}

func joinChild(p, name string) string {
	if p == "/" {
		return "/" + name
	}
	return p + "/" + name
}

// count counts one node and prints progress.
func (d *differ) count() {
	n := d.nodes.Add(1)
	if d.opts.progress != nil && n%progressEvery == 0 {
		d.mu.Lock()
		fmt.Fprintf(d.opts.progress, "zkctl: diff: %d nodes compared\n", n)
		d.mu.Unlock()
	}
}

// compare records the differences of a node present on both sides, except its zxids, which
// it keeps for compareZxids.
func (d *differ) compare(p string, f, t *nodeState) {
	var out []difference
	add := func(field, from, to string) {
		if from != to {
			out = append(out, difference{path: p, field: field, order: slices.Index(diffFields, field), from: from, to: to})
		}
	}
	add("data", showData(f), showData(t))
	add("acl", showACL(f), showACL(t))
	add("children", showChildErr(f), showChildErr(t))
	fs, ts := f.stat, t.stat
	if fs == nil || ts == nil {
		d.record(out, nil)
		return
	}
	num := func(v int32) string { return strconv.FormatInt(int64(v), 10) }
	add("version", num(fs.Version), num(ts.Version))
	add("cversion", num(fs.Cversion), num(ts.Cversion))
	add("aversion", num(fs.Aversion), num(ts.Aversion))
	add("numChildren", num(fs.NumChildren), num(ts.NumChildren))
	add("dataLength", num(fs.DataLength), num(ts.DataLength))
	if d.opts.skipOwners {
		add("ephemeralOwner", ephemeral(fs.EphemeralOwner), ephemeral(ts.EphemeralOwner))
	} else {
		add("ephemeralOwner", fmt.Sprintf("0x%x", fs.EphemeralOwner), fmt.Sprintf("0x%x", ts.EphemeralOwner))
	}
	if !d.opts.skipTimes {
		add("ctime", showTime(fs.Ctime), showTime(ts.Ctime))
		add("mtime", showTime(fs.Mtime), showTime(ts.Mtime))
	}
	d.record(out, &zxidPair{p, [3]int64{fs.Czxid, fs.Mzxid, fs.Pzxid}, [3]int64{ts.Czxid, ts.Mzxid, ts.Pzxid}})
}

// record keeps a node's differences and zxids.
func (d *differ) record(diffs []difference, z *zxidPair) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.diffs = append(d.diffs, diffs...)
	if z != nil && !d.opts.skipZxids {
		d.zxids = append(d.zxids, *z)
	}
}

// compareZxids records the zxids whose ranks differ.
func (d *differ) compareZxids() {
	var fromAll, toAll []int64
	for _, z := range d.zxids {
		fromAll = append(fromAll, z.from[:]...)
		toAll = append(toAll, z.to[:]...)
	}
	fromRanks, toRanks := distinctSorted(fromAll), distinctSorted(toAll)
	for _, z := range d.zxids {
		for i, field := range []string{"czxid", "mzxid", "pzxid"} {
			fr, _ := slices.BinarySearch(fromRanks, z.from[i])
			tr, _ := slices.BinarySearch(toRanks, z.to[i])
			if fr != tr {
				d.diffs = append(d.diffs, difference{path: z.path, field: field, order: slices.Index(diffFields, field),
					from: fmt.Sprintf("0x%x (rank %d)", z.from[i], fr), to: fmt.Sprintf("0x%x (rank %d)", z.to[i], tr)})
			}
		}
	}
}

// distinctSorted sorts v and removes duplicates; a value's index is its rank.
func distinctSorted(v []int64) []int64 {
	slices.Sort(v)
	return slices.Compact(v)
}

// showDataMax is how many bytes of data a difference line shows.
const showDataMax = 64

func showData(n *nodeState) string {
	switch {
	case n.dataErr != "":
		return "<" + n.dataErr + ">"
	case n.data == nil:
		return "null"
	}
	b := n.data
	var s string
	if len(b) > showDataMax {
		s = fmt.Sprintf("…(%d bytes, hash %016x)", len(b), shortHash(b))
		b = b[:showDataMax]
	}
	if utf8.Valid(b) {
		return strconv.Quote(string(b)) + s
	}
	return fmt.Sprintf("0x%x", b) + s
}

// shortHash tells long data apart that agrees in its first showDataMax bytes.
func shortHash(b []byte) uint64 {
	// FNV-1a, enough to tell two values apart in a message.
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

func showACL(n *nodeState) string {
	if n.aclErr != "" {
		return "<" + n.aclErr + ">"
	}
	parts := make([]string, len(n.acl))
	for i, a := range n.acl {
		parts[i] = formatACL(a)
	}
	return strings.Join(parts, ",")
}

func showTime(ms int64) string {
	return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
}

func ephemeral(owner int64) string {
	if owner == 0 {
		return "persistent"
	}
	return "ephemeral"
}

func showChildErr(n *nodeState) string {
	if n.childErr != "" {
		return "<" + n.childErr + ">"
	}
	return "listed"
}

// print writes the differences and the summary line.
func (d *differ) print() error {
	var b bytes.Buffer
	for _, x := range d.diffs {
		if d.e.json {
			obj := map[string]any{"path": x.path, "field": x.field, "from": x.from, "to": x.to}
			if x.field == "only" {
				n, _ := strconv.Atoi(x.to)
				obj = map[string]any{"path": x.path, "field": x.field, "on": x.from, "nodes": n}
			}
			if err := d.e.printJSON(obj); err != nil {
				return err
			}
			continue
		}
		if x.field == "only" {
			fmt.Fprintf(&b, "%s: only on %s (%s nodes)\n", x.path, x.from, x.to)
		} else {
			fmt.Fprintf(&b, "%s: %s: %s != %s\n", x.path, x.field, x.from, x.to)
		}
		if b.Len() > 64<<10 {
			if _, err := d.e.stdout.Write(b.Bytes()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	if d.e.json {
		return d.e.printJSON(map[string]any{"nodes": d.nodes.Load(), "differences": len(d.diffs)})
	}
	fmt.Fprintf(&b, "%d nodes compared, %d differences\n", d.nodes.Load(), len(d.diffs))
	_, err := d.e.stdout.Write(b.Bytes())
	return err
}

// walker hands out paths to visit to a fixed set of workers until none are left or one fails.
type walker struct {
	mu      sync.Mutex
	cond    *sync.Cond
	stack   []walkItem // depth first, so that the paths waiting stay few
	active  int        // workers visiting a path
	err     error
	stopped bool
}

func newWalker() *walker {
	w := &walker{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// fail stops the walk with err, unless it has ended.
func (w *walker) fail(err error) {
	w.mu.Lock()
	if !w.stopped {
		w.err, w.stopped = err, true
	}
	w.mu.Unlock()
	w.cond.Broadcast()
}

// work visits paths until the walk ends: no path waits and no worker may add one, or a visit failed.
func (w *walker) work(visit func(walkItem) ([]walkItem, error)) {
	for {
		w.mu.Lock()
		for len(w.stack) == 0 && w.active > 0 && !w.stopped {
			w.cond.Wait()
		}
		if w.stopped || len(w.stack) == 0 {
			w.stopped = true
			w.mu.Unlock()
			w.cond.Broadcast()
			return
		}
		it := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		w.active++
		w.mu.Unlock()

		next, err := visit(it)
		if err != nil {
			w.fail(err)
		}
		// In one step with active--, so that no worker sees the walk end before next is in.
		// Broadcast even when next is empty: it wakes the workers that wait for the end.
		w.mu.Lock()
		w.active--
		w.stack = append(w.stack, next...)
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}

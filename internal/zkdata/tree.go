package zkdata

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zetcd/zetcd/encoding"
)

// openACL is ZooDefs.Ids.OPEN_ACL_UNSAFE, what ReferenceCountedACLCache returns for the id -1
// and stores for a null ACL.
var openACL = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

// znode is a DataNode: its StatPersisted, whose cversion counts the creates of children (the
// client's cversion is derived in DataNode.copyStat), its parent and how many children it has.
//
// The children's names are not kept. DataTree's children set of the node at a path holds a
// name exactly when the nodes map holds a node at path/name whose parent is that node: names
// are added with the node and removed with it. A node deleted with children (which replay over
// a fuzzy snapshot can do, as DataTree.deleteNode does not look) leaves them in the map,
// unreachable, and a node created at that path again starts with no children; the parent
// pointer tells those orphans apart.
type znode struct {
	data     []byte
	acl      []encoding.ACL
	czxid    int64
	mzxid    int64
	ctime    int64
	mtime    int64
	version  int32
	cversion int32
	aversion int32
	owner    int64
	pzxid    int64
	parent   *znode // nil for the root
	nchild   int32
	// missingACL is the ACL id of a snapshot's node that its ACL cache lacks, until a
	// setACL sets the ACL; acl is nil meanwhile.
	missingACL int64
	dead       bool // deleted, or another node took its path
	orphan     int8 // set by state: 1 reachable from the root, -1 not
	path       string
	out        *Node // set by state
}

// tree is a DataTree: nodes by path with the root at "" (as DataTree keys it), the ephemerals
// by session, and the open sessions (FileTxnSnapLog.restore's map) by id.
type tree struct {
	nodes map[string]*znode
	// order holds every node the tree gained, dead ones too, in that order: walking it
	// reads the nodes about in the order they lie in memory, as a walk of the map does not.
	order      []*znode
	ephemerals map[int64]map[string]struct{}
	sessions   map[int64]int32
}

// The KeeperExceptions DataTree's changes throw; replay ignores them
// (FileTxnSnapLog.processTransaction), they only steer the NodeExists rule of processTxn.
var (
	errNoNode     = errors.New("no node")
	errNodeExists = errors.New("node exists")
)

// newTree is an empty tree whose map has room for about nodes nodes.
func newTree(nodes int) *tree {
	return &tree{
		nodes:      make(map[string]*znode, nodes),
		order:      make([]*znode, 0, nodes),
		ephemerals: make(map[int64]map[string]struct{}),
		sessions:   make(map[int64]int32),
	}
}

// initialTree is the tree of a new DataTree: the root, /zookeeper, /zookeeper/quota and
// /zookeeper/config, the last with the read-only world ACL and aversion -1 (DataTree's
// constructor and addConfigNode).
func initialTree() *tree {
	t := newTree(0)
	t.put("", &znode{data: []byte{}, acl: openACL}, nil)
	for _, p := range []string{"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		t.add(p, &znode{data: []byte{}, acl: openACL})
	}
	cfg := t.nodes["/zookeeper/config"]
	cfg.acl = []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}
	cfg.aversion = -1
	return t
}

// split returns a path's parent and last name, as DataTree cuts them at the last '/'.
func split(path string) (parent, name string) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// add puts n at path, under its parent, which exists.
func (t *tree) add(path string, n *znode) {
	parent, _ := split(path)
	t.addUnder(path, n, t.nodes[parent], nil)
}

// addUnder puts n at path under parent, in place of old, the node at path if the caller
// knows it.
func (t *tree) addUnder(path string, n *znode, parent *znode, old *znode) {
	n.parent = parent
	parent.nchild++
	t.put(path, n, old)
}

// put puts n at path in place of old, which is dead from then on (an orphan whose parent was
// deleted under it: createNode refuses a path that is not). A caller that does not know the
// node at path passes nil, and calls replaced once done.
func (t *tree) put(path string, n *znode, old *znode) {
	if old != nil {
		old.dead = true
	}
	n.path = path
	t.nodes[path] = n
	t.order = append(t.order, n)
}

// replaced marks dead the nodes that others took the path of in puts whose callers did not
// know them, as DataTree.deserialize's map put drops them; their parent counted them once
// (DataNode.addChild adds a name to a set).
func (t *tree) replaced() {
	if len(t.order) == len(t.nodes) {
		return // each put was of a path of its own
	}
	for _, n := range t.order {
		if !n.dead && t.nodes[n.path] != n {
			n.dead = true
			if n.parent != nil {
				n.parent.nchild--
			}
		}
	}
}

// indexEphemeral records a node in its session's ephemerals when it is a session's
// (DataTree.createNode and deserialize).
func (t *tree) indexEphemeral(path string, owner int64) {
	if TypeOf(owner) != Ephemeral {
		return
	}
	s := t.ephemerals[owner]
	if s == nil {
		s = make(map[string]struct{})
		t.ephemerals[owner] = s
	}
	s[path] = struct{}{}
}

// createNode is DataTree.createNode.
func (t *tree) createNode(path string, data []byte, acl []encoding.ACL, owner int64, parentCVersion int32, zxid, time int64) error {
	parentPath, _ := split(path)
	parent := t.nodes[parentPath]
	if parent == nil {
		return errNoNode
	}
	old := t.nodes[path]
	if old != nil && old.parent == parent {
		return errNodeExists
	}
	if parentCVersion == -1 {
		parentCVersion = parent.cversion + 1
	}
	// A create replayed after a fuzzy snapshot of a node created and deleted meanwhile must
	// not take the parent's cversion and pzxid back.
	if parentCVersion > parent.cversion {
		parent.cversion = parentCVersion
		parent.pzxid = zxid
	}
	if acl == nil {
		acl = openACL
	}
	t.addUnder(path, &znode{data: data, acl: acl, czxid: zxid, mzxid: zxid, pzxid: zxid, ctime: time, mtime: time, owner: owner}, parent, old)
	t.indexEphemeral(path, owner)
	return nil
}

// deleteNode is DataTree.deleteNode: the parent loses the name and has its pzxid moved forward
// even when the node itself is gone, which a fuzzy snapshot's replay relies on.
func (t *tree) deleteNode(path string, zxid int64) error {
	parentPath, _ := split(path)
	parent := t.nodes[parentPath]
	if parent == nil {
		return errNoNode
	}
	if zxid > parent.pzxid {
		parent.pzxid = zxid
	}
	n := t.nodes[path]
	if n == nil {
		return errNoNode
	}
	delete(t.nodes, path)
	n.dead = true
	if n.parent == parent {
		parent.nchild--
	}
	if TypeOf(n.owner) == Ephemeral {
		delete(t.ephemerals[n.owner], path)
	}
	return nil
}

// setData is DataTree.setData: the version is the txn's, not an increment.
func (t *tree) setData(path string, data []byte, version int32, zxid, time int64) error {
	n := t.nodes[path]
	if n == nil {
		return errNoNode
	}
	n.data, n.mtime, n.mzxid, n.version = data, time, zxid, version
	return nil
}

// setACL is DataTree.setACL.
func (t *tree) setACL(path string, acl []encoding.ACL, version int32) error {
	n := t.nodes[path]
	if n == nil {
		return errNoNode
	}
	if acl == nil {
		acl = openACL
	}
	n.acl, n.aversion, n.missingACL = acl, version, 0
	return nil
}

// setCversionPzxid is DataTree.setCversionPzxid.
func (t *tree) setCversionPzxid(path string, cversion int32, zxid int64) error {
	path = strings.TrimSuffix(path, "/")
	n := t.nodes[path]
	if n == nil {
		return errNoNode
	}
	if cversion == -1 {
		cversion = n.cversion + 1
	}
	if cversion > n.cversion {
		n.cversion, n.pzxid = cversion, zxid
	}
	return nil
}

// killSession is DataTree.killSession: the paths the CloseSessionTxn names, then the session's
// other ephemerals; a node already gone is passed over.
func (t *tree) killSession(session, zxid int64, inTxn []string) {
	local := t.ephemerals[session]
	delete(t.ephemerals, session)
	for _, p := range inTxn {
		_ = t.deleteNode(p, zxid)
		delete(local, p)
	}
	for _, p := range sortedKeys(local) {
		_ = t.deleteNode(p, zxid)
	}
}

// processTxn applies one transaction as FileTxnSnapLog.processTransaction and
// DataTree.processTxn do. The error is not nil only for a record ZooKeeper could not apply at
// all; the KeeperExceptions of replay are ignored.
func (t *tree) processTxn(h txnHeader, rec any) error {
	switch h.typ {
	case encoding.OpCreateSession:
		t.sessions[h.clientID] = rec.(*createSessionTxn).timeout
		return nil
	case encoding.OpCloseSession:
		delete(t.sessions, h.clientID)
		var paths []string
		if c, ok := rec.(*closeSessionTxn); ok {
			paths = c.paths
		}
		t.killSession(h.clientID, h.zxid, paths)
		return nil
	}
	_, err := t.apply(h, rec)
	return err
}

// apply is DataTree.processTxn for a txn or a multi's sub-txn; it returns the KeeperException
// the change threw, and an error for a record that cannot be applied.
func (t *tree) apply(h txnHeader, rec any) (kerr, err error) {
	switch r := rec.(type) {
	case *createTxn:
		owner := r.owner
		if r.ephemeral {
			owner = h.clientID
		}
		kerr = t.createNode(r.path, r.data, r.acl, owner, r.parentCVersion, h.zxid, h.time)
		// A create replayed over a fuzzy snapshot that holds the node still counts for the
		// parent; DataTree.processTxn does this for OpCode.create only.
		if kerr == errNodeExists && h.typ == encoding.OpCreate {
			parent, _ := split(r.path)
			_ = t.setCversionPzxid(parent, r.parentCVersion, h.zxid)
		}
	case *deleteTxn:
		kerr = t.deleteNode(r.path, h.zxid)
	case *setDataTxn:
		kerr = t.setData(r.path, r.data, r.version, h.zxid, h.time)
	case *setACLTxn:
		kerr = t.setACL(r.path, r.acl, r.version)
	case *checkTxn, *errorTxn:
	case *multiTxn:
		return nil, t.applyMulti(h, r)
	default:
		return nil, fmt.Errorf("txn type %d: unexpected record %T", h.typ, rec)
	}
	return kerr, nil
}

// applyMulti is the multi case of DataTree.processTxn: when any sub-txn is an error, none is
// applied; otherwise each is applied in turn under the multi's header, whatever the others do.
func (t *tree) applyMulti(h txnHeader, m *multiTxn) error {
	failed := slices.ContainsFunc(m.txns, func(s subTxn) bool { return s.typ == encoding.OpError })
	for _, s := range m.txns {
		rec, err := decodeRecord(s.typ, s.data, false)
		if err != nil {
			return fmt.Errorf("multi zxid %#x: %w", h.zxid, err)
		}
		if failed {
			continue
		}
		sh := h
		sh.typ = s.typ
		if _, err := t.apply(sh, rec); err != nil {
			return err
		}
	}
	return nil
}

// deadSessions deletes the ephemerals of sessions that are not open, as ZooKeeperServer.loadData
// does after loading, at zxid, and returns those sessions.
func (t *tree) deadSessions(zxid int64) []int64 {
	var dead []int64
	for s := range t.ephemerals {
		if _, ok := t.sessions[s]; !ok {
			dead = append(dead, s)
		}
	}
	slices.Sort(dead)
	for _, s := range dead {
		t.killSession(s, zxid, nil)
	}
	return dead
}

func sortedKeys(m map[string]struct{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// state converts the tree into a State's nodes, with the Stat a client reads (DataNode.copyStat)
// but for the raw ephemeralOwner. The map of paths and the children's lists are built at once,
// on two cores: at a million nodes each takes a good part of a second.
func (t *tree) state() (nodes map[string]*Node, all []Node, orphans int, missingACL []string) {
	all = make([]Node, 0, len(t.nodes))
	for _, n := range t.order {
		switch {
		case n.dead:
			continue
		case !n.reachable():
			orphans++
			continue
		case n.missingACL != 0:
			missingACL = append(missingACL, fmt.Sprintf("%s (ACL id %d)", n.path, n.missingACL))
		}
		all = append(all, n.node(n.path))
		n.out = &all[len(all)-1]
	}
	out := make(map[string]*Node, len(all))
	indexed := make(chan struct{})
	go func() {
		defer close(indexed)
		for i := range all {
			out[all[i].Path] = &all[i]
		}
	}()
	for _, n := range t.order {
		if n.parent != nil && n.out != nil {
			_, name := split(n.path)
			n.parent.out.Children = append(n.parent.out.Children, name)
		}
	}
	for i := range all {
		slices.Sort(all[i].Children)
	}
	<-indexed
	slices.Sort(missingACL)
	return out, all, orphans, missingACL
}

// node is n's Node at path p.
func (n *znode) node(p string) Node {
	o := Node{Path: p, Data: n.data, ACL: n.acl}
	if p == "" {
		o.Path = "/"
	}
	if n.nchild > 0 {
		o.Children = make([]string, 0, n.nchild)
	}
	o.Stat = encoding.Stat{
		Czxid:          encoding.Zxid(n.czxid),
		Mzxid:          encoding.Zxid(n.mzxid),
		Ctime:          n.ctime,
		Mtime:          n.mtime,
		Version:        n.version,
		Cversion:       n.cversion*2 - n.nchild,
		Aversion:       n.aversion,
		EphemeralOwner: encoding.SessionID(n.owner),
		DataLength:     int32(len(n.data)),
		NumChildren:    n.nchild,
		Pzxid:          encoding.Zxid(n.pzxid),
	}
	return o
}

// reachable reports whether n hangs from the root through live nodes.
func (n *znode) reachable() bool {
	if n.orphan == 0 {
		switch {
		case n.dead:
			n.orphan = -1
		case n.parent == nil || n.parent.reachable():
			n.orphan = 1
		default:
			n.orphan = -1
		}
	}
	return n.orphan > 0
}

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
// client's cversion is derived in DataNode.copyStat), and its children's names.
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
	children map[string]struct{}
}

// tree is a DataTree: nodes by path with the root at "" (as DataTree keys it), the ephemerals
// by session, and the open sessions (FileTxnSnapLog.restore's map) by id.
type tree struct {
	nodes      map[string]*znode
	ephemerals map[int64]map[string]struct{}
	sessions   map[int64]int32
}

// The KeeperExceptions DataTree's changes throw; replay ignores them
// (FileTxnSnapLog.processTransaction), they only steer the NodeExists rule of processTxn.
var (
	errNoNode     = errors.New("no node")
	errNodeExists = errors.New("node exists")
)

func newTree() *tree {
	return &tree{
		nodes:      make(map[string]*znode),
		ephemerals: make(map[int64]map[string]struct{}),
		sessions:   make(map[int64]int32),
	}
}

// initialTree is the tree of a new DataTree: the root, /zookeeper, /zookeeper/quota and
// /zookeeper/config, the last with the read-only world ACL and aversion -1 (DataTree's
// constructor and addConfigNode).
func initialTree() *tree {
	t := newTree()
	t.nodes[""] = &znode{data: []byte{}, acl: openACL}
	for _, p := range []string{"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		t.nodes[p] = &znode{data: []byte{}, acl: openACL}
		t.addChild(p)
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

// addChild links path to its parent, which exists.
func (t *tree) addChild(path string) {
	parent, name := split(path)
	p := t.nodes[parent]
	if p.children == nil {
		p.children = make(map[string]struct{})
	}
	p.children[name] = struct{}{}
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
	parentPath, name := split(path)
	parent := t.nodes[parentPath]
	if parent == nil {
		return errNoNode
	}
	if _, ok := parent.children[name]; ok {
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
	t.nodes[path] = &znode{data: data, acl: acl, czxid: zxid, mzxid: zxid, pzxid: zxid, ctime: time, mtime: time, owner: owner}
	t.addChild(path)
	t.indexEphemeral(path, owner)
	return nil
}

// deleteNode is DataTree.deleteNode: the parent loses the name and has its pzxid moved forward
// even when the node itself is gone, which a fuzzy snapshot's replay relies on.
func (t *tree) deleteNode(path string, zxid int64) error {
	parentPath, name := split(path)
	parent := t.nodes[parentPath]
	if parent == nil {
		return errNoNode
	}
	delete(parent.children, name)
	if zxid > parent.pzxid {
		parent.pzxid = zxid
	}
	n := t.nodes[path]
	if n == nil {
		return errNoNode
	}
	delete(t.nodes, path)
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
	n.acl, n.aversion = acl, version
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
// but for the raw ephemeralOwner.
func (t *tree) state() map[string]*Node {
	out := make(map[string]*Node, len(t.nodes))
	for p, n := range t.nodes {
		children := sortedKeys(n.children)
		nc := int32(len(children))
		path := p
		if p == "" {
			path = "/"
		}
		out[path] = &Node{
			Path:     path,
			Data:     n.data,
			ACL:      n.acl,
			Children: children,
			Stat: encoding.Stat{
				Czxid:          encoding.Zxid(n.czxid),
				Mzxid:          encoding.Zxid(n.mzxid),
				Ctime:          n.ctime,
				Mtime:          n.mtime,
				Version:        n.version,
				Cversion:       n.cversion*2 - nc,
				Aversion:       n.aversion,
				EphemeralOwner: encoding.SessionID(n.owner),
				DataLength:     int32(len(n.data)),
				NumChildren:    nc,
				Pzxid:          encoding.Zxid(n.pzxid),
			},
		}
	}
	return out
}

package etcdstore

import (
	"context"
	"slices"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// A multi's overlay (multiState): the nodes its ops touch, read at one revision from the
// replica (or etcd), and their state after the ops simulated so far (checks.go).

// mnode is one znode in a multi's overlay: the keys read at the read revision, and its state
// after the ops simulated so far.
type mnode struct {
	path string
	// read is false for a node that was not read (a sequential name): it is assumed absent,
	// and the commit guards that.
	read bool
	// keys are the node's keys as read (nodeKeys.exists false: the data key is absent).
	keys nodeKeys

	// Simulated state. stat.Cversion is derived from c when a Stat is handed out.
	exists bool
	stat   encoding.Stat
	c      int64 // create counter C
	data   []byte
	meta   aclValue

	touched      bool // changed by an op (or a parent of a changed node)
	created      bool // (re)created by this multi: czxid is the commit's revision
	dataWrites   int  // setData ops since it was read or created
	aclWrites    int  // setACL ops since it was read or created
	childCreates int  // children created since it was read or created
	childDeletes int  // children deleted since it was read or created
	statsWrites  int  // quota statistics put in its data since it was read (quota.go)
	// The indexes (zxid.go) of the writes that last created the node, put its data (setData or
	// create), created a child and deleted a child, for the values that keep them (values.go).
	createdIx, dataIx, createsIx, deletesIx uint16
}

// statNow returns the node's Stat after the ops simulated so far.
func (n *mnode) statNow() encoding.Stat {
	st := n.stat
	st.Cversion = int32(2*n.c - int64(st.NumChildren))
	return st
}

// multiState is a multi's overlay of the tree.
type multiState struct {
	keys keySchema
	// rev is the replica's revision the overlay was read at, with no node read too: every
	// change of the tree and of the session keys up to rev is in what the check saw
	// (observeSessionKeys runs before the replica shows a revision), so guards compare
	// against it.
	rev   int64
	nodes map[string]*mnode
	// lookup reads a node the read set could not name (a sequential create's name) at rev, or
	// returns nil: the replica has moved past rev. A node it cannot read is assumed absent,
	// and the commit guards its absence.
	lookup func(path string) *mnode
	// auth is the identities of the connection running the multi, for the ACL checks;
	// providers says which optional schemes ACLs may name (znode.FixupACL).
	auth      *znode.Identities
	providers znode.Providers
	// room is what the ops may add (spaceMonitor.room); growth how much the ops simulated so
	// far grow the data (negative: shrink it), puts how many bytes of data they put.
	room         room
	growth, puts int64
	// index numbers the write being simulated in the commit's revision (zxid.go).
	index uint16
	// undo holds, by path, the index in saved of the node as it was before the write being
	// simulated changed or looked at it (-1: not in nodes), and undoGrowth, undoPuts growth
	// and puts; nil undo: the simulation cannot be rolled back (begin). saved is reused from
	// write to write: a batch copies its nodes into one array rather than one object each.
	undo                 map[string]int
	saved                []mnode
	undoGrowth, undoPuts int64

	// Quotas (quota.go). quotas is the set of quota'd paths at the overlay's state: the
	// replica's at rev, then as the ops created and deleted limits nodes; quotasBefore is the
	// set before the write being simulated, which checkQuota reads. quotasChanged: an op
	// created or deleted a limits node (the commit puts the quota key); subtrees are the
	// subtrees counted for the stats nodes the ops created, which the commit guards; tree is
	// the replica the overlay was read from, which counts them.
	quotas, quotasBefore quotaSet
	quotasChanged        bool
	subtrees             []subtreeRead
	undoQuotas           quotaSet
	undoChanged          bool
	undoSubtrees         int
	enforceQuota         bool
	tree                 *replica
	log                  *zap.Logger
}

// begin starts the simulation of one write, which rollback can undo.
func (m *multiState) begin() {
	if m.undo == nil {
		m.undo = map[string]int{}
	}
	clear(m.undo)
	m.saved = m.saved[:0]
	m.undoGrowth, m.undoPuts = m.growth, m.puts
	m.quotasBefore = m.quotas
	m.undoQuotas, m.undoChanged, m.undoSubtrees = m.quotas, m.quotasChanged, len(m.subtrees)
}

// rollback undoes the write simulated since begin. A node the write looked at without having
// been read stays, reset to absent and unread: the commit guards its absence, which the
// write's failure may rest on.
func (m *multiState) rollback() {
	for p, i := range m.undo {
		if i < 0 {
			*m.nodes[p] = mnode{path: p}
			continue
		}
		*m.nodes[p] = m.saved[i]
	}
	clear(m.undo)
	m.growth, m.puts = m.undoGrowth, m.undoPuts
	m.quotas, m.quotasChanged, m.subtrees = m.undoQuotas, m.undoChanged, m.subtrees[:m.undoSubtrees]
}

// grow accounts an op that puts put bytes of data and changes the data by delta bytes:
// QuotaExceeded if it grows the data past the room there is, or puts data without shrinking
// any past the file's hard limit (space.go). ZooKeeper checks its quota after an op's other
// checks.
func (m *multiState) grow(delta, put int64) encoding.ErrCode {
	if delta > 0 && m.growth+delta > m.room.grow || delta >= 0 && put > 0 && m.puts+put > m.room.put {
		return encoding.ErrQuotaExceeded
	}
	m.growth += delta
	m.puts += put
	return 0
}

// node returns the overlay's node for path; a path that was not read is assumed absent.
func (m *multiState) node(path string) *mnode {
	n := m.nodes[path]
	if m.undo != nil {
		if _, saved := m.undo[path]; !saved {
			m.undo[path] = -1
			if n != nil {
				m.saved = append(m.saved, *n)
				m.undo[path] = len(m.saved) - 1
			}
		}
	}
	if n == nil {
		if m.lookup != nil {
			n = m.lookup(path)
		}
		if n == nil {
			n = &mnode{path: path}
		}
		m.nodes[path] = n
	}
	return n
}

// readSet returns, sorted and each once, extra and the paths the writes' ops need read: the op
// paths and the parents of creates and deletes. A sequential create's own name is not known yet.
func readSet(batch []*pendingWrite, extra []string) []string {
	set := map[string]bool{}
	for _, p := range extra {
		set[p] = true
	}
	for _, w := range batch {
		addReadSet(set, w.ops)
	}
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// addReadSet adds to set the paths ops need read (readSet).
func addReadSet(set map[string]bool, ops []mop) {
	for _, o := range ops {
		switch o.op {
		case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
			if parent, ok := znode.Parent(o.path); ok {
				set[parent] = true
			}
			if !o.flags.IsSequential() {
				set[o.path] = true
			}
		case encoding.OpDelete:
			if parent, ok := znode.Parent(o.path); ok {
				set[parent] = true
			}
			set[o.path] = true
		default:
			set[o.path] = true
		}
	}
}

// readMultiState builds the overlay of paths at one revision, from the replica once it has
// reached floor and everything this process answered (awaitFloor).
func (b *Store) readMultiState(ctx context.Context, paths []string, floor int64) (*multiState, error) {
	m := &multiState{keys: b.keys, nodes: make(map[string]*mnode, len(paths)+4), room: b.space.room(),
		enforceQuota: b.enforceQuota, log: b.log}
	if len(paths) == 0 {
		m.rev = b.tree.revision()
		return m, nil
	}
	if err := b.awaitFloor(ctx, floor); err != nil {
		return nil, err
	}
	var err error
	read := make([]mnode, len(paths)) // one allocation for the nodes read
	m.rev = b.tree.read(func(v replicaView) {
		m.quotas = v.r.t.quotas
		for i, p := range paths {
			n := &read[i]
			if err = v.overlayNode(n, p); err != nil {
				return
			}
			m.nodes[p] = n
		}
	})
	m.lookup = func(p string) *mnode { return b.tree.nodeAt(p, m.rev) }
	m.tree = b.tree
	return m, err
}

// fromKeys makes n the overlay's node for the keys read of path; migrated as for
// nodeKeys.node.
func (n *mnode) fromKeys(path string, keys nodeKeys, numChildren int64, migrated *zxidTable) error {
	*n = mnode{path: path, read: true, keys: keys}
	if !keys.exists() {
		return keys.decodeErr()
	}
	nd, err := keys.node(path, numChildren, migrated)
	if err != nil {
		return err
	}
	more := keys.moreOrZero()
	n.exists, n.stat, n.data, n.meta = true, nd.Stat, nd.Data, nd.Meta
	n.c = more.offs.Creates + more.creates.version
	return nil
}

// Node implements znode.View over the overlay: the tree as read, with the ops simulated so far.
// A path the check looks at is recorded (m.node), read or not, so that the commit guards every
// node a decision rested on, also the absence of one that was not read.
func (m *multiState) Node(path string) znode.Node {
	n := m.node(path)
	if !n.exists {
		return znode.Node{}
	}
	return znode.Node{
		Exists: true, Version: n.stat.Version, Aversion: n.stat.Aversion, NumChildren: n.stat.NumChildren,
		EphemeralOwner: n.stat.EphemeralOwner, ACL: n.meta.ACL, Creates: n.c,
	}
}

// unreadPaths lists the overlay's nodes that were guarded as absent without being read.
func (m *multiState) unreadPaths() []string {
	var out []string
	for p, n := range m.nodes {
		if !n.read {
			out = append(out, p)
		}
	}
	return out
}

package zkdata

import (
	"iter"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// Options changes how Load reads a directory. The zero value is ready to use.
type Options struct {
	// Progress, when set, is called as files are opened and every progressEvery transactions,
	// from Load's goroutine.
	Progress func(Progress)
	// Log receives what Load skips and why; nil logs nothing.
	Log *zap.Logger
}

// Progress is how far a Load has come.
type Progress struct {
	File  string // the file being read
	Files int    // files opened so far, this one included
	Nodes int    // nodes read from the snapshot so far
	Txns  int64  // transactions read from logs so far, replayed or not
}

// State is what ZooKeeper holds after loading a data directory.
type State struct {
	// Nodes holds every znode by path, "/" and the system nodes /zookeeper,
	// /zookeeper/quota and /zookeeper/config (when the snapshot has it) included.
	Nodes map[string]*Node
	// Sessions are the open sessions by id. A session's ephemerals are the nodes whose
	// Stat.EphemeralOwner is its id.
	Sessions map[int64]Session
	// LastZxid is the zxid of the newest transaction applied, or the snapshot's zxid.
	LastZxid int64
	// Snapshot is the path of the snapshot loaded, "" when there was none.
	Snapshot string
	// Skipped says, one line each, what was passed over and why: damaged snapshots, a torn
	// last log entry, ephemerals of sessions that are not open.
	Skipped []string
	// loaded holds the Nodes of a State from Load, in the order the tree gained them.
	loaded []Node
}

// All yields every node of Nodes. For a State from Load whose Nodes were not changed since,
// it yields them in the order the tree gained them (a node's parent before it), reading memory
// about in order; for any other, in the map's order.
func (s *State) All() iter.Seq[*Node] {
	return func(yield func(*Node) bool) {
		if len(s.loaded) == len(s.Nodes) {
			for i := range s.loaded {
				if !yield(&s.loaded[i]) {
					return
				}
			}
			return
		}
		for _, n := range s.Nodes {
			if !yield(n) {
				return
			}
		}
	}
}

// Session is an open session.
type Session struct {
	ID      int64
	Timeout int32 // negotiated timeout, ms (CreateSessionTxn.timeOut)
}

// Node is one znode.
type Node struct {
	Path     string
	Data     []byte // nil for null data
	ACL      []encoding.ACL
	Stat     encoding.Stat // as a client reads it, but for EphemeralOwner: see the package doc
	Children []string      // names, sorted
}

// EphemeralType is a node's kind, as ZooKeeper's EphemeralType tells it from ephemeralOwner.
type EphemeralType int

const (
	Persistent EphemeralType = iota // ephemeralOwner 0 (EphemeralType.VOID)
	Ephemeral                       // owned by a session (EphemeralType.NORMAL)
	Container                       // ephemeralOwner ContainerOwner
	TTL                             // 0xff in the high byte, 0x0000 after it, the TTL below
)

func (t EphemeralType) String() string {
	switch t {
	case Persistent:
		return "persistent"
	case Ephemeral:
		return "ephemeral"
	case Container:
		return "container"
	case TTL:
		return "ttl"
	}
	return "unknown"
}

// ContainerOwner is the ephemeralOwner of a container (EphemeralType.CONTAINER_EPHEMERAL_OWNER).
const ContainerOwner int64 = -1 << 63

// The TTL layout of ephemeralOwner (EphemeralType): the high byte all ones, two bytes naming the
// extended type (zero for TTL), and the TTL in ms in the low 40 bits.
const (
	extendedMask     = -1 << 56 // 0xff00000000000000
	extendedTypeMask = 0x00ffff0000000000
	ttlMask          = 0x000000ffffffffff
)

// TypeOf returns the kind of node whose stored ephemeralOwner is owner, as EphemeralType.get
// does with extended types enabled.
func TypeOf(owner int64) EphemeralType {
	switch {
	case owner == 0:
		return Persistent
	case owner == ContainerOwner:
		return Container
	case owner&extendedMask == extendedMask && owner&extendedTypeMask == 0:
		return TTL
	}
	return Ephemeral
}

// TTLOwner returns the ephemeralOwner of a TTL node with the given TTL in ms
// (EphemeralType.TTL.toEphemeralOwner), and false when ttl is out of range.
func TTLOwner(ttl int64) (int64, bool) {
	if ttl <= 0 || ttl > ttlMask {
		return 0, false
	}
	return extendedMask | ttl, true
}

// Type returns the node's kind.
func (n *Node) Type() EphemeralType { return TypeOf(int64(n.Stat.EphemeralOwner)) }

// TTL returns a TTL node's TTL in ms, 0 for other nodes.
func (n *Node) TTL() int64 {
	if n.Type() != TTL {
		return 0
	}
	return int64(n.Stat.EphemeralOwner) & ttlMask
}

// ClientStat returns the Stat a client reads: that of Stat with ephemeralOwner 0 for
// containers and TTL nodes (DataNode.getClientEphemeralOwner).
func (n *Node) ClientStat() encoding.Stat {
	s := n.Stat
	if t := n.Type(); t == Container || t == TTL {
		s.EphemeralOwner = 0
	}
	return s
}

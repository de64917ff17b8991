package znode

import "github.com/zetcd/zetcd/encoding"

// Kind is what a create makes, which ZooKeeper decides from the opcode as well as the flags:
// createContainer makes a container whatever its (non-TTL) flags, createTTL a TTL node, create
// and create2 a session ephemeral or a persistent node (container flags with opcode create or
// create2 make a plain persistent node in ZooKeeper 3.9). It is stored as the ACL value's Mode.
func Kind(op encoding.Op, flags encoding.CreateMode) encoding.CreateMode {
	switch {
	case op == encoding.OpCreateContainer:
		return encoding.ModeContainer
	case op == encoding.OpCreateTTL:
		return encoding.ModePersistentWithTTL
	case flags.IsEphemeral():
		return encoding.ModeEphemeral
	}
	return encoding.ModePersistent
}

// IsReaped reports whether nodes of kind have a reap index key.
func IsReaped(kind encoding.CreateMode) bool { return kind.IsContainer() || kind.IsTTL() }

// MaxTTL is the largest TTL ZooKeeper accepts for TTL nodes: 2^40-1 ms.
const MaxTTL = 1<<40 - 1

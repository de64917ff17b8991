package znode

import (
	"strings"

	"github.com/zetcd/zetcd/encoding"
)

// The order of a write's checks, as ZooKeeper's PrepRequestProcessor runs them: the first
// failing check decides the error code. Each function here is that order for one write op, over
// a View of the nodes involved, and is the only place the order is written:
// the store asks it both to classify a failed guarded transaction (a View built from what the
// transaction's Else branch read) and for each op of a multi (a View of the tree with the
// multi's earlier ops applied).

// Node is what a write check needs to know of one znode.
type Node struct {
	Exists bool
	// Version and Aversion are the node's data and ACL versions (Stat.Version, Stat.Aversion).
	Version, Aversion int32
	// NumChildren counts the node's children.
	NumChildren int32
	// EphemeralOwner is the session owning an ephemeral node, else 0.
	EphemeralOwner encoding.SessionID
	// ACL is the node's ACL.
	ACL []encoding.ACL
	// Creates is the node's child create counter (C, the cversion formula's input), which
	// names its sequential children.
	Creates int64
}

// View is the read-only state of the tree a write is checked against: the committed tree plus
// the writes pending before it (earlier ops of the same multi). Node of a path the view holds
// nothing for reports a node that does not exist.
type View interface {
	Node(path string) Node
}

// Nodes is a View over a map of the nodes read; a path it lacks is a node that does not exist.
type Nodes map[string]Node

// Node implements View.
func (n Nodes) Node(path string) Node { return n[path] }

// CreateOp is a create of any opcode (create, create2, createContainer, createTTL).
type CreateOp struct {
	Op    encoding.Op
	Path  string
	ACL   []encoding.ACL
	Flags encoding.CreateMode
	// TTL is the createTTL request's TTL in milliseconds; -1 for every other opcode.
	TTL int64
}

// CheckCreateRequest runs the checks of a create that need no node, PrepRequestProcessor's first
// five: the flags, the TTL, the parent's path (a null one, encoding.NullString, is
// MarshallingError), and the ACL fixup (InvalidACL, or MarshallingError for some nulls, comes
// before any lookup).
// It returns the parent's path and the fixed ACL. who is the caller's identities (the "auth"
// scheme expands to them); p says which optional schemes ACLs may name.
func CheckCreateRequest(c CreateOp, who *Identities, p Providers) (parent string, acl []encoding.ACL, code encoding.ErrCode) {
	if !c.Flags.Valid() {
		return "", nil, encoding.ErrBadArguments
	}
	if c.Flags.IsTTL() && (c.TTL <= 0 || c.TTL > MaxTTL) || !c.Flags.IsTTL() && c.TTL >= 0 {
		return "", nil, encoding.ErrBadArguments
	}
	if c.Path == encoding.NullString { // Java's path.lastIndexOf dereferences it
		return "", nil, encoding.ErrMarshallingError
	}
	parent, ok := Parent(c.Path)
	if !ok || strings.IndexByte(c.Path, 0) >= 0 {
		return "", nil, encoding.ErrBadArguments
	}
	acl, code = who.FixupACL(c.ACL, p)
	if code != 0 {
		return "", nil, code
	}
	return parent, acl, 0
}

// CheckCreate runs every check of a create in ZooKeeper's order and returns the name of the
// node it makes (with the sequence suffix of the parent's counter for a sequential create) and
// its fixed ACL. The name is set from the parent's counter on, so a caller may report it with
// NodeExists.
func CheckCreate(v View, c CreateOp, who *Identities, p Providers) (name string, acl []encoding.ACL, code encoding.ErrCode) {
	parentPath, acl, code := CheckCreateRequest(c, who, p)
	if code != 0 {
		return "", nil, code
	}
	parent := v.Node(parentPath)
	if !parent.Exists {
		return "", nil, encoding.ErrNoNode
	}
	if !who.Allowed(parent.ACL, encoding.PermCreate) {
		return "", nil, encoding.ErrNoAuth
	}
	name = c.Path
	if c.Flags.IsSequential() {
		name = SequentialName(c.Path, parent.Creates)
	}
	if !ValidatePath(name) {
		return name, nil, encoding.ErrBadArguments
	}
	if v.Node(name).Exists {
		return name, nil, encoding.ErrNodeExists
	}
	if parent.EphemeralOwner != 0 {
		return name, nil, encoding.ErrNoChildrenForEphemerals
	}
	return name, acl, 0
}

// CheckDeleteRequest runs the checks of a delete that need no node: the path has a parent, no
// NUL, and is not a system node. It returns the parent's path.
func CheckDeleteRequest(path string) (parent string, code encoding.ErrCode) {
	parent, ok := Parent(path)
	if !ok || strings.IndexByte(path, 0) >= 0 || IsSystem(path) || path == "" {
		return "", encoding.ErrBadArguments
	}
	return parent, 0
}

// CheckDelete runs every check of a delete in ZooKeeper's order: the parent exists, its ACL
// grants DELETE, the node exists, the version matches (-1 matches any), it has no children.
func CheckDelete(v View, path string, version int32, who *Identities) encoding.ErrCode {
	parentPath, code := CheckDeleteRequest(path)
	if code != 0 {
		return code
	}
	parent := v.Node(parentPath)
	if !parent.Exists {
		return encoding.ErrNoNode
	}
	if !who.Allowed(parent.ACL, encoding.PermDelete) {
		return encoding.ErrNoAuth
	}
	n := v.Node(path)
	if !n.Exists {
		return encoding.ErrNoNode
	}
	if version != -1 && version != n.Version {
		return encoding.ErrBadVersion
	}
	if n.NumChildren > 0 {
		return encoding.ErrNotEmpty
	}
	return 0
}

// CheckSetData runs every check of a setData in ZooKeeper's order: a valid path, the node
// exists, its ACL grants WRITE, the version matches (-1 matches any).
func CheckSetData(v View, path string, version int32, who *Identities) encoding.ErrCode {
	return checkVersioned(v, path, version, who, encoding.PermWrite)
}

// CheckVersion runs the checks of a multi's check op: as setData's, with READ instead of
// WRITE.
func CheckVersion(v View, path string, version int32, who *Identities) encoding.ErrCode {
	return checkVersioned(v, path, version, who, encoding.PermRead)
}

// CheckSetACL runs the checks of a setACL on the tree in ZooKeeper's order, after the request's
// own (a valid path, the ACL fixup: InvalidACL): the node exists, its ACL grants ADMIN, the
// version matches its aversion (-1 matches any).
func CheckSetACL(v View, path string, version int32, who *Identities) encoding.ErrCode {
	n := v.Node(path)
	switch {
	case !n.Exists:
		return encoding.ErrNoNode
	case !who.Allowed(n.ACL, encoding.PermAdmin):
		return encoding.ErrNoAuth
	case version != -1 && version != n.Aversion:
		return encoding.ErrBadVersion
	}
	return 0
}

func checkVersioned(v View, path string, version int32, who *Identities, perm encoding.Perm) encoding.ErrCode {
	if !ValidatePath(path) {
		return encoding.ErrBadArguments
	}
	n := v.Node(path)
	if !n.Exists {
		return encoding.ErrNoNode
	}
	if !who.Allowed(n.ACL, perm) {
		return encoding.ErrNoAuth
	}
	if version != -1 && version != n.Version {
		return encoding.ErrBadVersion
	}
	return 0
}

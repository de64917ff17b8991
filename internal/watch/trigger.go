package watch

import (
	"strings"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/znode"
)

// EventFor says whether a change fires a watch of kind on path, and with which event. It is the
// trigger table of ZooKeeper's DataTree (which change fires which WatcherType) for one watch.
func EventFor(kind Kind, path string, c Change) (encoding.WatcherEvent, bool) {
	ev := encoding.WatcherEvent{State: encoding.StateSyncConnected, Path: c.Path}
	parent, _ := znode.Parent(c.Path)
	switch kind {
	case Data, Exist:
		if c.Path != path {
			return ev, false
		}
	case Child:
		if c.Path == path && c.Kind == Deleted {
			ev.Type = encoding.EventNodeDeleted
			return ev, true
		}
		if parent != path || c.Kind == DataChanged {
			return ev, false
		}
		return encoding.WatcherEvent{Type: encoding.EventNodeChildrenChanged, State: encoding.StateSyncConnected, Path: parent}, true
	case Persistent:
		if c.Path != path {
			if parent == path && c.Kind != DataChanged {
				return encoding.WatcherEvent{Type: encoding.EventNodeChildrenChanged, State: encoding.StateSyncConnected, Path: parent}, true
			}
			return ev, false
		}
	case PersistentRecursive:
		if !isAncestorOrSelf(path, c.Path) {
			return ev, false
		}
	}
	switch c.Kind {
	case Created:
		ev.Type = encoding.EventNodeCreated
	case Deleted:
		ev.Type = encoding.EventNodeDeleted
	default:
		ev.Type = encoding.EventNodeDataChanged
	}
	return ev, true
}

// isAncestorOrSelf reports whether a is p or an ancestor of p.
func isAncestorOrSelf(a, p string) bool {
	if a == "/" || a == p {
		return true
	}
	return strings.HasPrefix(p, a) && len(p) > len(a) && p[len(a)] == '/'
}

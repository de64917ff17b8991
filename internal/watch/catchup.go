package watch

import (
	"fmt"

	"github.com/zetcd/zetcd/encoding"
)

// State is what catch-up needs to know of one path.
type State struct {
	Exists              bool
	Czxid, Mzxid, Pzxid encoding.Zxid
	ACL                 []encoding.ACL // decides whether a catch-up event is delivered
}

// CatchUpEvent applies the rules of ZooKeeper's DataTree.setWatches to one watch armed at zxid
// since: the event to fire now, or ok=false to keep (re-arm) the watch.
func CatchUpEvent(kind Kind, path string, since encoding.Zxid, st State) (encoding.WatcherEvent, bool) {
	ev := encoding.WatcherEvent{State: encoding.StateSyncConnected, Path: path}
	switch kind {
	case Data, Child:
		// A data watch fires if the data changed since, a child watch if the children did;
		// both if the node is gone.
		changed, typ := st.Mzxid, encoding.EventNodeDataChanged
		if kind == Child {
			changed, typ = st.Pzxid, encoding.EventNodeChildrenChanged
		}
		switch {
		case !st.Exists:
			ev.Type = encoding.EventNodeDeleted
		case changed > since:
			ev.Type = typ
		default:
			return ev, false
		}
	case Exist:
		if !st.Exists {
			return ev, false
		}
		ev.Type = encoding.EventNodeCreated
	default:
		// Persistent and recursive watches are re-armed without catch-up, as ZooKeeper does.
		return ev, false
	}
	return ev, true
}

// Settle finishes a catch-up (setWatches, a resync, or a watch whose history was lost) once the
// caller has read the state of every path of regs at zxid armAt: each registration either fires
// now, with event zxid eventZxid (-1 for setWatches), or is armed at armAt with replay from
// history. One-shot watches that fire are consumed. As ZooKeeper's setWatches, an event is
// withheld (and its watch consumed all the same) from a connection without READ on the node;
// NodeDeleted has no node to decide on and always goes.
//
// The decisions are taken under mu; the events are handed to their sinks after it is released,
// like every other delivery of the registry.
func (r *Registry) Settle(regs []Registration, states map[string]State, eventZxid, armAt encoding.Zxid) error {
	var fired []delivery
	var rearm []Registration
	r.mu.Lock()
	for _, reg := range regs {
		st := states[reg.Path]
		ev, fire := CatchUpEvent(reg.Kind, reg.Path, reg.Since, st)
		if !fire {
			rearm = append(rearm, reg)
			continue
		}
		if reg.Kind.OneShot() {
			r.remove(reg.Watcher, reg.Kind, reg.Path)
		}
		if !reg.Watcher.closed && (ev.Type == encoding.EventNodeDeleted || reg.Watcher.auth == nil || reg.Watcher.auth.Allowed(st.ACL, encoding.PermRead)) {
			fired = append(fired, delivery{w: reg.Watcher, ev: ev})
		}
	}
	hold(fired)
	r.mu.Unlock()
	for _, d := range fired {
		d.w.sink.Event(d.ev, eventZxid)
	}
	r.release(fired)
	if len(rearm) > 0 && !r.registerAll(rearm, armAt) {
		return fmt.Errorf("%d watches (of %s first): history lost again during catch-up", len(rearm), rearm[0].Path)
	}
	return nil
}

// WatchedPaths lists the paths with a watch armed before zxid, each once, but "" (a watch
// there never fires): what CatchUpArmed needs the states of.
func (r *Registry) WatchedPaths(before encoding.Zxid) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var paths []string
	for k := range r.table {
		for path, set := range r.table[k] {
			if path == "" || seen[path] {
				continue
			}
			set.each(func(w *Watcher) {
				if !seen[path] && w.since[k][path] < before {
					seen[path] = true
					paths = append(paths, path)
				}
			})
		}
	}
	return paths
}

// CatchUpArmed checks the armed watches against the states of their paths at zxid armAt, after
// the feed lost the history of the changes before armAt (ResetHistory), as setWatches would on
// a reconnect: a one-shot watch that a change it missed fires fires now (event zxid -1) and is
// consumed. A watch armed at armAt or after, or on a path states lacks (armed after they were
// read), is left as it is.
//
// A persistent watch has no catch-up (ZooKeeper gives none on a reconnect either): the changes
// it missed are gone. Its watcher is returned in lost, so that its connection can be closed and
// its client, told of the disconnection, can read again what it watches, as after any other.
func (r *Registry) CatchUpArmed(states map[string]State, armAt encoding.Zxid) (lost []*Watcher) {
	var fired []delivery
	r.mu.Lock()
	isLost := map[*Watcher]bool{}
	for k := range r.table {
		kind := Kind(k)
		for path, set := range r.table[k] {
			st, read := states[path]
			set.each(func(w *Watcher) {
				since := w.since[k][path]
				if !read || since >= armAt {
					return
				}
				if !kind.OneShot() {
					if !isLost[w] {
						isLost[w] = true
						lost = append(lost, w)
					}
					return
				}
				if ev, fire := CatchUpEvent(kind, path, since, st); fire {
					r.remove(w, kind, path)
					if ev.Type == encoding.EventNodeDeleted || w.auth == nil || w.auth.Allowed(st.ACL, encoding.PermRead) {
						fired = append(fired, delivery{w: w, ev: ev})
					}
				}
			})
		}
	}
	hold(fired)
	r.mu.Unlock()
	for _, d := range fired {
		d.w.sink.Event(d.ev, -1)
	}
	r.release(fired)
	return lost
}

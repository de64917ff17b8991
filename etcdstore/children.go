package etcdstore

import (
	"slices"
	"strings"
	"sync/atomic"
)

// childSet holds the names of a znode's children in the replica: a sorted slice while there are
// few, a set once there are many, where keeping a slice sorted would move much of it on every
// create and delete under the node (ZooKeeper keeps a hash set). Replica lock held for every use:
// the read lock for len, names and each, the write lock for add and remove.
//
// A read lends out the sorted slice itself rather than a copy (names): the copy was a fifth of
// what a getChildren allocated. The slice lent never changes: the next add or remove copies it
// first (copy on write), so a node read many times between two changes under it copies its
// names once, and one changed many times between reads copies nothing more than before.
type childSet struct {
	sorted []string            // the names, sorted; used while set is nil
	set    map[string]struct{} // the names, once the node has more than childSetMax children
	// lent is set by names, under the read lock (hence atomic), when it hands out sorted, and
	// cleared by the add or remove that copies sorted before changing it.
	lent atomic.Bool
}

// childSetMax is the most children kept in a sorted slice; a set goes back to a slice below a
// quarter of it, so that a node hovering around the bound does not switch on every change.
const childSetMax = 1024

func (c *childSet) len() int {
	if c.set != nil {
		return len(c.set)
	}
	return len(c.sorted)
}

func (c *childSet) add(name string) {
	if c.set != nil {
		c.set[name] = struct{}{}
		return
	}
	i, found := slices.BinarySearch(c.sorted, name)
	if found {
		return
	}
	if len(c.sorted) < childSetMax {
		c.sorted = slices.Insert(c.unlent(), i, name)
		return
	}
	c.set = make(map[string]struct{}, 2*childSetMax)
	for _, n := range c.sorted {
		c.set[n] = struct{}{}
	}
	c.set[name] = struct{}{}
	c.sorted = nil
}

func (c *childSet) remove(name string) {
	if c.set == nil {
		if i, found := slices.BinarySearch(c.sorted, name); found {
			c.sorted = slices.Delete(c.unlent(), i, i+1)
		}
		return
	}
	delete(c.set, name)
	if len(c.set) < childSetMax/4 {
		c.sorted = c.setNames()
		c.set = nil
		c.lent.Store(false)
	}
}

// unlent returns sorted for add or remove to change in place: a copy, with room for one more
// name, if a read has lent it out.
func (c *childSet) unlent() []string {
	if !c.lent.Load() {
		return c.sorted
	}
	c.lent.Store(false)
	return append(make([]string, 0, len(c.sorted)+1), c.sorted...)
}

// names returns the names, sorted. The caller may keep the slice, and must not change it: while
// there are few names it is the set's own (lent, see childSet).
func (c *childSet) names() []string {
	if c.set != nil {
		return c.setNames()
	}
	if !c.lent.Load() {
		c.lent.Store(true)
	}
	return c.sorted
}

// setNames returns the set's names, sorted, in a new slice.
func (c *childSet) setNames() []string {
	out := make([]string, 0, len(c.set))
	for n := range c.set {
		out = append(out, n)
	}
	slices.SortFunc(out, strings.Compare)
	return out
}

// each calls f for every name, in no particular order.
func (c *childSet) each(f func(name string)) {
	if c.set != nil {
		for n := range c.set {
			f(n)
		}
		return
	}
	for _, n := range c.sorted {
		f(n)
	}
}

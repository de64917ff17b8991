package etcdstore

import (
	"slices"
	"strings"
)

// childSet holds the names of a znode's children in the replica: a sorted slice while there are
// few, a set once there are many, where keeping a slice sorted would move much of it on every
// create and delete under the node (ZooKeeper keeps a hash set). Replica lock held for every use.
type childSet struct {
	sorted []string            // the names, sorted; used while set is nil
	set    map[string]struct{} // the names, once the node has more than childSetMax children
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
		c.sorted = slices.Insert(c.sorted, i, name)
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
			c.sorted = slices.Delete(c.sorted, i, i+1)
		}
		return
	}
	delete(c.set, name)
	if len(c.set) < childSetMax/4 {
		c.sorted = c.names()
		c.set = nil
	}
}

// names returns the names, sorted, in a slice of the caller's.
func (c *childSet) names() []string {
	if c.set == nil {
		return slices.Clone(c.sorted)
	}
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

package etcdstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestChildSet: across the switch from a sorted slice to a set and back, the names are always
// the ones added and not removed, sorted.
func TestChildSet(t *testing.T) {
	var c childSet
	want := map[string]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(step int) {
		t.Helper()
		names := c.names()
		if len(names) != len(want) || c.len() != len(want) || !slices.IsSorted(names) {
			t.Fatalf("step %d: %d names (len %d, sorted %v), want %d", step, len(names), c.len(), slices.IsSorted(names), len(want))
		}
		for _, n := range names {
			if !want[n] {
				t.Fatalf("step %d: %q is not a child", step, n)
			}
		}
		seen := 0
		c.each(func(string) { seen++ })
		if seen != len(want) {
			t.Fatalf("step %d: each saw %d names, want %d", step, seen, len(want))
		}
	}
	switched := false
	// Grow well past childSetMax, then shrink below a quarter of it, with repeats both ways.
	for step := range 4 * childSetMax {
		n := fmt.Sprintf("n%05d", rng.IntN(3*childSetMax))
		c.add(n)
		want[n] = true
		switched = switched || c.set != nil
		if step%97 == 0 {
			check(step)
		}
	}
	check(-1)
	if !switched {
		t.Fatal("never became a set")
	}
	for n := range want {
		c.remove(n)
		delete(want, n)
		c.remove(n) // twice: a no-op
		if len(want)%101 == 0 {
			check(len(want))
		}
	}
	check(-2)
	if c.set != nil {
		t.Error("still a set with no child")
	}
}

// TestChildSetLentNames: the names a read got never change through later adds and removes (the
// set copies them first), and reading them again between changes copies nothing.
func TestChildSetLentNames(t *testing.T) {
	var c childSet
	for _, n := range []string{"b", "d", "f"} {
		c.add(n)
	}
	lent := c.names()
	snapshot := slices.Clone(lent)
	c.add("a")    // would shift the lent slice in place
	c.remove("d") // would close the gap in the lent slice in place
	c.add("e")
	if !slices.Equal(lent, snapshot) {
		t.Fatalf("names lent before the changes are now %q, want %q", lent, snapshot)
	}
	if got, want := c.names(), []string{"a", "b", "e", "f"}; !slices.Equal(got, want) {
		t.Fatalf("names after the changes %q, want %q", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.names() }); n != 0 {
		t.Errorf("names between changes allocates %v times, want 0", n)
	}
	// Once lent, the next change copies; with nothing lent since, the one after does not.
	if n := testing.AllocsPerRun(100, func() { _ = c.names(); c.add("c"); c.remove("c") }); n != 1 {
		t.Errorf("a read, an add and a remove allocate %v times, want 1 (the add's copy)", n)
	}
	if n := testing.AllocsPerRun(100, func() { c.add("c"); c.remove("c") }); n != 0 {
		t.Errorf("an add and a remove with nothing lent allocate %v times, want 0", n)
	}
}

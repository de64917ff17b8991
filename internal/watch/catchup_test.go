package watch

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// reentrantSink calls back into the registry from Event, which deadlocks if the registry
// delivers with its lock held.
type reentrantSink struct {
	r    *Registry
	w    *Watcher
	seen []string
}

func (s *reentrantSink) Event(ev encoding.WatcherEvent, zxid encoding.Zxid) {
	s.r.Watching(s.w)
	s.seen = append(s.seen, ev.Type.String()+" "+ev.Path)
}

// TestSettleDeliversOutsideLock: catch-up events, replayed history and fired changes all reach
// a sink that re-enters the registry, so none is delivered under the registry's lock.
func TestSettleDeliversOutsideLock(t *testing.T) {
	done := make(chan []string)
	go func() {
		r := NewRegistry(10)
		sink := &reentrantSink{r: r}
		w := NewWatcher(sink, 1, nil)
		sink.w = w
		// Catch-up: /gone was deleted, /changed was written after 5, /same was not.
		regs := []Registration{
			{Watcher: w, Kind: Data, Path: "/gone", Since: 5},
			{Watcher: w, Kind: Data, Path: "/changed", Since: 5},
			{Watcher: w, Kind: Data, Path: "/same", Since: 5},
			{Watcher: w, Kind: Exist, Path: "/new", Since: 5},
		}
		states := map[string]State{
			"/changed": {Exists: true, Mzxid: 7},
			"/same":    {Exists: true, Mzxid: 3},
			"/new":     {Exists: true, Czxid: 8, Mzxid: 8},
		}
		if err := r.Settle(regs, states, -1, 10); err != nil {
			t.Error(err)
		}
		// The watch left armed fires from the feed, and a registration behind progress replays.
		r.Fire(Change{Kind: DataChanged, Path: "/same", Zxid: 11})
		r.Advance(11)
		r.Register(w, Data, "/late", 10)
		r.Fire(Change{Kind: Created, Path: "/late2", Zxid: 12})
		r.Advance(12)
		r.Register(w, Exist, "/late2", 11)
		done <- sink.seen
	}()
	select {
	case got := <-done:
		want := []string{"NodeDeleted /gone", "NodeDataChanged /changed", "NodeCreated /new", "NodeDataChanged /same", "NodeCreated /late2"}
		if !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a sink was called with the registry's lock held (deadlock)")
	}
}

// watchingSink records, at each event, whether the registry still counts its watcher as
// watching.
type watchingSink struct {
	r        *Registry
	w        *Watcher
	watching []bool
}

func (s *watchingSink) Event(encoding.WatcherEvent, encoding.Zxid) {
	s.watching = append(s.watching, s.r.Watching(s.w))
}

// TestWatchingUntilDelivered: a one-shot watch leaves the tables when it fires, before its
// event reaches the sink; until then Watching stays true, so that a wait for a reply's events
// (etcdstore's AwaitEvents) cannot skip an event in flight and let the reply overtake it.
func TestWatchingUntilDelivered(t *testing.T) {
	r := NewRegistry(10)
	sink := &watchingSink{r: r}
	w := NewWatcher(sink, 1, nil)
	sink.w = w
	r.Register(w, Data, "/a", 10)
	r.Fire(Change{Kind: DataChanged, Path: "/a", Zxid: 11}) // from the feed
	r.Advance(11)
	r.Fire(Change{Kind: Created, Path: "/b", Zxid: 12})
	r.Advance(12)
	r.Register(w, Exist, "/b", 11) // replayed from history
	r.Register(w, Child, "/c", 12)
	if err := r.Settle([]Registration{{Watcher: w, Kind: Child, Path: "/c", Since: 12}}, map[string]State{}, -1, 12); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sink.watching, []bool{true, true, true}) {
		t.Errorf("Watching during delivery: %v, want true each time", sink.watching)
	}
	if r.Watching(w) {
		t.Error("still watching after every one-shot watch fired and was delivered")
	}
}

// TestRegisterBetweenFireAndAdvance: the feed fires a revision's changes and only then advances
// the progress. A catch-up that read the state just before that revision re-arms at the zxid
// before it; re-armed between the firing and the advance, it must still get the change, which
// came after the state it was armed at.
func TestRegisterBetweenFireAndAdvance(t *testing.T) {
	r, w, sink := newRecorded(100)
	regs := []Registration{{Watcher: w, Kind: Data, Path: "/a", Since: 50}}
	states := map[string]State{"/a": {Exists: true, Czxid: 10, Mzxid: 40, Pzxid: 40}} // read at 100
	r.Fire(Change{Kind: DataChanged, Path: "/a", Zxid: 101})
	if err := r.Settle(regs, states, -1, 100); err != nil {
		t.Fatal(err)
	}
	r.Advance(101)
	if got, want := sink.Take(), []string{"NodeDataChanged /a @101"}; !slices.Equal(got, want) {
		t.Errorf("events: %v, want %v", got, want)
	}
	if r.Has(w, Data, "/a") {
		t.Error("the data watch the replayed change fired is still armed")
	}
}

// TestRegisterSecondChangeOfRevision: a watch re-armed between two changes of one revision (a
// multi's) gets the first from history and the second as the feed fires it.
func TestRegisterSecondChangeOfRevision(t *testing.T) {
	r, w, sink := newRecorded(100)
	r.Fire(Change{Kind: Created, Path: "/p/a", Zxid: 101})
	if !r.Register(w, Persistent, "/p", 100) {
		t.Fatal("Register: history lost")
	}
	r.Fire(Change{Kind: Created, Path: "/p/b", Zxid: 101})
	r.Advance(101)
	if got, want := sink.Take(), []string{"NodeChildrenChanged /p @101", "NodeChildrenChanged /p @101"}; !slices.Equal(got, want) {
		t.Errorf("events: %v, want %v", got, want)
	}
}

// TestSettleReplaysOneEventPerConnection: a change replayed to several watches of one
// connection (re-armed by one setWatches) gives it one event, as the same change fired live
// does: ZooKeeper sends a connection one event per trigger.
func TestSettleReplaysOneEventPerConnection(t *testing.T) {
	r, w, sink := newRecorded(100)
	r.Fire(Change{Kind: Deleted, Path: "/a", Zxid: 101}) // after the catch-up's read at 100
	r.Advance(101)
	regs := []Registration{
		{Watcher: w, Kind: Data, Path: "/a", Since: 50},
		{Watcher: w, Kind: Child, Path: "/a", Since: 50},
		{Watcher: w, Kind: PersistentRecursive, Path: "/", Since: 50},
	}
	states := map[string]State{
		"/a": {Exists: true, Czxid: 10, Mzxid: 40, Pzxid: 40},
		"/":  {Exists: true, Czxid: 1, Mzxid: 1, Pzxid: 40},
	}
	if err := r.Settle(regs, states, -1, 100); err != nil {
		t.Fatal(err)
	}
	if got, want := sink.Take(), []string{"NodeDeleted /a @101"}; !slices.Equal(got, want) {
		t.Errorf("events: %v, want %v", got, want)
	}
	if r.Has(w, Data, "/a") || r.Has(w, Child, "/a") || !r.Has(w, PersistentRecursive, "/") {
		t.Error("want the one-shot watches consumed and the recursive one armed")
	}
}

// TestRegisterRaceFire: Register's replayed deliveries are counted (Watching) under the lock
// the feed's Fire counts its own under; run with -race.
func TestRegisterRaceFire(t *testing.T) {
	r, w, _ := newRecorded(100)
	for i := range 50 {
		r.Fire(Change{Kind: DataChanged, Path: "/p", Zxid: encoding.Zxid(101 + i)})
	}
	r.Advance(150)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 500 {
			r.Register(w, Persistent, "/p", 100) // replays the 50 changes
		}
	})
	wg.Go(func() {
		for i := range 500 {
			r.Fire(Change{Kind: DataChanged, Path: "/p", Zxid: encoding.Zxid(1000 + i)})
		}
	})
	wg.Wait()
	if r.Watching(w) != true {
		t.Fatal("the persistent watch is gone")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.inFlight != 0 {
		t.Errorf("%d deliveries counted in flight after every one was handed over", w.inFlight)
	}
}

// TestCatchUpArmed: after lost history (a resync), armed one-shot watches are checked against
// the states read, as setWatches checks them; persistent ones armed before are reported lost;
// watches armed at the read or after, and paths not read, are left alone.
func TestCatchUpArmed(t *testing.T) {
	r, w, sink := newRecorded(10)
	other := NewWatcher(&zetcdtest.Events{}, 2, nil)
	r.Arm(w, Data, "/changed", 10)
	r.Arm(w, Data, "/same", 10)
	r.Arm(w, Child, "/gone", 10)
	r.Arm(w, Exist, "/unread", 10)
	r.Arm(other, PersistentRecursive, "/", 10)
	r.ResetHistory(20)
	r.Arm(w, Data, "/late", 20)
	if got, want := r.WatchedPaths(20), []string{"/", "/changed", "/gone", "/same", "/unread"}; !sameSet(got, want) {
		t.Errorf("WatchedPaths = %v, want %v", got, want)
	}
	states := map[string]State{
		"/changed": {Exists: true, Czxid: 1, Mzxid: 15, Pzxid: 1},
		"/same":    {Exists: true, Czxid: 1, Mzxid: 5, Pzxid: 1},
		"/gone":    {},
		"/late":    {Exists: true, Czxid: 1, Mzxid: 15, Pzxid: 1},
		"/":        {Exists: true, Czxid: 1, Mzxid: 1, Pzxid: 15},
	}
	lost := r.CatchUpArmed(states, 20)
	if !slices.Equal(lost, []*Watcher{other}) {
		t.Errorf("lost = %v, want the watcher with the recursive watch", lost)
	}
	if got, want := sink.Take(), []string{"NodeDataChanged /changed @-1", "NodeDeleted /gone @-1"}; !sameSet(got, want) {
		t.Errorf("events: %v, want %v", got, want)
	}
	for _, k := range []struct {
		kind  Kind
		path  string
		armed bool
	}{{Data, "/changed", false}, {Child, "/gone", false}, {Data, "/same", true}, {Exist, "/unread", true}, {Data, "/late", true}} {
		if r.Has(w, k.kind, k.path) != k.armed {
			t.Errorf("watch on %s armed: %v, want %v", k.path, !k.armed, k.armed)
		}
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

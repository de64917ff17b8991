package watch

import (
	"slices"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
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

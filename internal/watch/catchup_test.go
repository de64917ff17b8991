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

package watch

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

func TestWatchRegistryTriggers(t *testing.T) {
	r, w, sink := newRecorded(10)
	r.Register(w, Data, "/a", 10)
	r.Register(w, Child, "/a", 10)
	r.Register(w, Child, "/", 10)
	r.Register(w, Exist, "/b", 10)

	r.Fire(Change{Kind: Deleted, Path: "/a", Zxid: 11})
	r.Advance(11)
	// Data and child watches on /a: one NodeDeleted; the root's child watch: children changed.
	if got, want := sink.Take(), []string{"NodeDeleted /a @11", "NodeChildrenChanged / @11"}; !slices.Equal(got, want) {
		t.Errorf("delete: %v, want %v", got, want)
	}
	r.Fire(Change{Kind: Created, Path: "/b", Zxid: 12})
	if got, want := sink.Take(), []string{"NodeCreated /b @12"}; !slices.Equal(got, want) {
		t.Errorf("create: %v, want %v", got, want)
	}
	// Everything was one-shot.
	r.Fire(Change{Kind: DataChanged, Path: "/b", Zxid: 13})
	r.Fire(Change{Kind: Created, Path: "/a", Zxid: 14})
	if got := sink.Take(); len(got) != 0 {
		t.Errorf("after one-shot watches fired: %v", got)
	}
	if r.Watching(w) {
		t.Error("watcher still counted as watching")
	}
}

func TestWatchRegistrySinceAndHistory(t *testing.T) {
	r, w, sink := newRecorded(100)
	// The feed passes zxid 101 and 102 before a read at 100 registers its watch.
	r.Fire(Change{Kind: DataChanged, Path: "/x", Zxid: 101})
	r.Advance(101)
	r.Fire(Change{Kind: DataChanged, Path: "/y", Zxid: 102})
	r.Advance(102)
	if !r.Register(w, Data, "/y", 100) {
		t.Fatal("history should cover zxid 100")
	}
	if got, want := sink.Take(), []string{"NodeDataChanged /y @102"}; !slices.Equal(got, want) {
		t.Errorf("replay: %v, want %v", got, want)
	}
	// A watch armed at 102 does not fire for a change at 102 delivered late, only later ones.
	r.Register(w, Data, "/z", 102)
	r.Fire(Change{Kind: DataChanged, Path: "/z", Zxid: 102})
	r.Fire(Change{Kind: DataChanged, Path: "/z", Zxid: 103})
	if got, want := sink.Take(), []string{"NodeDataChanged /z @103"}; !slices.Equal(got, want) {
		t.Errorf("since filter: %v, want %v", got, want)
	}
	// Before the history's reach, registration asks for a catch-up.
	if r.Register(w, Data, "/x", 50) {
		t.Error("history cannot cover zxid 50")
	}
	// After the ring wraps, its reach moves forward.
	for i := 0; i < historyLen+10; i++ {
		r.Fire(Change{Kind: DataChanged, Path: "/w", Zxid: encoding.Zxid(200 + i)})
		r.Advance(encoding.Zxid(200 + i))
	}
	if r.Register(w, Data, "/q", 150) {
		t.Error("wrapped history cannot cover zxid 150")
	}
	if !r.Register(w, Data, "/q", encoding.Zxid(200+historyLen)) {
		t.Error("history covers its newest entries")
	}
}

// TestWatchRegistryArm: a watch armed at the state its caller holds (not behind the progress)
// fires for the changes after it, a change at that zxid fired late included not; one behind the
// progress is refused and not armed.
func TestWatchRegistryArm(t *testing.T) {
	r, w, sink := newRecorded(100)
	if !r.Arm(w, Data, "/a", 100) {
		t.Fatal("Arm at the progress refused")
	}
	// The read held the state at 101, which the feed had applied but not fired.
	if !r.Arm(w, Exist, "/b", 101) {
		t.Fatal("Arm ahead of the progress refused")
	}
	r.Fire(Change{Kind: DataChanged, Path: "/a", Zxid: 101})
	r.Fire(Change{Kind: Created, Path: "/b", Zxid: 101})
	r.Advance(101)
	r.Fire(Change{Kind: Created, Path: "/b", Zxid: 102})
	r.Advance(102)
	if got, want := sink.Take(), []string{"NodeDataChanged /a @101", "NodeCreated /b @102"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if r.Arm(w, Data, "/c", 101) {
		t.Error("Arm behind the progress accepted")
	}
	if r.Has(w, Data, "/c") {
		t.Error("a refused Arm left a watch")
	}
}

func TestWatchRegistryPersistentAndRecursive(t *testing.T) {
	r, w, sink := newRecorded(0)
	r.Register(w, Persistent, "/p", 0)
	r.Register(w, PersistentRecursive, "/r", 0)
	r.Register(w, PersistentRecursive, "/", 0)
	for i, c := range []Change{
		{Kind: Created, Path: "/p"}, {Kind: Created, Path: "/p/c"}, {Kind: DataChanged, Path: "/p/c"},
		{Kind: Created, Path: "/r/a/b"}, {Kind: Deleted, Path: "/rx"},
	} {
		c.Zxid = encoding.Zxid(i + 1)
		r.Fire(c)
	}
	// The root recursive watch and the /r recursive watch are one connection: one event each.
	want := []string{
		"NodeCreated /p @1",
		"NodeCreated /p/c @2", "NodeChildrenChanged /p @2",
		"NodeDataChanged /p/c @3",
		"NodeCreated /r/a/b @4",
		"NodeDeleted /rx @5",
	}
	if got := sink.Take(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !r.Has(w, Persistent, "/p") || !r.Has(w, PersistentRecursive, "/r") {
		t.Error("persistent watches must stay")
	}
	r.CloseWatcher(w)
	if n, _ := r.Stats(); n != 0 {
		t.Errorf("%d watches left after close", n)
	}
}

// BenchmarkWatchRegistryMemory reports the heap held by 100,000 watches over 1,000
// connections (100 each on 1,000 paths), after garbage collection.
func BenchmarkWatchRegistryMemory(b *testing.B) {
	const conns, perConn, paths = 1000, 100, 1000
	names := make([]string, paths)
	for i := range names {
		names[i] = fmt.Sprintf("/m/n%d", i)
	}
	var m0, m1 runtime.MemStats
	for n := 0; n < b.N; n++ {
		runtime.GC()
		runtime.ReadMemStats(&m0)
		r := NewRegistry(0)
		ws := make([]*Watcher, conns)
		for i := range ws {
			ws[i] = NewWatcher(discardSink{}, 0, nil)
			for j := 0; j < perConn; j++ {
				r.Register(ws[i], Data, names[(i+j*7)%paths], 1)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(conns*perConn), "bytes/watch")
		runtime.KeepAlive(r)
		runtime.KeepAlive(ws)
	}
}

// discardSink drops every event.
type discardSink struct{}

func (discardSink) Event(encoding.WatcherEvent, encoding.Zxid) {}

// newRecorded is a registry at progress, with one watcher whose events sink records.
func newRecorded(progress encoding.Zxid) (*Registry, *Watcher, *zetcdtest.Events) {
	sink := &zetcdtest.Events{}
	return NewRegistry(progress), NewWatcher(sink, 0, nil), sink
}

package zetcd

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// recordingSink is an EventSink that keeps what it receives.
type recordingSink struct {
	mu     sync.Mutex
	events []string
}

func (s *recordingSink) Event(ev encoding.WatcherEvent, zxid encoding.Zxid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, fmt.Sprintf("%v %s @%d", ev.Type, ev.Path, zxid))
}

func (s *recordingSink) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.events
	s.events = nil
	return out
}

func TestWatchRegistryTriggers(t *testing.T) {
	r := newWatchRegistry(10)
	sink := &recordingSink{}
	w := newWatcher(sink)
	r.register(w, watchData, "/a", 10)
	r.register(w, watchChild, "/a", 10)
	r.register(w, watchChild, "/", 10)
	r.register(w, watchExist, "/b", 10)

	r.fire(change{kind: changeDeleted, path: "/a", zxid: 11})
	r.advance(11)
	// Data and child watches on /a: one NodeDeleted; the root's child watch: children changed.
	if got, want := sink.take(), []string{"NodeDeleted /a @11", "NodeChildrenChanged / @11"}; !slices.Equal(got, want) {
		t.Errorf("delete: %v, want %v", got, want)
	}
	r.fire(change{kind: changeCreated, path: "/b", zxid: 12})
	if got, want := sink.take(), []string{"NodeCreated /b @12"}; !slices.Equal(got, want) {
		t.Errorf("create: %v, want %v", got, want)
	}
	// Everything was one-shot.
	r.fire(change{kind: changeData, path: "/b", zxid: 13})
	r.fire(change{kind: changeCreated, path: "/a", zxid: 14})
	if got := sink.take(); len(got) != 0 {
		t.Errorf("after one-shot watches fired: %v", got)
	}
	if r.watching(w) {
		t.Error("watcher still counted as watching")
	}
}

func TestWatchRegistrySinceAndHistory(t *testing.T) {
	r := newWatchRegistry(100)
	sink := &recordingSink{}
	w := newWatcher(sink)
	// The feed passes zxid 101 and 102 before a read at 100 registers its watch.
	r.fire(change{kind: changeData, path: "/x", zxid: 101})
	r.advance(101)
	r.fire(change{kind: changeData, path: "/y", zxid: 102})
	r.advance(102)
	if !r.register(w, watchData, "/y", 100) {
		t.Fatal("history should cover zxid 100")
	}
	if got, want := sink.take(), []string{"NodeDataChanged /y @102"}; !slices.Equal(got, want) {
		t.Errorf("replay: %v, want %v", got, want)
	}
	// A watch armed at 102 does not fire for a change at 102 delivered late, only later ones.
	r.register(w, watchData, "/z", 102)
	r.fire(change{kind: changeData, path: "/z", zxid: 102})
	r.fire(change{kind: changeData, path: "/z", zxid: 103})
	if got, want := sink.take(), []string{"NodeDataChanged /z @103"}; !slices.Equal(got, want) {
		t.Errorf("since filter: %v, want %v", got, want)
	}
	// Before the history's reach, registration asks for a catch-up.
	if r.register(w, watchData, "/x", 50) {
		t.Error("history cannot cover zxid 50")
	}
	// After the ring wraps, its reach moves forward.
	for i := 0; i < historyLen+10; i++ {
		r.fire(change{kind: changeData, path: "/w", zxid: encoding.Zxid(200 + i)})
		r.advance(encoding.Zxid(200 + i))
	}
	if r.register(w, watchData, "/q", 150) {
		t.Error("wrapped history cannot cover zxid 150")
	}
	if !r.register(w, watchData, "/q", encoding.Zxid(200+historyLen)) {
		t.Error("history covers its newest entries")
	}
}

func TestWatchRegistryPersistentAndRecursive(t *testing.T) {
	r := newWatchRegistry(0)
	sink := &recordingSink{}
	w := newWatcher(sink)
	r.register(w, watchPersistent, "/p", 0)
	r.register(w, watchRecursive, "/r", 0)
	r.register(w, watchRecursive, "/", 0)
	for i, c := range []change{
		{kind: changeCreated, path: "/p"}, {kind: changeCreated, path: "/p/c"}, {kind: changeData, path: "/p/c"},
		{kind: changeCreated, path: "/r/a/b"}, {kind: changeDeleted, path: "/rx"},
	} {
		c.zxid = encoding.Zxid(i + 1)
		r.fire(c)
	}
	// The root recursive watch and the /r recursive watch are one connection: one event each.
	want := []string{
		"NodeCreated /p @1",
		"NodeCreated /p/c @2", "NodeChildrenChanged /p @2",
		"NodeDataChanged /p/c @3",
		"NodeCreated /r/a/b @4",
		"NodeDeleted /rx @5",
	}
	if got := sink.take(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !r.has(w, watchPersistent, "/p") || !r.has(w, watchRecursive, "/r") {
		t.Error("persistent watches must stay")
	}
	r.closeWatcher(w)
	if n, _ := r.stats(); n != 0 {
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
		r := newWatchRegistry(0)
		ws := make([]*watcher, conns)
		for i := range ws {
			ws[i] = newWatcher(discardEvents{})
			for j := 0; j < perConn; j++ {
				r.register(ws[i], watchData, names[(i+j*7)%paths], 1)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(conns*perConn), "bytes/watch")
		runtime.KeepAlive(r)
		runtime.KeepAlive(ws)
	}
}

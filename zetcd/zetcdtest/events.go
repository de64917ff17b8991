package zetcdtest

import (
	"fmt"
	"sync"

	"github.com/zetcd/zetcd/encoding"
)

// Events is an EventSink that keeps the events it receives, each as "Type path @zxid"
// ("NodeDeleted /a @12"), for tests to compare. It is safe for concurrent use.
type Events struct {
	mu     sync.Mutex
	events []string
}

// Event records ev, fired by the change at zxid.
func (e *Events) Event(ev encoding.WatcherEvent, zxid encoding.Zxid) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, fmt.Sprintf("%v %s @%d", ev.Type, ev.Path, zxid))
}

// Take returns the events received since the last Take.
func (e *Events) Take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.events
	e.events = nil
	return out
}

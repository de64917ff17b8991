package xchk

import (
	"slices"
	"sync"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// Sides of a comparison.
const (
	sideZetcd = iota
	sideZooKeeper
)

// eventMatcher pairs the watch events of one connection: each event seen on one side waits up
// to wait for an equal event (type, state, path) on the other; one that finds none is a
// difference. Order is not compared: zetcd and the oracle deliver on different streams.
//
// mu protects stopped and waiting. Timers fire on their own goroutines and take mu.
type eventMatcher struct {
	wait       time.Duration
	onUnpaired func(side int, ev encoding.WatcherEvent) // called without mu held

	mu      sync.Mutex
	stopped bool
	waiting [2][]*waitingEvent // by side
}

type waitingEvent struct {
	ev    encoding.WatcherEvent
	timer *time.Timer
}

func newEventMatcher(wait time.Duration, onUnpaired func(side int, ev encoding.WatcherEvent)) *eventMatcher {
	return &eventMatcher{wait: wait, onUnpaired: onUnpaired}
}

// add records an event from side, pairing it with a waiting one from the other side if any.
func (m *eventMatcher) add(side int, ev encoding.WatcherEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	other := m.waiting[1-side]
	if i := slices.IndexFunc(other, func(w *waitingEvent) bool { return w.ev == ev }); i >= 0 {
		other[i].timer.Stop()
		m.waiting[1-side] = slices.Delete(other, i, i+1)
		return
	}
	w := &waitingEvent{ev: ev}
	w.timer = time.AfterFunc(m.wait, func() { m.expire(side, w) })
	m.waiting[side] = append(m.waiting[side], w)
}

// expire reports w if it is still unpaired.
func (m *eventMatcher) expire(side int, w *waitingEvent) {
	m.mu.Lock()
	i := slices.Index(m.waiting[side], w)
	if m.stopped || i < 0 {
		m.mu.Unlock()
		return
	}
	m.waiting[side] = slices.Delete(m.waiting[side], i, i+1)
	m.mu.Unlock()
	m.onUnpaired(side, w.ev)
}

// stop forgets every waiting event without reporting it (the connection is gone, or no
// longer cross-checked) and ignores later ones.
func (m *eventMatcher) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	for side := range m.waiting {
		for _, w := range m.waiting[side] {
			w.timer.Stop()
		}
		m.waiting[side] = nil
	}
}

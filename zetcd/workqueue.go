package zetcd

import "sync"

// workQueue is a FIFO served by one worker that runs only while items are queued: push starts
// the worker when none runs (or leaves that to its caller, who then claims the queue and runs
// the worker itself or in a new goroutine), and the worker exits when a take finds the queue
// empty. Both decisions are made under mu, with running, so an item pushed just as the worker
// finds the queue empty is never stranded: either the worker takes it, or it has already
// cleared running and push (or claim) starts another. At most one worker runs at a time, so
// items are handled in the order pushed. An idle queue holds neither the goroutine nor a slice: its slice goes back to a
// process-wide pool (slicePool), from which the next push takes one, so that a connection
// serving one request at a time does not allocate a slice per request. The reader→executor
// queue and the write queue are workQueues (execQueue, outQueue).
type workQueue[T any] struct {
	mu sync.Mutex
	// items, guarded by mu, holds (*items)[head:] queued; nil while the queue is idle.
	items *[]T
	head  int
	// running, guarded by mu: a worker runs (started by push).
	running bool
	// closed, guarded by mu: no more items are taken or accepted (close, or the worker's exit
	// for good).
	closed bool
	idle   sync.Cond // on mu; broadcast when running is cleared
	run    func()    // the worker
	slices *slicePool[T]
	// queued, if set, is called under mu for each item accepted (the write queue counts its
	// bytes there, before the worker can take and uncount it).
	queued func(T)
}

func (q *workQueue[T]) init(run func(), slices *slicePool[T], queued func(T)) {
	q.idle.L = &q.mu
	q.run, q.slices, q.queued = run, slices, queued
}

// push queues v and, with start, starts the worker if none runs; without, the caller must
// start it or be it (claim) before it blocks or moves on. It reports false, and does not queue
// v, once the queue is closed.
func (q *workQueue[T]) push(v T, start bool) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if q.items == nil {
		q.items = q.slices.get()
	}
	*q.items = append(*q.items, v)
	if q.queued != nil {
		q.queued(v)
	}
	start = start && !q.running
	if start {
		q.running = true
	}
	q.mu.Unlock()
	if start {
		workers.goRun(q.run)
	}
	return true
}

// claim reports whether items are queued and no worker runs, and if so marks one running: the
// caller then runs the worker, in its own goroutine or a new one.
func (q *workQueue[T]) claim() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running || q.closed || q.emptyLocked() {
		return false
	}
	q.running = true
	return true
}

// quiet reports whether no item is queued and no worker runs.
func (q *workQueue[T]) quiet() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.running && q.emptyLocked()
}

// waiting reports whether items are queued.
func (q *workQueue[T]) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.emptyLocked()
}

// takeOne removes the first queued item. When nothing is queued it reports false and clears
// running: the worker must then exit. A closed queue still hands out what was pushed before it
// closed: close waits for that.
func (q *workQueue[T]) takeOne() (v T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.emptyLocked() {
		q.stopLocked()
		return v, false
	}
	items := *q.items
	v = items[q.head]
	var zero T
	items[q.head] = zero
	q.head++
	if q.head == len(items) {
		*q.items, q.head = items[:0], 0
	}
	return v, true
}

// takeAll hands the worker everything queued, as a slice of the queue's pool that the worker
// passes back, emptied, with its next takeAll (done: the worker has finished with it). When
// nothing is queued it returns nil and clears running, like takeOne.
func (q *workQueue[T]) takeAll(done *[]T) *[]T {
	q.mu.Lock()
	defer q.mu.Unlock()
	if done != nil {
		q.slices.put(done)
	}
	if q.emptyLocked() {
		q.stopLocked()
		return nil
	}
	got := q.items
	if q.head > 0 {
		*got = (*got)[q.head:]
	}
	q.items, q.head = nil, 0
	return got
}

// emptyLocked reports whether nothing is queued. mu held.
func (q *workQueue[T]) emptyLocked() bool { return q.items == nil || q.head == len(*q.items) }

// stopLocked is the worker's exit when the queue is empty: the slice goes back to the pool.
func (q *workQueue[T]) stopLocked() {
	if q.items != nil {
		q.slices.put(q.items)
		q.items, q.head = nil, 0
	}
	q.running = false
	q.idle.Broadcast()
}

// close makes later pushes fail and returns what is still queued. With wait, it first waits
// for a running worker to exit, which it does once it has taken everything queued (teardown:
// what was read still runs, what was queued is still written).
func (q *workQueue[T]) close(wait bool) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for wait && q.running {
		q.idle.Wait()
	}
	if q.items == nil {
		return nil
	}
	left := append([]T(nil), (*q.items)[q.head:]...)
	q.slices.put(q.items)
	q.items, q.head = nil, 0
	return left
}

// exit is the worker's exit for good (a closing request or frame, a write error, a panic): the
// queue is closed and running cleared; what is still queued stays for close to return.
func (q *workQueue[T]) exit() {
	q.mu.Lock()
	q.closed = true
	q.running = false
	q.idle.Broadcast()
	q.mu.Unlock()
}

// slicePool keeps the slices of idle queues for the next busy one. Slices grown past
// maxPooledItems are dropped rather than kept.
type slicePool[T any] struct{ p sync.Pool }

const maxPooledItems = 64

func (sp *slicePool[T]) get() *[]T {
	if s, ok := sp.p.Get().(*[]T); ok {
		return s
	}
	return new([]T)
}

// put takes s back, emptied (its items cleared, so the pool holds no references; past its
// length a queue's slice holds only zero values: takeOne clears what it takes).
func (sp *slicePool[T]) put(s *[]T) {
	if cap(*s) > maxPooledItems {
		return
	}
	clear(*s)
	*s = (*s)[:0]
	sp.p.Put(s)
}

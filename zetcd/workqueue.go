package zetcd

import "sync"

// workQueue is a FIFO served by one worker goroutine that runs only while items are queued: push
// starts the worker when none runs, and the worker exits when take finds the queue empty. Both
// decisions are made under mu, with running, so an item pushed just as the worker finds the
// queue empty is never stranded: either the worker takes it, or it has already cleared running
// and push starts another. At most one worker runs at a time, so items are handled in the order
// pushed. An idle queue holds neither the goroutine nor a slice. The reader→executor queue and
// the write queue are workQueues (execQueue, outQueue).
type workQueue[T any] struct {
	mu      sync.Mutex
	items   []T  // guarded by mu
	running bool // guarded by mu: a worker runs (started by push)
	// closed, guarded by mu: no more items are taken or accepted (close, or the worker's exit
	// for good).
	closed bool
	idle   sync.Cond // on mu; broadcast when running is cleared
	run    func()    // the worker
	// queued, if set, is called under mu for each item accepted (the write queue counts its
	// bytes there, before the worker can take and uncount it).
	queued func(T)
}

func (q *workQueue[T]) init(run func(), queued func(T)) {
	q.idle.L = &q.mu
	q.run, q.queued = run, queued
}

// push queues v and starts the worker if none runs. It reports false, and does not queue v,
// once the queue is closed.
func (q *workQueue[T]) push(v T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	if q.queued != nil {
		q.queued(v)
	}
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
	return true
}

// take moves up to max queued items (all of them if max is 0) into dst (reused) and returns it.
// When nothing is queued it returns dst empty and clears running: the worker must then exit. A
// closed queue still hands out what was pushed before it closed: close waits for that.
func (q *workQueue[T]) take(dst []T, max int) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	dst = dst[:0]
	if len(q.items) == 0 {
		q.items = nil // an idle queue keeps no slice
		q.running = false
		q.idle.Broadcast()
		return dst
	}
	n := len(q.items)
	if max > 0 {
		n = min(n, max)
	}
	dst = append(dst, q.items[:n]...)
	clear(q.items[:n])
	if n == len(q.items) {
		q.items = q.items[:0] // reused while the worker runs
	} else {
		q.items = q.items[n:]
	}
	return dst
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
	left := q.items
	q.items = nil
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

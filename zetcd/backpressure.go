package zetcd

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Memory a client can make the server hold is bounded, as ZooKeeper bounds it by no longer
// reading from a connection whose replies pile up:
//
//   - A connection counts the bytes it holds for its client (queueBudget): request frames read
//     and not yet executed, and encoded replies and watch events not yet written to the socket.
//     The server sums every connection's count (serverStats.queuedBytes).
//   - Before it runs a request, the executor waits until the connection's outgoing bytes are
//     below Config.MaxConnQueuedBytes (and, while the server as a whole holds more than
//     Config.MaxQueuedBytes, until they are all written): a client that does not read its
//     replies stops having requests executed. Its request queue then fills, and the reader,
//     which waits on the same bounds counting the requests too, stops reading the socket.
//   - A connection that waits for room longer than its session timeout (its write deadline) is
//     closed: its client is not reading. The session is detached, not expired, as after any
//     dropped connection.
//   - Watch events are never held up (the fan-out to every other connection would stall
//     behind one client): an event that would take a connection past eventQueueFactor times
//     its bound, or past its bound while the server is over its own, closes the connection
//     instead. The client resumes its session elsewhere and gets its watches back with
//     setWatches.
//
// So one connection holds at most its bound plus one reply and one request frame, and all of
// them together at most the server's bound plus that much per connection.

const (
	// DefaultMaxConnQueuedBytes is Config.MaxConnQueuedBytes's default: four times the largest
	// node ZooKeeper stores (jute.maxbuffer), room for pipelined replies.
	DefaultMaxConnQueuedBytes = 4 << 20
	// DefaultMaxQueuedBytes is Config.MaxQueuedBytes's default.
	DefaultMaxQueuedBytes = 256 << 20
	// eventQueueFactor times the connection's bound is where a watch event closes it.
	eventQueueFactor = 4
	// roomPollInterval is how often a connection waiting for the server's bytes to go down
	// looks again (other connections' writers free them; no one signals this one).
	roomPollInterval = 5 * time.Millisecond
)

// queueBudget counts the bytes one connection holds for its client, and adds them to the
// server's total. All methods are safe from any goroutine.
type queueBudget struct {
	in, out atomic.Int64  // request frames not yet executed; frames not yet written
	server  *atomic.Int64 // serverStats.queuedBytes
	// inRoom and outRoom wake the reader and the executor when bytes are freed (capacity 1,
	// sent without blocking: a wake-up is a hint to look again, never lost while one waits).
	inRoom, outRoom chan struct{}
}

func newQueueBudget(server *atomic.Int64) *queueBudget {
	return &queueBudget{server: server, inRoom: make(chan struct{}, 1), outRoom: make(chan struct{}, 1)}
}

func (b *queueBudget) addIn(n int64) {
	b.in.Add(n)
	b.server.Add(n)
	if n < 0 {
		wake(b.inRoom)
	}
}

func (b *queueBudget) addOut(n int64) {
	b.out.Add(n)
	b.server.Add(n)
}

// written uncounts n outgoing bytes: written to the socket, or dropped with the connection.
func (b *queueBudget) written(n int64) {
	b.addOut(-n)
	wake(b.outRoom)
	wake(b.inRoom)
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// outFull reports whether the executor must wait before running a request.
func (c *clientConn) outFull() bool {
	out := c.budget.out.Load()
	return out >= c.s.cfg.MaxConnQueuedBytes || out > 0 && c.s.overQueued()
}

// inFull reports whether the reader must wait before reading a request: maxOutstanding
// requests wait for the executor, or the connection holds its bound in bytes.
func (c *clientConn) inFull() bool {
	if c.st.queued.Load() >= maxOutstanding {
		return true
	}
	held := c.budget.in.Load() + c.budget.out.Load()
	return held >= c.s.cfg.MaxConnQueuedBytes || held > 0 && c.s.overQueued()
}

// overQueued reports whether the server as a whole holds more than its bound.
func (s *Server) overQueued() bool { return s.stats.queuedBytes.Load() >= s.cfg.MaxQueuedBytes }

// awaitRoom waits until full reports false. woken is signalled when bytes are freed; while the
// server is over its bound the condition is also polled, since other connections free those.
// With a positive limit, a wait longer than limit closes the connection: its client is not
// reading. It reports false if the connection is closing or was closed here.
func (c *clientConn) awaitRoom(full func() bool, woken <-chan struct{}, limit time.Duration) bool {
	if !full() {
		return true
	}
	c.s.stats.backpressured.Add(1)
	start := time.Now()
	poll := time.NewTicker(roomPollInterval)
	defer poll.Stop()
	for full() {
		if limit > 0 && time.Since(start) > limit {
			c.log.Info("client does not read its replies; closing the connection",
				zap.Int64("queuedBytes", c.budget.out.Load()), zap.Duration("waited", time.Since(start)))
			c.shutdown()
			return false
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-c.closing:
			return false
		}
	}
	return true
}

// eventOverflows reports whether a watch event of n bytes, with held bytes of events the
// connection holds back meanwhile (events.go), would take the connection past what an event
// may (see above).
func (c *clientConn) eventOverflows(n, held int64) bool {
	out := c.budget.out.Load() + held + n
	bound := c.s.cfg.MaxConnQueuedBytes
	return out > eventQueueFactor*bound || out > bound && c.s.overQueued()
}

package zetcd

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// connStats are one connection's counters, as ZooKeeper keeps them per connection for the stat
// and cons four-letter words (crst resets them). Atomics: updated by the connection's
// goroutines, read by any goroutine answering a four-letter word.
type connStats struct {
	received    atomic.Int64 // frames read
	sent        atomic.Int64 // frames written
	queued      atomic.Int64 // requests read and not yet executed
	established atomic.Int64 // unix ms when the session was established here; 0 before

	lastOp   atomic.Int64 // encoding.Op of the last request executed, +1; 0 for none ("NA")
	lastCxid atomic.Int64 // xid of the last request executed with a non-negative xid; -1 for none
	lastZxid atomic.Int64 // zxid of the last reply; -1 for none
	lastResp atomic.Int64 // unix ms of the last reply

	latLast  atomic.Int64 // ms, of the last request
	latMin   atomic.Int64 // ms; math.MaxInt64 for none
	latMax   atomic.Int64 // ms
	latTotal atomic.Int64 // ms
	latCount atomic.Int64
}

func (st *connStats) reset() {
	st.received.Store(0)
	st.sent.Store(0)
	st.lastOp.Store(0)
	st.lastCxid.Store(-1)
	st.lastZxid.Store(-1)
	st.lastResp.Store(0)
	st.latLast.Store(0)
	st.latMin.Store(math.MaxInt64)
	st.latMax.Store(0)
	st.latTotal.Store(0)
	st.latCount.Store(0)
}

// storeMin and storeMax lower or raise an atomic to v.
func storeMin(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v >= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// countPacketSent counts a packet written to the client: a frame (countSent), or a
// four-letter word's answer, which ZooKeeper counts as a packet sent but not in its response
// sizes.
func (c *clientConn) countPacketSent() {
	c.st.sent.Add(1)
	c.s.stats.sent.Add(1)
}

// countReceived counts a frame of n bytes (length prefix included) read from the client.
func (c *clientConn) countReceived(n int) {
	c.st.received.Add(1)
	c.s.stats.received.Add(1)
	c.s.stats.bytesReceived.Add(int64(n))
}

// countSent counts a frame of n bytes written to the client.
func (c *clientConn) countSent(n int) {
	c.countPacketSent()
	st := &c.s.stats
	st.bytesSent.Add(int64(n))
	st.respLast.Store(int64(n))
	storeMin(&st.respMin, int64(n))
	storeMax(&st.respMax, int64(n))
}

// queued counts r as read and waiting for the executor, in requests and bytes.
func (c *clientConn) queued(r *pendingRequest) {
	c.st.queued.Add(1)
	c.s.stats.outstanding.Add(1)
	c.budget.addIn(r.size)
}

// dequeued uncounts r: executed, or dropped with the connection.
func (c *clientConn) dequeued(r *pendingRequest) {
	c.st.queued.Add(-1)
	c.s.stats.outstanding.Add(-1)
	c.budget.addIn(-r.size)
}

// observeRequest records a request executed by the executor: latency (from when its frame was
// read to its reply being queued), last operation, xid and zxid, and an AuthFailed outcome.
func (c *clientConn) observeRequest(r *pendingRequest, zxid encoding.Zxid, err error) {
	now := time.Now()
	d := now.Sub(r.received)
	c.s.stats.observeLatency(d)
	c.s.cfg.Metrics.observeZKLatency(r.hdr.Op, d)
	if code, ok := errCode(err); ok && code == encoding.ErrAuthFailed {
		c.s.stats.authFailed.Add(1)
	}
	st := &c.st
	st.lastOp.Store(int64(r.hdr.Op) + 1)
	if r.hdr.Xid >= 0 {
		st.lastCxid.Store(int64(r.hdr.Xid))
	}
	if zxid > 0 {
		st.lastZxid.Store(int64(zxid))
	}
	st.lastResp.Store(now.UnixMilli())
	ms := d.Milliseconds()
	st.latLast.Store(ms)
	storeMin(&st.latMin, ms)
	storeMax(&st.latMax, ms)
	st.latTotal.Add(ms)
	st.latCount.Add(1)
}

// reset clears the counters srst clears, as ZooKeeper's ServerStats.reset with its metrics:
// packets, latency, response sizes, auth failures, and (srstCounter) bytes, connection
// requests and refusals.
func (st *serverStats) reset() {
	st.bytesReceived.Reset()
	st.bytesSent.Reset()
	st.refusedConns.Reset()
	st.handshakes.Reset()
	st.received.Store(0)
	st.sent.Store(0)
	st.latCount.Store(0)
	st.latTotal.Store(0)
	st.latMin.Store(math.MaxInt64)
	st.latMax.Store(0)
	st.respLast.Store(0)
	st.respMin.Store(math.MaxInt64)
	st.respMax.Store(0)
	st.authFailed.Store(0)
}

// srstCounter counts up for good, as /metrics needs (a Prometheus counter never goes back),
// and since srst for the four-letter words.
type srstCounter struct{ total, base atomic.Int64 }

func (c *srstCounter) Add(n int64)       { c.total.Add(n) }
func (c *srstCounter) Total() int64      { return c.total.Load() }
func (c *srstCounter) SinceReset() int64 { return c.total.Load() - c.base.Load() }
func (c *srstCounter) Reset()            { c.base.Store(c.total.Load()) }

// responseSizes returns the last, smallest and largest reply frame sizes, -1 for none (as
// ZooKeeper prints them before its first reply).
func (st *serverStats) responseSizes() (last, smallest, largest int64) {
	smallest = st.respMin.Load()
	if smallest == math.MaxInt64 {
		return -1, -1, -1
	}
	return st.respLast.Load(), smallest, st.respMax.Load()
}

package zetcd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// outFrame is one item of a connection's write queue. It is built with connect or hdr (and
// body), and encoded into frame before it is queued (encode), so that the queue holds bytes
// whose size it can count, not the records they came from.
type outFrame struct {
	connect *encoding.ConnectResponse // if set, the handshake answer (no ReplyHeader)

	hdr  encoding.ReplyHeader
	body encoding.Record // nil: header only

	// exactZxid keeps hdr.Zxid as it is, below what the connection has seen if need be: an
	// auth reply, which ZooKeeper answers with zxid 0, and Unimplemented, with -1.
	exactZxid bool

	noFrame    bool // write nothing; only meaningful with closeAfter
	closeAfter bool // flush, then close the connection

	frame    []byte // the encoded frame, length prefix included; set by encode
	noHeader bool   // frame has no ReplyHeader (a ConnectResponse); set by encode
	// pooled holds frame when it is in a buffer of encoding's frame pool (a reply or an
	// event): the writer releases it once the frame is written (release).
	pooled encoding.PooledFrame
}

// replyZxidOffset is where a reply frame holds its header's zxid: after the length prefix and
// the xid. The writer raises it there (runWriter).
const replyZxidOffset = 8

// frameOverhead is what a queued frame costs beyond its bytes (the outFrame itself), counted so
// that empty frames are not free.
const frameOverhead = 64

// encode encodes f into f.frame, once, and drops the records it came from.
func (f *outFrame) encode() {
	if f.frame != nil || f.noFrame {
		return
	}
	if f.connect != nil {
		f.frame, f.noHeader = encoding.MarshalFrame(f.connect), true
	} else {
		f.pooled = encoding.MarshalReply(f.hdr, f.body)
		f.frame = f.pooled.Bytes()
	}
	f.connect, f.body = nil, nil
}

// size is what f counts against the connection's and the server's queued bytes: the memory
// its frame holds (a pooled buffer may be up to twice the frame).
func (f *outFrame) size() int64 { return int64(cap(f.frame)) + frameOverhead }

// release gives a written frame's buffer back to the frame pool; f is not used again. A frame
// that is dropped instead (its connection closed) is left to the collector.
func (f *outFrame) release() {
	f.pooled.Release()
	f.frame, f.pooled = nil, encoding.PooledFrame{}
}

// send queues f for the writer and starts it if none runs. It reports false, dropping f, if the
// writer has stopped.
func (c *clientConn) send(f outFrame) bool {
	return c.out.push(f, true)
}

// queue queues f for the writer without starting it: the goroutine that queues a reply writes
// it (flush) or starts a writer for it (startWriter) before it blocks or moves on, so that a
// reply written by the goroutine that made it costs no switch to another. It reports false,
// dropping f, if the writer has stopped.
func (c *clientConn) queue(f outFrame) bool {
	return c.out.push(f, false)
}

// flush writes what is queued in this goroutine, unless a writer runs (it writes it).
func (c *clientConn) flush() {
	if c.out.claim() {
		c.runWriter()
	}
}

// startWriter starts a writer for what is queued, unless one runs.
func (c *clientConn) startWriter() {
	if c.out.claim() {
		workers.goRun(c.out.run)
	}
}

// outQueue is a connection's write queue: one FIFO for replies, pings and watch events, so that
// an event queued before a reply is written before it. It counts the bytes it holds, and the
// writer those it has taken and not yet written, in the connection's queuedBytes (and the
// server's, see backpressure.go); the executor and the reader wait for room, so replies are
// bounded, and watch events by closing a connection that lets them pile up (clientConn.Event).
// The writer runs only while there is something to write (workQueue).
type outQueue struct {
	workQueue[outFrame]
	budget *queueBudget
}

// frameSlices are the idle outQueues' slices.
var frameSlices slicePool[outFrame]

func newOutQueue(b *queueBudget, run func()) *outQueue {
	q := &outQueue{budget: b}
	q.init(run, &frameSlices, func(f outFrame) { b.addOut(f.size()) })
	return q
}

// push encodes f and queues it, starting the writer if none runs and start is set (see
// clientConn.queue); false if the connection writes no more.
func (q *outQueue) push(f outFrame, start bool) bool {
	f.encode()
	return q.workQueue.push(f, start)
}

// close makes later pushes fail and uncounts what is still queued. With wait, it first waits
// for a running writer to write everything queued and exit (teardown); the writer itself calls
// it without, when it stops for good (write error, closing frame, connection shutting down).
func (q *outQueue) close(wait bool) {
	for _, f := range q.workQueue.close(wait) {
		q.budget.written(f.size())
	}
}

// stopped is the writer's exit when it writes no more.
func (q *outQueue) stopped() {
	q.close(false)
	q.exit()
}

// runWriter writes what is queued, then exits (outQueue). It takes everything queued and
// writes it in one system call (clientConn.write), so a burst of replies leaves
// together and no connection keeps a write buffer of its own. It tracks the highest zxid
// written: no reply carries a lower one. Every write must complete within the session timeout;
// a client that stops reading is disconnected. A connection has at most one writer at a time.
func (c *clientConn) runWriter() {
	var batch *[]outFrame // from takeAll, passed back to it when written
	written := 0          // (*batch)[written:] are taken and not yet written
	exited := false
	defer func() {
		// Frames taken but not written when the writer stops are uncounted on the way out.
		if batch != nil {
			for _, f := range (*batch)[written:] {
				c.budget.written(f.size())
			}
		}
		if !exited {
			c.out.stopped()
		}
	}()
	defer c.recoverPanic("writer")
	for {
		batch, written = c.out.takeAll(batch), 0
		if batch == nil {
			exited = true // takeAll cleared running: another push starts another writer
			return
		}
		frames := *batch
		closeAfter := false
		for i := range frames {
			c.raiseZxid(&frames[i])
			if frames[i].closeAfter {
				closeAfter = true
				frames = frames[:i+1] // nothing is queued after a closing frame
				break
			}
		}
		if !c.armWrite(c.timeout) {
			return
		}
		// Counted before the write, as ZooKeeper counts a response when it queues it: a client
		// that has read its answer finds it in the next srvr or mntr.
		for i := range frames {
			if n := len(frames[i].frame); n > 0 {
				c.countSent(n)
			}
		}
		if err := c.write(frames); err != nil {
			c.writeFailed(err)
			return
		}
		for ; written < len(frames); written++ {
			c.budget.written(frames[written].size())
			frames[written].release()
		}
		if closeAfter {
			c.graceful.Store(true)
			c.shutdown()
			return
		}
	}
}

// coalesceBytes is the largest batch of several frames that write copies into one pooled
// buffer rather than handing to writev.
const coalesceBytes = 32 << 10

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, coalesceBytes); return &b }}

// write writes a batch of frames in one system call: write for one frame, or for several
// copied into a pooled buffer up to coalesceBytes, else writev. writev makes the socket keep
// an iovec array for the rest of its life, which an idle connection should not hold. Frames
// without bytes (noFrame) are skipped.
func (c *clientConn) write(frames []outFrame) error {
	total, n, last := 0, 0, -1
	for i := range frames {
		if len(frames[i].frame) > 0 {
			total += len(frames[i].frame)
			n, last = n+1, i
		}
	}
	switch {
	case n == 0:
		return nil
	case n == 1:
		_, err := c.nc.Write(frames[last].frame)
		return err
	case total > coalesceBytes:
		bufs := make(net.Buffers, 0, n)
		for i := range frames {
			if len(frames[i].frame) > 0 {
				bufs = append(bufs, frames[i].frame)
			}
		}
		_, err := bufs.WriteTo(c.nc)
		return err
	}
	bp := coalescePool.Get().(*[]byte)
	b := (*bp)[:0]
	for i := range frames {
		b = append(b, frames[i].frame...)
	}
	_, err := c.nc.Write(b)
	*bp = b[:0]
	coalescePool.Put(bp)
	return err
}

// raiseZxid keeps the zxids the client sees from going back: a reply's zxid is raised, in its
// encoded frame, to the highest the connection has written (ZooKeeper's is its last processed
// zxid, at least that of every reply and event sent before it); the highest is tracked.
func (c *clientConn) raiseZxid(f *outFrame) {
	if f.noHeader || len(f.frame) < replyZxidOffset+8 {
		return
	}
	switch {
	case f.hdr.Xid != encoding.XidNotification && !f.exactZxid && f.hdr.Zxid < c.lastZxid:
		binary.BigEndian.PutUint64(f.frame[replyZxidOffset:], uint64(c.lastZxid))
	case f.hdr.Zxid > c.lastZxid:
		c.lastZxid = f.hdr.Zxid
		c.s.stats.observeZxid(f.hdr.Zxid)
	}
}

// writeFailed ends the connection after a failed write (the writer writes no more: it stops
// for good). The requests already read still take effect, as in ZooKeeper, where a request
// read is a request submitted: the reader stops (stopReading), not the executor, and teardown
// lets it run them; their replies are dropped.
func (c *clientConn) writeFailed(err error) {
	if clientGone(err) {
		c.log.Debug("client closed the connection before its reply was written", zap.Error(err))
	} else if !c.isClosing() && !errors.Is(err, net.ErrClosed) {
		c.log.Info("write failed; closing the connection", zap.Error(fmt.Errorf("session %v: write reply: %w", c.id, err)))
	}
	c.stopReading()
}

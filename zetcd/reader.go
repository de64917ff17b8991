package zetcd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// runReader reads request frames until the connection ends, and reports false; or, when the
// connection has waited idleAfter for a request, it arms the read deadline for the rest of the
// session timeout and reports true: the caller continues the wait in a new goroutine
// (Server.awaitIdle). Pings are answered at once, reads from memory are run here when nothing
// is queued (canReadHere), everything else is queued, in order, for the executor. The queue is
// bounded, in requests and in the bytes the connection holds (backpressure.go): when it is full
// the reader stops reading the socket (backpressure).
//
// Each frame must begin to arrive within the session timeout; one that does not expires the
// session.
//
// An idle connection is one goroutine waiting in readPrefix, holding no buffer. Why it moves:
// a goroutine's stack keeps the size its deepest call needed (the handshake, decoding and
// queueing a request: 4-8 KiB), and the runtime shrinks a stack in use to no less than 4 KiB; a
// new goroutine starts with 2 KiB, which the wait alone fits in. A busy connection never moves
// (its next request comes first); an idle one moves once per idle spell.
func (c *clientConn) runReader() (idle bool) {
	defer c.recoverPanic("reader")
	for {
		if !c.awaitRoom(c.inFull, c.budget.inRoom, 0) {
			return false
		}
		wait := c.rd.buf == nil // nothing unread: wait for the client
		deadline := time.Now().Add(c.timeout)
		if !c.armRead(deadline, wait) {
			return false
		}
		if wait {
			if err := c.readPrefix(); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(deadline) {
					// idleAfter passed, not the session timeout (nor a shutdown or drain:
					// armRead sees those).
					return c.armRead(deadline, false)
				}
				c.readFailed(err)
				return false
			}
			// The rest of the frame has the session timeout, not what is left of idleAfter.
			if !c.rd.holdsFrame() && !c.armRead(deadline, false) {
				return false
			}
		}
		if !c.readRequest() {
			return false
		}
	}
}

// idleAfter is how long a reader that has served requests waits for the next one before its
// wait moves to a new goroutine (runReader). A move costs a few microseconds (a goroutine, and
// growing its stack again when the next request comes), at most once per idleAfter per
// connection, so a short one costs nothing measurable; and clients ping every third of their
// session timeout, so idle connections spend most of their time on the small stack. A
// variable for tests.
var idleAfter = 250 * time.Millisecond

// readPrefix waits for the client's next bytes and reads what has arrived, up to len(first),
// straight from the socket into rd.first; the start of a frame, often all of a small one. It is
// where an idle connection waits: keep it small.
//
//go:noinline
func (c *clientConn) readPrefix() error {
	for {
		n, err := c.nc.Read(c.rd.first[:])
		if n > 0 {
			c.rd.take(c.rd.first[:n]) // an error comes back on the next read
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readRequest reads the rest of a frame (readFrame) and queues the request, runs it (a read from
// memory: canReadHere), or answers a ping.
// It reports false when the reader is to stop.
//
//go:noinline
func (c *clientConn) readRequest() bool {
	// frame is valid until the next readFrame: records never alias it.
	frame, err := c.readFrame()
	if err != nil {
		c.readFailed(err)
		return false
	}
	defer c.rd.releaseIfDrained() // frame, which may be its bytes, has been decoded
	now := time.Now()
	c.lastActivity.Store(now.UnixNano())
	c.countReceived(4 + len(frame))

	// On the stack while the reader reads and perhaps runs it (canReadHere); a request queued
	// for the executor is copied to the heap.
	var req pendingRequest
	r := &req
	r.received = now
	if err := encoding.DecodeRecord(frame, &r.hdr); err != nil {
		// Not even a header: there is no xid to answer. The requests read before it still
		// take effect (teardown).
		c.log.Warn("bad request header; closing the connection",
			zap.Error(fmt.Errorf("session %v: read request header: %w", c.id, err)))
		return false
	}
	if r.hdr.Op == encoding.OpPing && c.pingAtOnce() {
		// Answered at once, not behind slow requests. Clients match pings by xid -2,
		// not by position, so overtaking earlier replies is fine.
		c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidPing, Zxid: c.processedZxid()}})
		c.flush()
		return true
	}
	if c.readOnly && refusedReadOnly(r.hdr.Op) {
		r.kind = requestNotReadOnly
	} else {
		parseRequestBody(r, frame[encoding.RequestHeaderSize:])
	}
	if c.canReadHere(r) {
		more := c.execute(r)
		c.flush()
		if !more {
			// A closing frame is queued, and a writer started before may be writing it:
			// let it finish before the teardown, which cuts off writes in progress.
			c.out.close(true)
		}
		return more
	}
	queued := new(pendingRequest)
	*queued = req
	// The decoded request holds about what its frame did.
	queued.size = int64(len(frame)) + frameOverhead
	c.queued(queued)
	if !c.pushRequest(queued) {
		// The executor stopped for good after a request that closes the connection: the
		// writer closes it once the answer is out (returning here would cut that short).
		c.dequeued(queued)
	}
	return true
}

// canReadHere reports whether the reader may execute r itself, and write its reply, instead of
// queuing it for the executor: r is a read the backend answers at once (Session.ReadyToRead),
// and nothing of the connection executes or waits to (the reader alone queues requests), so
// requests still run one at a time and replies leave in request order. At high request rates
// the switches to the executor's and the writer's goroutines cost more than such a read, and
// lengthen the tail of read latency.
func (c *clientConn) canReadHere(r *pendingRequest) bool {
	return r.kind == requestDispatch && answeredFromMemory(r.hdr.Op) && !c.outFull() &&
		c.exec.quiet() && c.sess.ReadyToRead()
}

// answeredFromMemory lists the reads of Session.ReadyToRead.
func answeredFromMemory(op encoding.Op) bool {
	switch op {
	case encoding.OpExists, encoding.OpGetData, encoding.OpGetChildren, encoding.OpGetChildren2,
		encoding.OpGetACL, encoding.OpGetAllChildrenNumber, encoding.OpGetEphemerals, encoding.OpMultiRead:
		return true
	}
	return false
}

// frameReader buffers what a client sent while some of it is unread. The reader's goroutine
// only (serveConn's, then each awaitIdle's in turn).
//
// Between frames, when nothing the client sent is unread, it holds no buffer: readPrefix reads
// whatever arrives first into first, a pooled buffer of readBufferSize is taken for it and for
// the rest of the frame and whatever follows (a pipelining client's next requests), and given
// back once drained. A frame that fits the buffer is returned in place; a larger one is read
// into its own slice.
type frameReader struct {
	// first is read into with one system call: 256 bytes hold a whole write of a value up to
	// about 200 bytes (a setData of 128 bytes is 160), which 64 split in two reads.
	first [256]byte
	buf   []byte // pooled; nil when nothing is unread
	r, w  int    // buf[r:w] is unread
}

// readBufPool holds the read buffers of connections that are reading a frame.
var readBufPool = sync.Pool{New: func() any { return new([readBufferSize]byte) }}

// holdsFrame reports whether the unread bytes hold a whole frame (or a length no frame has):
// reading it needs nothing more from the socket.
func (rd *frameReader) holdsFrame() bool {
	if rd.w-rd.r < 4 {
		return false
	}
	n := int32(binary.BigEndian.Uint32(rd.buf[rd.r:]))
	return n < 0 || rd.w-rd.r-4 >= int(n)
}

// take starts buffering with b, the bytes read by readPrefix.
func (rd *frameReader) take(b []byte) {
	rd.buf = readBufPool.Get().(*[readBufferSize]byte)[:]
	rd.r, rd.w = 0, copy(rd.buf, b)
}

// releaseIfDrained gives the buffer back once everything in it has been read.
func (rd *frameReader) releaseIfDrained() {
	if rd.buf != nil && rd.r == rd.w {
		rd.release()
	}
}

// release gives the buffer back with whatever it holds.
func (rd *frameReader) release() {
	if rd.buf == nil {
		return
	}
	readBufPool.Put((*[readBufferSize]byte)(rd.buf))
	rd.buf, rd.r, rd.w = nil, 0, 0
}

// fill reads from nc until buf holds k unread bytes (k <= len(buf)). A stream that ends first is
// io.ErrUnexpectedEOF, or io.EOF if nothing was unread.
func (rd *frameReader) fill(nc net.Conn, k int) error {
	if rd.r+k > len(rd.buf) {
		rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r = 0
	}
	for rd.w-rd.r < k {
		n, err := nc.Read(rd.buf[rd.w:])
		rd.w += n
		if rd.w-rd.r >= k {
			return nil
		}
		if err != nil {
			if err == io.EOF && rd.w > rd.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readFrame reads the next request frame (its payload, without the length prefix) from what
// readPrefix began to read, bounded by Config.MaxFrameBytes. The frame is valid until the next
// call: it may be the read buffer's own bytes.
func (c *clientConn) readFrame() ([]byte, error) {
	rd := &c.rd
	if err := rd.fill(c.nc, 4); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(rd.buf[rd.r:]))
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", encoding.ErrNegativeLength, n)
	}
	if int64(n) > int64(c.s.cfg.MaxFrameBytes) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", encoding.ErrFrameTooLarge, n, c.s.cfg.MaxFrameBytes)
	}
	if 4+int(n) <= len(rd.buf) {
		if err := rd.fill(c.nc, 4+int(n)); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		frame := rd.buf[rd.r+4 : rd.r+4+int(n)]
		rd.r += 4 + int(n)
		return frame, nil
	}
	frame := make([]byte, n)
	got := copy(frame, rd.buf[rd.r+4:rd.w])
	rd.r = rd.w
	if _, err := io.ReadFull(c.nc, frame[got:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// readFailed classifies the error that ended the reader. Whatever it is, but the session
// timeout, the requests read still take effect (clientConn.requestsStand).
func (c *clientConn) readFailed(err error) {
	switch {
	case c.isClosing():
		// We shut the connection down; the error is the past deadline.
	case c.isReadStopped():
		// Server.Shutdown, or a write failed (stopReading); the error is the past deadline.
		c.log.Debug("stopped reading requests")
	case errors.Is(err, io.EOF):
		c.log.Debug("client closed the connection")
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Debug("client closed the connection in the middle of a frame")
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Info("session expired: no packet within the session timeout", zap.Duration("timeout", c.timeout))
		c.setEnd(endExpired)
	case errors.Is(err, encoding.ErrFrameTooLarge), errors.Is(err, encoding.ErrNegativeLength):
		c.log.Warn("len error; closing the connection", zap.Error(fmt.Errorf("session %v: read request: %w", c.id, err)))
	case errors.Is(err, net.ErrClosed):
	case clientGone(err):
		c.log.Debug("client reset the connection", zap.Error(err))
	default:
		c.log.Info("read failed; closing the connection", zap.Error(fmt.Errorf("session %v: read request: %w", c.id, err)))
	}
}

package zetcd

import (
	"bufio"
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

// runReader reads request frames until the connection ends. Pings are answered through the
// writer at once; everything else is queued, in order, for the executor. The queue is bounded,
// in requests and in the bytes the connection holds (backpressure.go): when it is full the
// reader stops reading the socket (backpressure).
//
// Each frame must arrive within the session timeout (read deadline); one that does not expires
// the session.
//
// An idle connection is this goroutine waiting in readPrefix, holding no buffer. runReader is
// called at the top of the connection's goroutine (Server.serveConn), and the work of a frame
// is done in readRequest, whose frame is gone by the time the next wait begins: the stack under
// the wait is then small enough for the runtime to shrink it to 4 KiB.
func (c *clientConn) runReader() {
	defer c.recoverPanic("reader")
	for {
		if !c.awaitRoom(c.inFull, c.budget.inRoom, 0) || !c.armRead(c.timeout) {
			return
		}
		if c.br == nil {
			if err := c.readPrefix(); err != nil {
				c.readFailed(err)
				return
			}
		}
		if !c.readRequest() {
			return
		}
	}
}

// readPrefix waits for the next frame's length prefix and reads it straight from the socket
// into lenBuf (readFrame then reads the rest). It is where an idle connection waits: keep it
// small.
//
//go:noinline
func (c *clientConn) readPrefix() error {
	got := 0
	for {
		n, err := c.nc.Read(c.lenBuf[got:])
		if got += n; got == len(c.lenBuf) {
			return nil
		}
		if err != nil {
			if got > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

// readRequest reads the rest of a frame (readFrame) and queues the request, or answers a ping.
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
	defer func() {
		if c.br.Buffered() == 0 {
			c.releaseReader() // frame, which may be its bytes, has been decoded
		}
	}()
	now := time.Now()
	c.lastActivity.Store(now.UnixNano())
	c.countReceived(4 + len(frame))

	r := &pendingRequest{received: now}
	if err := encoding.DecodeRecord(frame, &r.hdr); err != nil {
		// Not even a header: there is no xid to answer.
		c.log.Warn("bad request header; closing the connection",
			zap.Error(fmt.Errorf("session %v: read request header: %w", c.id, err)))
		return false
	}
	if r.hdr.Op == encoding.OpPing {
		// Answered at once, not behind slow requests. Clients match pings by xid -2,
		// not by position, so overtaking earlier replies is fine.
		c.send(outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidPing, Zxid: c.sess.LastZxid()}})
		return true
	}
	parseRequestBody(r, frame[encoding.RequestHeaderSize:])
	// The decoded request holds about what its frame did.
	r.size = int64(len(frame)) + frameOverhead
	c.queued(r)
	if !c.pushRequest(r) {
		// The executor stopped for good after a request that closes the connection: the
		// writer closes it once the answer is out (returning here would cut that short).
		c.dequeued(r)
	}
	return true
}

// readerPool holds the buffered readers of connections that are reading a frame: a connection
// waiting for its next request holds none (readFrame).
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// readFrame reads the rest of a request frame (its payload, without the length prefix),
// bounded by Config.MaxFrameBytes. The frame is valid until the next call: it may be the
// buffered reader's own bytes.
//
// Between frames, when nothing the client sent is buffered, the connection holds no read
// buffer: readPrefix has read the length prefix straight from the socket into lenBuf, and a
// pooled buffered reader is taken here for the payload and whatever follows it (a pipelining
// client's next requests), then given back once drained (readRequest). While it holds one,
// the next prefix is read from it. A frame that fits the buffer is returned in place; a larger
// one is read into its own slice.
func (c *clientConn) readFrame() ([]byte, error) {
	if c.br == nil { // lenBuf holds the prefix (readPrefix)
		c.br = readerPool.Get().(*bufio.Reader)
		c.br.Reset(c.nc)
	} else if _, err := io.ReadFull(c.br, c.lenBuf[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(c.lenBuf[:]))
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", encoding.ErrNegativeLength, n)
	}
	if int64(n) > int64(c.s.cfg.MaxFrameBytes) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", encoding.ErrFrameTooLarge, n, c.s.cfg.MaxFrameBytes)
	}
	var frame []byte
	var err error
	if int(n) <= c.br.Size() {
		if frame, err = c.br.Peek(int(n)); err == nil {
			c.br.Discard(int(n)) // moves the read position only: frame stays intact until the next read
		}
	} else {
		frame = make([]byte, n)
		_, err = io.ReadFull(c.br, frame)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return frame, err
}

// releaseReader gives the connection's buffered reader back to readerPool, with whatever it
// still buffers. Serve goroutine only.
func (c *clientConn) releaseReader() {
	if c.br == nil {
		return
	}
	c.br.Reset(nil)
	readerPool.Put(c.br)
	c.br = nil
}

// readFailed classifies the error that ended the reader.
func (c *clientConn) readFailed(err error) {
	switch {
	case c.isClosing():
		// We shut the connection down; the error is the past deadline.
	case c.isDraining():
		// Server.Shutdown: stop reading; teardown answers what was read and detaches.
		c.log.Debug("draining: stopped reading requests")
	case errors.Is(err, io.EOF):
		c.log.Debug("client closed the connection")
		c.eof = true
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

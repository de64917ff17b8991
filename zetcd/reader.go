package zetcd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
func (c *clientConn) runReader() {
	defer c.recoverPanic("reader")
	var buf []byte
	for {
		if !c.awaitRoom(c.inFull, c.budget.inRoom, 0) || !c.armRead(c.timeout) {
			return
		}
		frame, err := encoding.ReadFrame(c.br, buf, c.s.cfg.MaxFrameBytes)
		if err != nil {
			c.readFailed(err)
			return
		}
		if cap(frame) <= maxReuseBytes {
			buf = frame // records never alias the frame, so it can be reused at once
		}
		now := time.Now()
		c.lastActivity.Store(now.UnixNano())
		c.countReceived(4 + len(frame))

		r := &pendingRequest{received: now}
		if err := encoding.DecodeRecord(frame, &r.hdr); err != nil {
			// Not even a header: there is no xid to answer.
			c.log.Warn("bad request header; closing the connection",
				zap.Error(fmt.Errorf("session %v: read request header: %w", c.id, err)))
			return
		}
		if r.hdr.Op == encoding.OpPing {
			// Answered at once, not behind slow requests. Clients match pings by xid -2,
			// not by position, so overtaking earlier replies is fine.
			c.send(outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidPing, Zxid: c.sess.LastZxid()}})
			continue
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
	}
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

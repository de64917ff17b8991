package zetcd

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// outFrame is one item of a connection's write queue.
type outFrame struct {
	connect *encoding.ConnectResponse // if set, the handshake answer (no ReplyHeader)

	hdr  encoding.ReplyHeader
	body encoding.Record // nil: header only

	// exactZxid keeps hdr.Zxid as it is, below what the connection has seen if need be: an
	// auth reply, which ZooKeeper answers with zxid 0.
	exactZxid bool

	noFrame    bool // write nothing; only meaningful with closeAfter
	closeAfter bool // flush, then close the connection
}

// send queues f for the writer. It reports false, dropping f, if the writer has stopped.
func (c *clientConn) send(f outFrame) bool {
	return c.out.push(f)
}

// outQueue is a connection's write queue: one FIFO for replies, pings and watch events, so that
// an event queued before a reply is written before it. It is unbounded; replies are bounded by
// the request queue in front of the executor, events by the watches the client set.
type outQueue struct {
	mu     sync.Mutex
	items  []outFrame // guarded by mu
	closed bool       // guarded by mu; set when the writer stops
	ready  chan struct{}
}

func newOutQueue() *outQueue { return &outQueue{ready: make(chan struct{}, 1)} }

// push appends f; false if the writer has stopped.
func (q *outQueue) push(f outFrame) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, f)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// take moves everything queued into dst (reused) and returns it; empty if nothing is queued.
func (q *outQueue) take(dst []outFrame) []outFrame {
	q.mu.Lock()
	dst = append(dst[:0], q.items...)
	clear(q.items)
	q.items = q.items[:0]
	q.mu.Unlock()
	return dst
}

// close makes later pushes fail; called by the writer when it stops.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.items = nil
	q.mu.Unlock()
}

// runWriter owns the socket for writing: it encodes queued frames into a buffered writer and
// flushes whenever the queue is empty, so a burst of replies leaves in few system calls. It
// tracks the highest zxid written: no reply carries a lower one. Every write must
// complete within the session timeout; a client that stops reading is disconnected.
func (c *clientConn) runWriter() {
	defer close(c.writerDone)
	defer c.out.close()
	defer c.recoverPanic("writer")
	w := bufio.NewWriterSize(c.nc, writeBufferSize)
	var buf []byte
	var batch []outFrame
	var hdr encoding.ReplyHeader // reused: passing it as a Record moves it to the heap once
	for {
		batch = c.out.take(batch)
		if len(batch) == 0 {
			if w.Buffered() > 0 {
				if !c.armWrite(c.timeout) {
					return
				}
				if err := w.Flush(); err != nil {
					c.writeFailed(err)
					return
				}
			}
			select {
			case <-c.out.ready:
				continue
			case <-c.closing:
				return
			case <-c.sess.Done():
				c.log.Info("session ended or moved elsewhere; closing its connection here")
				c.setEnd(endGone)
				c.shutdown()
				return
			}
		}
		for i := range batch {
			f := &batch[i]
			buf = buf[:0]
			switch {
			case f.noFrame:
			case f.connect != nil:
				buf = encoding.AppendFrame(buf, f.connect)
			default:
				hdr = f.hdr
				if hdr.Xid != encoding.XidNotification && !f.exactZxid && hdr.Zxid < c.lastZxid {
					// A reply's zxid never goes back: ZooKeeper's is its last processed
					// zxid, at least that of every reply and event sent before it.
					hdr.Zxid = c.lastZxid
				} else if hdr.Zxid > c.lastZxid {
					c.lastZxid = hdr.Zxid
					c.s.stats.observeZxid(hdr.Zxid)
				}
				buf = encoding.AppendFrame(buf, &hdr, f.body)
			}
			if len(buf) > 0 {
				// bufio only writes to the socket when the frame does not fit; arm the
				// deadline just for those writes.
				if len(buf) > w.Available() && !c.armWrite(c.timeout) {
					return
				}
				if _, err := w.Write(buf); err != nil {
					c.writeFailed(err)
					return
				}
				c.countSent(len(buf))
			}
			if f.closeAfter {
				if !c.armWrite(c.timeout) {
					return
				}
				if err := w.Flush(); err != nil {
					c.writeFailed(err)
					return
				}
				c.graceful.Store(true)
				c.shutdown()
				return
			}
			if cap(buf) > maxReuseBytes {
				buf = nil
			}
		}
		clear(batch)
	}
}

func (c *clientConn) writeFailed(err error) {
	if !c.isClosing() && !errors.Is(err, net.ErrClosed) {
		c.log.Info("write failed; closing the connection", zap.Error(fmt.Errorf("session %v: write reply: %w", c.id, err)))
	}
	c.shutdown()
}

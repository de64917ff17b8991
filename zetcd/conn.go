package zetcd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// endReason says why a connection that served a session ended, which decides what happens to
// the session. When several apply, the highest wins (see setEnd).
type endReason int32

const (
	// endDropped: the connection was lost, or closed by the server for a protocol or backend
	// error. The session is detached and expires after its timeout unless resumed.
	endDropped endReason = iota
	// endExpired: no packet arrived within the session timeout. The session is expired.
	endExpired
	// endGone: the backend reported (Session.Done) that the session ended or moved without
	// this connection: expired in the store, or resumed through another zetcd. ZooKeeper
	// closes such a connection; the client then learns the session's fate when it reconnects.
	// The Session is only detached; no expiry timer.
	endGone
	// endServerClose: Server.Close. The session is detached; no expiry timer.
	endServerClose
	// endSuperseded: the session was resumed on another connection of this server, which
	// now owns the session record. This connection's Session is only detached.
	endSuperseded
	// endClosed: closeSession succeeded; the session is gone.
	endClosed
)

// maxReuseBytes is the largest read or write buffer a connection keeps between frames; larger
// ones (big setData or getChildren frames) are left to the garbage collector.
const maxReuseBytes = 64 << 10

// clientConn is one accepted client connection. Its goroutines (see the package doc):
//   - the serve goroutine (Server.serveConn), which owns the socket: it sniffs four-letter
//     words, performs the handshake, then becomes the reader, and finally tears down;
//   - the executor (runExecutor, dispatch.go), which calls the Session's Handler methods;
//   - the writer (runWriter), the only goroutine that writes to the socket after the handshake
//     has been decided.
type clientConn struct {
	s      *Server
	nc     net.Conn
	remote string
	br     *bufio.Reader // read only by the serve goroutine

	// log gains the session field in runSession before the executor and writer start;
	// read-only afterwards.
	log *zap.Logger

	// ctx is passed to Handler methods and Backend.Connect; shutdown cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce  sync.Once
	closing    chan struct{} // closed by shutdown: every goroutine of the connection stops
	socketOnce sync.Once     // closeSocket
	done       chan struct{} // closed when serveConn has returned (socket closed, session handled)

	end      atomic.Int32 // endReason; raised by setEnd
	graceful atomic.Bool  // an answer was sent before closing: half-close and linger (closeSocket)
	draining atomic.Bool  // set by drain (Server.Shutdown): read no more, answer what was read, close
	st       connStats    // this connection's counters (stat, cons, crst)

	// Set by runSession before the executor and writer start; read-only afterwards.
	sess    Session
	id      encoding.SessionID
	timeout time.Duration

	lastActivity atomic.Int64 // unix ns when the last packet arrived (touches the session)
	eof          bool         // the client closed its side cleanly; serve goroutine only

	reqCh      chan *pendingRequest // reader → executor; closed by teardown once the reader stopped
	execDone   chan struct{}        // closed when the executor has returned
	out        *outQueue            // reader (pings), executor (replies), watch events → writer
	writerDone chan struct{}        // closed when the writer has returned

	lastZxid encoding.Zxid // highest zxid written on this connection; writer goroutine only
}

// outFrame is one item of a connection's write queue.
type outFrame struct {
	connect *encoding.ConnectResponse // if set, the handshake answer (no ReplyHeader)

	hdr  encoding.ReplyHeader
	body encoding.Record // nil: header only
	// lastZxid: the writer sets hdr.Zxid to the highest zxid written on the connection so far
	// (pings, and errors produced by the server itself rather than the handler).
	lastZxid bool

	noFrame    bool // write nothing; only meaningful with closeAfter
	closeAfter bool // flush, then close the connection
}

func newClientConn(s *Server, nc net.Conn) *clientConn {
	remote := "unknown"
	if a := nc.RemoteAddr(); a != nil {
		remote = a.String()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &clientConn{
		s:       s,
		nc:      nc,
		remote:  remote,
		br:      bufio.NewReaderSize(nc, readBufferSize),
		log:     s.log.With(zap.String("remote", remote)),
		ctx:     ctx,
		cancel:  cancel,
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.st.reset()
	return c
}

// setEnd raises the connection's end reason to r.
func (c *clientConn) setEnd(r endReason) {
	for {
		cur := c.end.Load()
		if int32(r) <= cur || c.end.CompareAndSwap(cur, int32(r)) {
			return
		}
	}
}

func (c *clientConn) endReason() endReason { return endReason(c.end.Load()) }

// shutdown stops the connection: it cancels handler calls and wakes every goroutine blocked on
// the socket by moving its deadlines to the past. It does not close the socket; the serve
// goroutine does that once the other goroutines have stopped. Safe from any goroutine.
func (c *clientConn) shutdown() {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.cancel()
		past := time.Unix(1, 0)
		c.nc.SetReadDeadline(past)
		c.nc.SetWriteDeadline(past)
	})
}

func (c *clientConn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// armRead sets the read deadline d from now and reports whether the connection is still open
// and not draining. Checking closing (and draining) after setting the deadline guarantees that
// a concurrent shutdown (or drain) is never overridden: either it is seen here, or its past
// deadline is set after ours.
func (c *clientConn) armRead(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	return !c.isClosing() && !c.isDraining()
}

// armWrite is armRead for writes.
func (c *clientConn) armWrite(d time.Duration) bool {
	c.nc.SetWriteDeadline(time.Now().Add(d))
	return !c.isClosing()
}

// closeSocket closes the socket. After an answer that precedes a close (graceful), it first
// half-closes and reads whatever the client still sends for a moment, so that unread input
// does not make the kernel reset the connection and destroy the answer in flight.
func (c *clientConn) closeSocket() {
	c.socketOnce.Do(func() {
		if c.graceful.Load() && c.s.ctx.Err() == nil {
			if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			c.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
			io.Copy(io.Discard, io.LimitReader(c.br, lingerMaxBytes))
		}
		c.nc.Close()
	})
}

// recoverPanic is the last line of defence of every connection goroutine: nothing a client
// sends may crash the process. It logs the stack and shuts the connection down.
func (c *clientConn) recoverPanic(goroutine string) {
	if r := recover(); r != nil {
		c.log.Error("panic in connection goroutine; closing the connection",
			zap.String("goroutine", goroutine), zap.Any("panic", r), zap.Stack("stack"))
		c.shutdown()
	}
}

// serve runs in the goroutine that accepted the connection: it reads the first frame and
// either answers a four-letter word or opens the session and serves it until the end.
func (c *clientConn) serve() {
	if !c.armRead(handshakeTimeout) {
		return
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(c.br, lenBuf[:]); err != nil {
		c.logHandshakeError("read connect request", err)
		return
	}
	n := int32(binary.BigEndian.Uint32(lenBuf[:]))
	if cmd, ok := encoding.FourLetterWord(n); ok {
		c.fourLetterWord(cmd)
		return
	}
	if n < 0 || int64(n) > int64(c.s.cfg.MaxFrameBytes) {
		c.log.Warn("len error", zap.Error(fmt.Errorf("read connect request: frame length %d outside [0, %d]",
			n, c.s.cfg.MaxFrameBytes)))
		return
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(c.br, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.logHandshakeError("read connect request", err)
		return
	}
	c.countReceived(4 + len(frame))
	c.s.stats.handshakes.Add(1)
	var req encoding.ConnectRequest
	if err := encoding.DecodeRecord(frame, &req); err != nil {
		c.log.Warn("bad connect request; closing the connection", zap.Error(fmt.Errorf("decode connect request: %w", err)))
		return
	}
	timeout := c.s.negotiateTimeout(req.TimeOut)
	sess := c.connect(&req, timeout)
	if sess == nil {
		return
	}
	c.runSession(sess, &req, timeout)
}

func (c *clientConn) logHandshakeError(step string, err error) {
	switch {
	case c.isClosing(), c.isDraining(), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// Closed by us, or a client that connected and left (port probes, health checks).
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Info("no connect request in time; closing the connection", zap.Duration("timeout", handshakeTimeout))
	default:
		c.log.Info("handshake failed", zap.Error(fmt.Errorf("%s: %w", step, err)))
	}
}

// connect opens or resumes the session the client asked for, answering the client itself when
// that fails. It returns nil when the connection is to be closed.
func (c *clientConn) connect(req *encoding.ConnectRequest, timeout time.Duration) Session {
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	sess, err := c.s.backend.Connect(ctx, ConnectParams{
		SessionID:    req.SessionID,
		Passwd:       req.Passwd,
		Timeout:      timeout,
		LastZxidSeen: req.LastZxidSeen,
		Events:       c,
		RemoteAddr:   c.nc.RemoteAddr(),
		AuthIDs:      c.transportIDs(),
	})
	cancel()
	if err == nil && sess == nil {
		err = errors.New("backend returned neither a session nor an error")
	}
	switch {
	case err == nil:
		return sess
	case errors.Is(err, ErrSessionExpired):
		// ZooKeeper's answer to an unknown or expired session or a wrong password: timeout 0,
		// session 0, a zero password, in the shape the client used. Clients report Expired.
		c.log.Info("session expired or unknown; answering timeout 0", zap.Stringer("session", req.SessionID))
		c.writeHandshake(&encoding.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: req.HasReadOnly})
	case errors.Is(err, ErrZxidAhead):
		// No answer: the client tries another server, which may have caught up.
		c.log.Info("client has seen a newer zxid than the backend; closing without answer",
			zap.Stringer("session", req.SessionID), zap.Stringer("lastZxidSeen", req.LastZxidSeen))
		c.graceful.Store(true)
	case errors.Is(err, context.Canceled):
		// Server closing.
	default:
		c.log.Error("open session failed; closing the connection",
			zap.Error(fmt.Errorf("session %v: connect: %w", req.SessionID, err)))
	}
	return nil
}

// transportIDs are the identities the connection's transport established: x509:<subject DN>
// (RFC 2253, as crypto/x509 spells it) for a TLS client certificate the server verified, as
// ZooKeeper's X509AuthenticationProvider adds on its secure port. Called after the handshake
// (the first frame has been read).
func (c *clientConn) transportIDs() []encoding.ID {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return []encoding.ID{{Scheme: "x509", ID: st.PeerCertificates[0].Subject.String()}}
}

// writeHandshake writes a ConnectResponse directly, when no session is served.
func (c *clientConn) writeHandshake(resp *encoding.ConnectResponse) {
	if !c.armWrite(handshakeTimeout) {
		return
	}
	buf, err := encoding.WriteFrame(c.nc, nil, resp)
	if err != nil {
		c.log.Info("write connect response failed", zap.Error(fmt.Errorf("write connect response: %w", err)))
		return
	}
	c.countSent(len(buf))
	c.graceful.Store(true)
}

// runSession serves an open session: it records it, closes any previous connection of the same
// session, starts the executor and writer, answers the handshake, reads requests until the
// connection ends, then tears everything down.
func (c *clientConn) runSession(sess Session, req *encoding.ConnectRequest, negotiated time.Duration) {
	c.sess = sess
	c.id = sess.ID()
	c.timeout = sess.Timeout()
	if c.timeout <= 0 {
		c.timeout = negotiated
	}
	c.log = c.log.With(zap.Stringer("session", c.id))
	c.lastActivity.Store(time.Now().UnixNano())

	old, ok := c.s.sessions.attach(c)
	if !ok { // server closing
		sess.Detach()
		return
	}
	c.st.established.Store(time.Now().UnixMilli())
	c.reqCh = make(chan *pendingRequest, maxOutstanding)
	c.execDone = make(chan struct{})
	c.out = newOutQueue()
	c.writerDone = make(chan struct{})
	go c.runExecutor()
	go c.runWriter()
	defer c.teardown()

	if old != nil {
		// The session moved to this connection: its old connection must stop serving it
		// before this one starts, so that requests stay ordered and life-cycle calls of the
		// old Session never overlap Handler calls here.
		c.log.Info("session resumed while its previous connection was open; closing that one",
			zap.String("previous", old.remote))
		old.setEnd(endSuperseded)
		old.shutdown()
		select {
		case <-old.done:
		case <-c.closing:
			return
		}
	}
	// Written by the writer as its first frame: nothing else is queued before the reader runs.
	c.send(outFrame{connect: &encoding.ConnectResponse{
		ProtocolVersion: 0,
		TimeOut:         int32(c.timeout / time.Millisecond),
		SessionID:       c.id,
		Passwd:          sess.Password(),
		ReadOnly:        false,
		HasReadOnly:     req.HasReadOnly,
	}})
	c.log.Debug("session established", zap.Duration("timeout", c.timeout),
		zap.Bool("resumed", req.SessionID != 0), zap.Bool("readOnlyFlag", req.HasReadOnly))
	c.runReader()
}

// runReader reads request frames until the connection ends. Pings are answered through the
// writer at once; everything else is queued, in order, for the executor. The queue is bounded:
// when it is full the reader stops reading the socket (backpressure).
//
// Each frame must arrive within the session timeout (read deadline); one that does not expires
// the session.
func (c *clientConn) runReader() {
	defer c.recoverPanic("reader")
	var buf []byte
	for {
		if !c.armRead(c.timeout) {
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
			c.send(outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidPing}, lastZxid: true})
			continue
		}
		parseRequestBody(r, frame[encoding.RequestHeaderSize:])
		c.addOutstanding(1)
		select {
		case c.reqCh <- r:
		case <-c.closing:
			c.addOutstanding(-1)
			return
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
	default:
		c.log.Info("read failed; closing the connection", zap.Error(fmt.Errorf("session %v: read request: %w", c.id, err)))
	}
}

// send queues f for the writer. It reports false, dropping f, if the writer has stopped.
func (c *clientConn) send(f outFrame) bool {
	return c.out.push(f)
}

// Event queues a watch notification (EventSink). It never blocks: the queue is unbounded, as
// ZooKeeper's per-connection outgoing queue is, so one slow client cannot stall the watch
// fan-out of every other connection.
func (c *clientConn) Event(ev encoding.WatcherEvent, zxid encoding.Zxid) {
	c.out.push(outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidNotification, Zxid: zxid}, body: &ev})
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
// tracks the highest zxid written, which pings and server-made errors carry. Every write must
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
				if f.lastZxid {
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

// teardown runs in the serve goroutine once the reader has stopped. It stops the executor and
// the writer, settles the session according to the end reason, and closes the socket (before
// settling, for an expired session).
func (c *clientConn) teardown() {
	reqClosed := false
	if (c.eof || c.isDraining()) && !c.isClosing() {
		// The client closed its side after sending, or the server is draining: what was read
		// still takes effect, in order (as in ZooKeeper, where a request read is a request
		// submitted), and the replies are flushed before the connection closes.
		close(c.reqCh)
		reqClosed = true
		<-c.execDone
		c.send(outFrame{noFrame: true, closeAfter: true})
		<-c.writerDone
	}
	c.shutdown()
	if !reqClosed {
		close(c.reqCh) // the reader, its only sender, has stopped
	}
	<-c.execDone
	<-c.writerDone
	for range c.reqCh { // left behind by an executor that stopped early
		c.addOutstanding(-1)
	}
	if c.endReason() == endExpired {
		c.closeSocket() // ZooKeeper closes the connection, then ends the session
	}
	// Otherwise settle the session first: closing may linger for a slow client (closeSocket).
	c.endSession()
	c.closeSocket()
}

// endSession makes the life-cycle call the end reason calls for. The executor has stopped, so
// no Handler call of this Session is running.
func (c *clientConn) endSession() {
	switch c.endReason() {
	case endClosed:
		c.s.sessions.remove(c)
		c.log.Debug("session closed by the client")
	case endSuperseded:
		c.sess.Detach()
	case endGone:
		c.s.sessions.remove(c)
		c.sess.Detach()
	case endServerClose:
		c.s.sessions.remove(c)
		c.sess.Detach()
	case endExpired:
		c.s.sessions.remove(c)
		ctx, cancel := context.WithTimeout(c.s.ctx, lifecycleTimeout)
		defer cancel()
		if err := c.sess.Expire(ctx); err != nil && !errors.Is(err, context.Canceled) {
			c.log.Error("expire session failed", zap.Error(fmt.Errorf("session %v: expire: %w", c.id, err)))
		}
	case endDropped:
		c.sess.Detach()
		deadline := time.Unix(0, c.lastActivity.Load()).Add(c.timeout)
		c.s.sessions.detach(c, deadline)
		c.log.Debug("session detached", zap.Time("expiresAt", deadline))
	}
}

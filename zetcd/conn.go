package zetcd

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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

// clientConn is one accepted client connection. Its goroutines (see the package doc):
//   - the serve goroutine (Server.serveConn), which owns the socket: it sniffs four-letter
//     words, performs the handshake, then becomes the reader, and finally tears down (an idle
//     reader moves to a new goroutine, which then owns the socket: Server.readConn);
//   - the executor (runExecutor, executor.go), which calls the Session's Handler methods (the
//     reader calls those of reads answered from memory itself: canReadHere);
//   - the writer (runWriter), the only one that writes to the socket after the handshake has
//     been decided, at most one at a time, while frames are queued (outQueue): a goroutine of
//     its own, or the reader or the executor writing their replies themselves (flush).
//
// An idle connection is its serve goroutine blocked in a read, and nothing else: the executor
// and the writer exit when their queues are empty, and the session's end is learnt from the
// backend's callback (Session.AfterDone, sessionGone), not by a goroutine waiting on it.
type clientConn struct {
	s      *Server
	nc     net.Conn
	remote string
	// ip is the client's address without the port, counted in Server.connsByIP; set by
	// startConn only when MaxClientCnxns is.
	ip string
	rd frameReader // what the client sent and is unread; the reader only

	log connLog

	// ctx is passed to Handler methods and Backend.Connect; shutdown cancels it, and nothing
	// else: the requests read run with it after the reader has stopped (teardown).
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce  sync.Once
	closing    chan struct{} // closed by shutdown: every goroutine of the connection stops
	socketOnce sync.Once     // closeSocket
	done       chan struct{} // closed by endConn (socket closed, session handled)

	end      atomic.Int32 // endReason; raised by setEnd
	graceful atomic.Bool  // an answer was sent before closing: half-close and linger (closeSocket)
	// readStopped is set by stopReading (Server.Shutdown's drain, a failed write): read no
	// more; what was read still takes effect, then the connection closes (teardown).
	readStopped atomic.Bool
	st          connStats // this connection's counters (stat, cons, crst)

	// Set by runSession before the executor and writer start; read-only afterwards.
	sess    Session
	id      encoding.SessionID
	timeout time.Duration
	// readOnly: the session is a read-only one (readonly.go); the reader answers the
	// requests refusedReadOnly lists itself.
	readOnly bool

	lastActivity atomic.Int64 // unix ns when the last packet arrived (touches the session)

	exec     execQueue    // reader → executor
	out      *outQueue    // reader (pings), executor (replies), watch events → writer
	budget   *queueBudget // bytes held for the client: requests read, frames to write
	stopGone func() bool  // cancels sessionGone's registration (Session.AfterDone); teardown
	// events holds back the watch events that arrive while a request executes, so that the
	// reply of a request that sets a watch precedes that watch's events (events.go).
	events eventGate

	lastZxid encoding.Zxid // highest zxid written on this connection; writer goroutine only

	auth connAuth // SASL and enforced authentication (sasl.go)
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
		ctx:     ctx,
		cancel:  cancel,
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.log = connLog{c}
	c.budget = newQueueBudget(&s.stats.queuedBytes)
	c.st.reset()
	return c
}

// connLog logs for one connection on the server's logger (Server.connLog), with the
// connection's fields (its remote address; its session, once open) added to the entries that
// are written, and only to those: a logger per connection, made with With or WithLazy, holds
// hundreds of bytes for the connection's life, and most connections never log above the level.
type connLog struct{ c *clientConn }

func (l connLog) Debug(msg string, fields ...zap.Field) { l.write(zapcore.DebugLevel, msg, fields) }
func (l connLog) Info(msg string, fields ...zap.Field)  { l.write(zapcore.InfoLevel, msg, fields) }
func (l connLog) Warn(msg string, fields ...zap.Field)  { l.write(zapcore.WarnLevel, msg, fields) }
func (l connLog) Error(msg string, fields ...zap.Field) { l.write(zapcore.ErrorLevel, msg, fields) }
func (l connLog) Log(lvl zapcore.Level, msg string, fields ...zap.Field) {
	l.write(lvl, msg, fields)
}

// write writes msg at lvl if the server's logger is enabled for it; always two calls below the
// caller to report (Server.connLog skips them). The session field is read only once runSession
// has set it: c.id is written before the goroutines that may log with it start, and never again.
func (l connLog) write(lvl zapcore.Level, msg string, fields []zap.Field) {
	ce := l.c.s.connLog.Check(lvl, msg)
	if ce == nil {
		return
	}
	own := []zap.Field{zap.String("remote", l.c.remote)}
	if l.c.id != 0 {
		own = append(own, zap.Stringer("session", l.c.id))
	}
	ce.Write(append(own, fields...)...)
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
// the socket by moving its deadlines to the past. The requests read and not yet executed are
// dropped: it is for a session that ended or moved, and for the server closing the connection
// for its own reasons (Server.Close, a request or a client it will not serve further). It does
// not close the socket; the serve goroutine does that once the other goroutines have stopped.
// Safe from any goroutine.
func (c *clientConn) shutdown() {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.cancel()
		past := time.Unix(1, 0)
		c.nc.SetReadDeadline(past)
		c.nc.SetWriteDeadline(past)
	})
}

// stopReading makes the reader stop at once (a past read deadline) and read no more, without
// cancelling what it has read: teardown lets that take effect, then closes the connection.
// Safe from any goroutine; idempotent.
func (c *clientConn) stopReading() {
	c.readStopped.Store(true)
	c.nc.SetReadDeadline(time.Unix(1, 0))
}

// isReadStopped reports whether stopReading was called.
func (c *clientConn) isReadStopped() bool { return c.readStopped.Load() }

func (c *clientConn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// armRead sets the read deadline t (if idle, at most idleAfter from now: runReader) and reports
// whether the connection is still open and reading. Checking closing (and readStopped) after
// setting the deadline guarantees that a concurrent shutdown (or stopReading) is never
// overridden: either it is seen here, or its past deadline is set after ours.
func (c *clientConn) armRead(t time.Time, idle bool) bool {
	if idle {
		if probe := time.Now().Add(idleAfter); probe.Before(t) {
			t = probe
		}
	}
	c.nc.SetReadDeadline(t)
	return !c.isClosing() && !c.isReadStopped()
}

// armWrite sets the write deadline d from now and reports whether the connection is still open.
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
			io.Copy(io.Discard, io.LimitReader(c.nc, lingerMaxBytes))
		}
		c.nc.Close()
		c.rd.release()
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

// teardown runs in the serve goroutine once the reader has stopped. It lets the requests read
// take effect when they still stand (requestsStand), stops the executor and the writer,
// settles the session according to the end reason, and closes the socket (before settling,
// for an expired session).
func (c *clientConn) teardown() {
	if c.requestsStand() {
		c.finishRequests()
	}
	c.shutdown()
	c.dropRequests(c.exec.close(true)) // left behind by an executor that stopped early
	c.out.close(true)
	c.stopGone()
	if c.endReason() == endExpired {
		c.closeSocket() // ZooKeeper closes the connection, then ends the session
	}
	// Otherwise settle the session first: closing may linger for a slow client (closeSocket).
	c.endSession()
	c.closeSocket()
}

// requestsStand reports whether the requests read still take effect once the reader has
// stopped. In ZooKeeper a request read is a request submitted, whatever ends the connection
// after it: the client closing or resetting it, a frame cut short, a length or a header the
// server refuses, a write that fails, the server draining (Server.Shutdown). They do not when
// the session expired here, or when the connection was shut down: its session ended or moved,
// or the server closed it for its own reasons (shutdown).
func (c *clientConn) requestsStand() bool {
	return !c.isClosing() && c.endReason() != endExpired
}

// finishRequests lets the executor run every request queued, in order, with the connection's
// context, and the writer write their replies, as far as the socket still takes them (a failed
// write drops the rest; the requests still run); then the writer closes the connection.
// Memory stays bounded: the reader has stopped, and the queue holds at most what backpressure
// let it read.
func (c *clientConn) finishRequests() {
	// The executor exits once the queue is empty; it leaves behind only the requests that
	// follow one that closes the connection (Unimplemented, closeSession), which never run.
	c.dropRequests(c.exec.close(true))
	c.send(outFrame{noFrame: true, closeAfter: true})
	c.out.close(true) // the writer writes up to the closing frame and exits
}

// dropRequests uncounts requests that will not run.
func (c *clientConn) dropRequests(rs []*pendingRequest) {
	for _, r := range rs {
		c.dequeued(r)
	}
}

// sessionGone is called (in a goroutine of its own) when the backend reports that this
// connection can no longer serve the session (Session.Done): it ended or moved, which
// ZooKeeper answers by closing the connection, or the backend cannot vouch for it (Err), which
// a ZooKeeper follower that lost its leader answers the same way.
func (c *clientConn) sessionGone() {
	if c.isClosing() {
		return
	}
	if err := c.sess.Err(); errors.Is(err, ErrNotServing) {
		// The session may live on: the client resumes it, here or elsewhere, and it expires
		// at its timeout after this connection last heard the client, as a dropped one does.
		c.log.Warn("cannot vouch for the session any more; closing its connection so that the client resumes it", zap.Error(err))
		c.setEnd(endDropped)
	} else {
		c.log.Info("session ended or moved elsewhere; closing its connection here")
		c.setEnd(endGone)
	}
	c.shutdown()
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
		c.s.sessions.expireOrDefer(c.id, &sessionRecord{sess: c.sess}, c.log)
	case endDropped:
		c.sess.Detach()
		deadline := time.Unix(0, c.lastActivity.Load()).Add(c.timeout)
		c.s.sessions.detach(c, deadline)
		c.log.Debug("session detached", zap.Time("expiresAt", deadline))
	}
}

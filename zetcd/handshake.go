package zetcd

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// handshake runs in the goroutine that accepted the connection: it reads the first frame and
// either answers a four-letter word or opens the session (runSession). It reports whether a
// session is open: the caller then runs the reader, and teardown.
func (c *clientConn) handshake() bool {
	defer c.recoverPanic("connection")
	if !c.armRead(time.Now().Add(handshakeTimeout), false) {
		return false
	}
	// Exactly the first frame, straight from the socket: what a client sends after it (requests
	// pipelined behind the ConnectRequest) stays in the socket for the reader.
	if _, err := io.ReadFull(c.nc, c.rd.first[:4]); err != nil {
		c.logHandshakeError("read connect request", err)
		return false
	}
	n := int32(binary.BigEndian.Uint32(c.rd.first[:4]))
	if cmd, ok := encoding.FourLetterWord(n); ok {
		c.fourLetterWord(cmd)
		return false
	}
	if h := c.s.handoff.Load(); h != nil {
		c.handOff(*h)
		return false
	}
	if n < 0 || int64(n) > int64(c.s.cfg.MaxFrameBytes) {
		c.log.Warn("len error", zap.Error(fmt.Errorf("read connect request: frame length %d outside [0, %d]",
			n, c.s.cfg.MaxFrameBytes)))
		return false
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(c.nc, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.logHandshakeError("read connect request", err)
		return false
	}
	c.countReceived(4 + len(frame))
	c.s.stats.handshakes.Add(1)
	var req encoding.ConnectRequest
	if err := encoding.DecodeRecord(frame, &req); err != nil {
		c.log.Warn("bad connect request; closing the connection", zap.Error(fmt.Errorf("decode connect request: %w", err)))
		return false
	}
	timeout := c.s.negotiateTimeout(req.TimeOut)
	sess := c.connect(&req, timeout)
	if sess == nil {
		return false
	}
	return c.runSession(sess, &req, timeout)
}

func (c *clientConn) logHandshakeError(step string, err error) {
	switch {
	case c.isClosing(), c.isReadStopped(), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// Closed by us, or a client that connected and left (port probes, health checks).
	case clientGone(err):
		c.log.Debug("client left during the handshake", zap.Error(fmt.Errorf("%s: %w", step, err)))
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Info("no connect request in time; closing the connection", zap.Duration("timeout", handshakeTimeout))
	default:
		c.log.Info("handshake failed", zap.Error(fmt.Errorf("%s: %w", step, err)))
	}
}

// clientGone reports whether err, from reading or writing the connection, is the client having
// closed or reset it: ordinary client behaviour (a process exiting, a client giving up), worth a
// debug line at most.
func clientGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// connect opens or resumes the session the client asked for, answering the client itself when
// that fails. It returns nil when the connection is to be closed.
func (c *clientConn) connect(req *encoding.ConnectRequest, timeout time.Duration) Session {
	p := ConnectParams{
		SessionID:    req.SessionID,
		Passwd:       req.Passwd,
		Timeout:      timeout,
		LastZxidSeen: req.LastZxidSeen,
		Events:       c,
		RemoteAddr:   c.nc.RemoteAddr(),
		AuthIDs:      c.transportIDs(),
	}
	if c.s.inReadOnlyMode() {
		return c.connectReadOnly(req, p)
	}
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	sess, err := c.s.backend.Connect(ctx, p)
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
		if req.SessionID != 0 {
			c.s.sessions.heard(req.SessionID, req.Passwd)
		}
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
	buf := encoding.AppendFrame(nil, resp)
	c.countSent(len(buf)) // before the write, as the writer counts frames (writer.go)
	if _, err := c.nc.Write(buf); err != nil {
		level := zap.InfoLevel
		if clientGone(err) {
			level = zap.DebugLevel
		}
		c.log.Log(level, "write connect response failed", zap.Error(fmt.Errorf("write connect response: %w", err)))
		return
	}
	c.graceful.Store(true)
}

// runSession opens the session on this connection: it records it, closes any previous
// connection of the same session, and queues the handshake's answer. It reports whether the
// session was recorded: the caller then reads requests until the connection ends (runReader),
// then tears everything down (teardown), also if the answer was not sent.
func (c *clientConn) runSession(sess Session, req *encoding.ConnectRequest, negotiated time.Duration) bool {
	c.sess = sess
	c.id = sess.ID()
	c.timeout = sess.Timeout()
	if c.timeout <= 0 {
		c.timeout = negotiated
	}
	c.lastActivity.Store(time.Now().UnixNano())
	c.startAuth(c.transportIDs())

	old, ok := c.s.sessions.attach(c)
	if !ok { // server closing
		sess.Detach()
		return false
	}
	c.st.established.Store(time.Now().UnixMilli())
	c.exec.init(c.runExecutor, &requestSlices, nil)
	c.out = newOutQueue(c.budget, c.runWriter)
	c.stopGone = sess.AfterDone(c.sessionGone)

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
			return true // the reader stops at once
		}
	}
	// Written by the writer as its first frame: nothing else is queued before the reader runs.
	c.send(outFrame{connect: &encoding.ConnectResponse{
		ProtocolVersion: 0,
		TimeOut:         int32(c.timeout / time.Millisecond),
		SessionID:       c.id,
		Passwd:          sess.Password(),
		ReadOnly:        c.readOnly,
		HasReadOnly:     req.HasReadOnly,
	}})
	c.log.Debug("session established", zap.Duration("timeout", c.timeout),
		zap.Bool("resumed", req.SessionID != 0), zap.Bool("readOnlyFlag", req.HasReadOnly), zap.Bool("readOnly", c.readOnly))
	return true
}

package zetcd

import (
	"context"
	"net"
	"time"
)

// Handoff serves a client connection in place of the server: migration mode hands every new
// client connection to the session relay (zkrelay). nc's first bytes are the client's first
// frame, unread; ctx ends when the server closes (Close, or Shutdown once it gives up
// draining), and Handoff must then return soon. The server closes nc when Handoff returns.
type Handoff func(ctx context.Context, nc net.Conn)

// SetHandoff makes the server hand every connection accepted from now on to h, once it has told
// a four-letter word apart (those it answers itself); nil serves them here again. Connections
// already handed off stay with h. Safe from any goroutine.
func (s *Server) SetHandoff(h Handoff) {
	if h == nil {
		s.handoff.Store(nil)
		return
	}
	s.handoff.Store(&h)
}

// handOff gives the connection to h, with the first four bytes the handshake read put back in
// front of the rest. The connection then ends as a handshake that opened no session does.
func (c *clientConn) handOff(h Handoff) {
	if !c.armRead(time.Time{}, false) {
		return // closing or draining
	}
	h(c.ctx, &replayConn{Conn: c.nc, prefix: c.rd.first[:4]})
}

// replayConn is a connection whose first bytes were read already: Read returns them first.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

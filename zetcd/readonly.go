package zetcd

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// Read-only mode (Config.ReadOnlyMode), as ZooKeeper's ReadOnlyZooKeeperServer: while the
// backend is cut off from its store, a client whose ConnectRequest sets readOnly gets a session
// local to this process, served from the backend's memory; the others are refused; isro answers
// "ro". Once the store is in reach again the read-only sessions end (their Done), so their
// clients reconnect read-write. docs/operating.md, "Read-only mode".

// readOnlyBackendOf finds the ReadOnlyBackend down b's chain of decorators (Unwrap).
func readOnlyBackendOf(b Backend) ReadOnlyBackend {
	for b != nil {
		if r, ok := b.(ReadOnlyBackend); ok {
			return r
		}
		u, ok := b.(unwrapper)
		if !ok {
			return nil
		}
		b = u.Unwrap()
	}
	return nil
}

// cutOff is a decorator's ReadOnlyBackend.CutOff over the Backend it decorates.
func cutOff(inner Backend) bool {
	r := readOnlyBackendOf(inner)
	return r != nil && r.CutOff()
}

// connectReadOnly is a decorator's ReadOnlyBackend.ConnectReadOnly over the Backend it decorates.
func connectReadOnly(ctx context.Context, inner Backend, p ConnectParams) (Session, error) {
	r := readOnlyBackendOf(inner)
	if r == nil {
		return nil, fmt.Errorf("zetcd: the backend has no read-only sessions: %w", ErrNotServing)
	}
	return r.ConnectReadOnly(ctx, p)
}

// readOnlyStats is a decorator's ReadOnlyBackend.ReadOnlyStats over the Backend it decorates.
func readOnlyStats(inner Backend) BackendStats {
	if r := readOnlyBackendOf(inner); r != nil {
		return r.ReadOnlyStats()
	}
	return BackendStats{}
}

// serverState is ZooKeeper's name for the server's state (srvr's Mode, mntr's server_state):
// "read-only" as ReadOnlyZooKeeperServer.getState, else a standalone server's.
func (s *Server) serverState() string {
	if s.inReadOnlyMode() {
		return "read-only"
	}
	return "standalone"
}

// inReadOnlyMode reports whether the server serves read-only now: read-only mode is on and the
// backend is cut off from its store.
func (s *Server) inReadOnlyMode() bool {
	return s.readOnly != nil && s.readOnly.CutOff()
}

// refusedReadOnly reports the requests ReadOnlyRequestProcessor answers NotReadOnly, before
// their bodies are read: those PrepRequestProcessor makes a transaction of (isUpdate) but
// closeSession, and sync. Pings, closeSession, the watch requests, auth, sasl, whoAmI and the
// reads (multiRead among them) go on.
func refusedReadOnly(op encoding.Op) bool {
	return op == encoding.OpSync || (isUpdate(op) && op != encoding.OpCloseSession)
}

// connectReadOnly opens or resumes a read-only session while the server is in read-only mode,
// answering the client itself when it cannot. It returns nil when the connection is to be
// closed. A client that did not ask for read-only is refused by closing the connection without
// an answer (ZooKeeperServer.processConnectRequest in a ReadOnlyZooKeeperServer), so that it
// tries another server.
func (c *clientConn) connectReadOnly(req *encoding.ConnectRequest, p ConnectParams) Session {
	if !req.ReadOnly {
		c.log.Info("refusing a session of a client that did not ask for read-only: the store is out of reach",
			zap.Stringer("session", req.SessionID))
		c.graceful.Store(true)
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	sess, err := c.s.readOnly.ConnectReadOnly(ctx, p)
	cancel()
	switch {
	case err == nil:
		c.readOnly = true
		return sess
	case errors.Is(err, ErrSessionExpired):
		c.log.Info("read-only session expired or unknown; answering timeout 0", zap.Stringer("session", req.SessionID))
		c.writeHandshake(&encoding.ConnectResponse{Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: req.HasReadOnly})
	case errors.Is(err, ErrZxidAhead):
		c.log.Info("client has seen a newer zxid than the read-only state; closing without answer",
			zap.Stringer("session", req.SessionID), zap.Stringer("lastZxidSeen", req.LastZxidSeen))
		c.graceful.Store(true)
	case errors.Is(err, ErrNotServing):
		c.log.Info("refusing to resume a global session in read-only mode; closing without answer",
			zap.Stringer("session", req.SessionID), zap.Error(err))
		c.graceful.Store(true)
	case errors.Is(err, context.Canceled):
	default:
		c.log.Warn("open read-only session failed; closing the connection",
			zap.Error(fmt.Errorf("session %v: connect read-only: %w", req.SessionID, err)))
	}
	return nil
}

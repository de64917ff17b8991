package zetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
)

// Graceful drain. Sessions live in etcd, so a zetcd that goes away costs its clients only a
// reconnect: Shutdown makes that reconnect clean. It stops accepting, lets each connection
// finish what it has already read (the replies are written, in order, behind any watch events
// they depend on), then closes each connection and detaches its session (never ends it).
// Clients then resume their sessions on another zetcd with their ephemeral nodes intact, and
// re-arm their watches there with setWatches.

// Shutdown drains the server gracefully and then stops it:
//
//  1. Every listener is closed (Serve returns nil) and Ready reports false.
//  2. Every connection stops reading requests. Those already read are executed in order and
//     answered; then the connection is closed and its session detached, not expired. A
//     connection still in its handshake is closed without an answer.
//  3. Once every connection is gone, or ctx ends, whatever remains is stopped as Close does.
//
// Shutdown returns ctx's error if ctx ended before the connections drained. Close may be called
// at any time to stop at once; after Shutdown it returns at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.closeDone
		return nil
	}
	s.draining = true
	lns, conns := s.snapshotLocked()
	s.mu.Unlock()

	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("zetcd: close listener %v: %w", ln.Addr(), err))
		}
	}
	s.log.Info("draining connections")
	start := time.Now()
	for _, c := range conns {
		c.drain()
	}
	// No connection is registered once draining is set (startConn), so connWG only falls.
	drained := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		s.log.Info("connections drained", zap.Duration("took", time.Since(start)))
	case <-ctx.Done():
		s.log.Warn("drain timed out; closing the remaining connections", zap.Duration("after", time.Since(start)))
		errs = append(errs, fmt.Errorf("zetcd: drain: %w", ctx.Err()))
	}
	if err := s.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// drain makes the connection stop reading requests (stopReading); teardown then executes and
// answers what was read, closes the connection and detaches the session (endServerClose). A
// connection still in its handshake just stops. Safe from any goroutine; idempotent.
func (c *clientConn) drain() {
	c.setEnd(endServerClose)
	c.stopReading()
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Ready reports whether the server accepts new connections: some Serve call is accepting, and
// neither Shutdown nor Close has begun (the /readyz probe).
func (s *Server) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && !s.draining && len(s.listeners) > 0
}

// Serving reports whether the server still serves its connections: Close has not been called
// (the /healthz probe; a draining server is still serving what it has read).
func (s *Server) Serving() bool {
	return !s.isClosed()
}

package zetcd_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// TestServerShutdownDrains: Shutdown stops accepting at once, lets the requests a connection
// has already read finish and be answered in order, then closes the connection and detaches
// (never ends) its session.
func TestServerShutdownDrains(t *testing.T) {
	ts := startTestServer(t, testConfig())
	busy := ts.connect(10000)
	idle := ts.connect(10000)
	x1 := busy.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/block/x"})
	x2 := busy.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/after"})
	ts.awaitBlocked(t, 1)     // the first is in the handler,
	ts.awaitOutstanding(t, 1) // and the second read, queued behind it
	if !ts.srv.Ready() {
		t.Fatal("not ready before Shutdown")
	}

	done := make(chan error, 1)
	go func() { done <- ts.srv.Shutdown(context.Background()) }()
	deadline := time.Now().Add(ioTimeout)
	for ts.srv.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("still ready after Shutdown began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitClosed(t, ts.serveDone, ioTimeout, "Serve to return")
	if ts.serveErr != nil {
		t.Errorf("Serve returned %v after Shutdown, want nil", ts.serveErr)
	}
	if nc, err := net.DialTimeout("tcp", ts.addr, ioTimeout); err == nil {
		nc.Close()
		t.Error("a new connection was accepted while draining")
	}
	idle.expectEOF() // nothing read, nothing to answer
	if !ts.srv.Serving() {
		t.Error("not serving while draining")
	}

	close(ts.b.Unblock)
	for _, want := range []encoding.Xid{x1, x2} {
		var cr encoding.CreateResponse
		if h := busy.readReply(&cr); h.Xid != want || h.Err != encoding.ErrOK {
			t.Fatalf("reply %+v, want xid %v OK", h, want)
		}
	}
	busy.expectEOF()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Shutdown did not return")
	}
	for _, c := range []*testClient{busy, idle} {
		s := ts.b.Session(c.sid)
		if s.DetachCalls.Load() == 0 || s.ExpireCalls.Load() != 0 || s.CloseCalls.Load() != 0 {
			t.Errorf("session %v: detach %d expire %d close %d, want detached only", c.sid,
				s.DetachCalls.Load(), s.ExpireCalls.Load(), s.CloseCalls.Load())
		}
	}
	if ts.srv.Serving() {
		t.Error("still serving after Shutdown")
	}
	if err := ts.srv.Close(); err != nil {
		t.Errorf("Close after Shutdown: %v", err)
	}
}

// TestServerShutdownTimeout: a request that does not finish within the drain timeout is cut
// off as Close cuts it off; Shutdown reports the timeout; the session is detached.
func TestServerShutdownTimeout(t *testing.T) {
	ts := startTestServer(t, testConfig())
	c := ts.connect(10000)
	c.send(encoding.OpCreate, &encoding.CreateRequest{Path: "/block/forever"})
	ts.awaitBlocked(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := ts.srv.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v with a 200ms deadline", d)
	}
	c.expectEOF()
	s := ts.b.Session(c.sid)
	if s.DetachCalls.Load() == 0 || s.ExpireCalls.Load() != 0 || s.CloseCalls.Load() != 0 {
		t.Errorf("session: detach %d expire %d close %d, want detached only",
			s.DetachCalls.Load(), s.ExpireCalls.Load(), s.CloseCalls.Load())
	}
}

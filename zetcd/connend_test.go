package zetcd_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd/zetcdtest"
)

// TestConnEndRequestsTakeEffect: the requests a connection has read take effect, in order,
// however the connection ends after them, as in ZooKeeper, where a request read is a request
// submitted. The first request blocks in the backend until the server has seen the end, so
// that the others are still queued then: a teardown, or a failed write, that cancelled the
// connection's context would drop them.
func TestConnEndRequestsTakeEffect(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(c *testClient) // ends the connection after the requests
		// logged is what the server logs on seeing the end.
		logged string
		// answered: the client still reads the replies. Else it resets the connection once the
		// server has seen the end, and the server's writes fail (failWrite).
		answered bool
	}{
		{"eof", halfClose, "client closed the connection", true},
		{"truncatedFrame", func(c *testClient) { c.write([]byte{0, 0, 0, 40, 0, 0}); halfClose(c) },
			"client closed the connection in the middle of a frame", true},
		{"lenError", func(c *testClient) { c.write([]byte{0x7f, 0xff, 0xff, 0xff}) },
			"len error; closing the connection", true},
		{"badHeader", func(c *testClient) { c.write(rawFrame([]byte{0, 0, 0})) },
			"bad request header; closing the connection", true},
		{"reset", reset, "client reset the connection", false},
		{"eofThenReset", halfClose, "client closed the connection", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			core, logs := observer.New(zapcore.DebugLevel)
			cfg.Logger = zap.New(core)
			ts := startTestServer(t, cfg)
			c := ts.connect(10000)
			s := ts.b.Session(c.sid)
			paths := []string{"/block/" + tc.name}
			for i := range 3 {
				paths = append(paths, fmt.Sprintf("/%s/%d", tc.name, i))
			}
			var out []byte
			for i, p := range paths {
				out = encoding.AppendFrame(out, &encoding.RequestHeader{Xid: encoding.Xid(i + 1), Op: encoding.OpCreate}, &encoding.CreateRequest{Path: p})
			}
			c.write(out)
			tc.end(c)
			awaitLogged(t, logs, tc.logged)
			if !tc.answered {
				reset(c)
				failWrite(t, s, logs)
			}
			close(ts.b.Unblock)

			if tc.answered {
				for i := range paths {
					if h := c.readReply(nil); h.Xid != encoding.Xid(i+1) || h.Err != encoding.ErrOK {
						t.Fatalf("reply %+v, want xid %d OK", h, i+1)
					}
				}
				c.expectClosed(true)
			}
			waitClosed(t, s.Detached, ioTimeout, "Detach")
			if s.CloseCalls.Load() != 0 || s.ExpireCalls.Load() != 0 {
				t.Errorf("session ended: close %d expire %d", s.CloseCalls.Load(), s.ExpireCalls.Load())
			}
			check := ts.connect(10000)
			for _, p := range paths {
				if h := check.call(encoding.OpExists, &encoding.ExistsRequest{Path: p}, nil); h.Err != encoding.ErrOK {
					t.Errorf("exists %s after the connection ended: %v", p, h.Err)
				}
			}
		})
	}
}

// failWrite makes the server write to a connection its client has reset, a watch event at a
// time, until a write fails.
func failWrite(t *testing.T, s *zetcdtest.Session, logs *observer.ObservedLogs) {
	t.Helper()
	const failed = "client closed the connection before its reply was written"
	deadline := time.Now().Add(ioTimeout)
	for logs.FilterMessage(failed).Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged within %v", failed, ioTimeout)
		}
		s.Emit(encoding.WatcherEvent{Type: encoding.EventNodeCreated, State: encoding.StateSyncConnected, Path: "/w"}, 1)
		time.Sleep(time.Millisecond)
	}
}

// halfClose closes the client's sending side: the server reads EOF, and can still answer.
func halfClose(c *testClient) {
	if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil {
		c.t.Fatal(err)
	}
}

// reset closes the client's socket with a reset: the server's reads and writes fail.
func reset(c *testClient) {
	tc := c.nc.(*net.TCPConn)
	tc.SetLinger(0)
	tc.Close()
}

// awaitLogged waits until msg has been logged.
func awaitLogged(t *testing.T, logs *observer.ObservedLogs, msg string) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for logs.FilterMessage(msg).Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged within %v", msg, ioTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

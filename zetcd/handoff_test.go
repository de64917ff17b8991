package zetcd_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// TestServerHandoff: a server with a Handoff answers four-letter words itself and hands every
// other connection over with its first bytes unread; without one it serves sessions again; on
// Close it ends the connections it handed off.
func TestServerHandoff(t *testing.T) {
	ts := startTestServer(t, testConfig())
	// The handoff echoes the connection's first frame and waits for the server to close.
	ended := make(chan struct{})
	ts.srv.SetHandoff(func(ctx context.Context, nc net.Conn) {
		frame, err := encoding.ReadFrame(nc, nil, 0)
		if err != nil {
			t.Errorf("handoff: read the first frame: %v", err)
			return
		}
		nc.Write(rawFrame(frame))
		<-ctx.Done()
		close(ended)
	})

	if out := fourLetter(t, ts.addr, "srvr"); !strings.Contains(out, "zetcd-test") {
		t.Fatalf("srvr with a handoff: %q", out)
	}
	handed := ts.dial()
	req := encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true})
	handed.write(req)
	if got := handed.readFrame(); !bytes.Equal(rawFrame(got), req) {
		t.Fatalf("the handoff read %x, the client sent %x", rawFrame(got), req)
	}

	ts.srv.SetHandoff(nil)
	ts.connect(10000).ping()

	ts.srv.Close()
	waitClosed(t, ended, ioTimeout, "the handoff's context ended by Close")
	handed.expectEOF()
}

package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/zetcd"
)

// TestAbruptClientsLogNoErrors: clients that close or reset their connections at any point (in
// the handshake, with requests in flight, while replies are written, while resuming a session)
// are ordinary, and make no error, no stack trace and no warning in zetcd's logs, the embedded
// etcd's or zetcd's etcd client's, wired as cmd/zetcd wires them (embedetcd.Quiet).
func TestAbruptClientsLogNoErrors(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	e, err := embedetcd.Start(embedetcd.Config{Dir: filepath.Join(t.TempDir(), "etcd"), Logger: log.Named("etcd")})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{e.Endpoint},
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: embedetcd.ClientMaxCallSendMsgSize,
		Logger:             embedetcd.Quiet(log.Named("etcd-client")),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b, err := etcdstore.New(ctx, etcdstore.Config{Client: cli, Logger: log.Named("backend")})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.Config
	cfg.Logger = log.Named("server")
	srv := zetcd.NewServer(b, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Close()
			b.Close()
			cli.Close()
			e.Close()
		}
	}
	t.Cleanup(stop)

	addr := ln.Addr().String()
	abruptClients(addr, 150)
	resumeStorm(addr, 100, 3)
	stop()

	for _, ent := range logs.All() {
		switch {
		case ent.Level >= zapcore.ErrorLevel || ent.Stack != "":
			t.Errorf("%s logged %v %q %v", ent.LoggerName, ent.Level, ent.Message, ent.ContextMap())
		case ent.Level == zapcore.WarnLevel && ent.LoggerName == "etcd":
			// etcd's reports of its own slowness ("request stats", "apply request took too
			// long") on a loaded test machine are etcd's health, not the clients'.
			t.Logf("etcd logged %q", ent.Message)
		case ent.Level == zapcore.WarnLevel:
			t.Errorf("%s logged %v %q %v", ent.LoggerName, ent.Level, ent.Message, ent.ContextMap())
		}
	}
}

// rawRequest is one request frame.
func rawRequest(xid int, op encoding.Op, req encoding.Record) []byte {
	hdr := encoding.RequestHeader{Xid: encoding.Xid(xid), Op: op}
	return encoding.AppendFrame(nil, &hdr, req)
}

// resetClose closes c with a TCP reset instead of a FIN (SO_LINGER 0), as a crashing client.
func resetClose(c net.Conn) {
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// abruptClients runs n clients at once, each of which leaves in its own way: in the middle of
// its connect request, right after the handshake, with a write in flight, while 50 replies are
// being written, in the middle of a request frame, or politely with a request unanswered.
// Errors are the point and are ignored.
func abruptClients(addr string, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(20 * time.Second))
			connect := encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
			if i%6 == 0 {
				c.Write(connect[:10])
				resetClose(c)
				return
			}
			c.Write(connect)
			if _, err := encoding.ReadFrame(c, nil, 1<<20); err != nil {
				c.Close()
				return
			}
			switch i % 6 {
			case 1:
			case 2:
				c.Write(rawRequest(1, encoding.OpCreate, &encoding.CreateRequest{Path: fmt.Sprintf("/abrupt%d", i), ACL: itest.RawOpenACL, Flags: 1}))
			case 3:
				var burst []byte
				for x := range 50 {
					burst = append(burst, rawRequest(x+1, encoding.OpGetChildren2, &encoding.GetChildrenRequest{Path: "/"})...)
				}
				c.Write(burst)
				time.Sleep(time.Duration(i%5) * time.Millisecond)
			case 4:
				frame := rawRequest(1, encoding.OpGetData, &encoding.GetDataRequest{Path: "/" + strings.Repeat("z", 100)})
				c.Write(frame[:len(frame)/2])
			case 5:
				c.Write(rawRequest(1, encoding.OpExists, &encoding.ExistsRequest{Path: "/"}))
				c.Close()
				return
			}
			resetClose(c)
		})
	}
	wg.Wait()
}

// resumeStorm opens n sessions, each with an ephemeral node, then rounds times drops every
// connection (half with a reset, each with a request in flight) and has all of them resume at
// once, a third of them resetting right after sending their connect request.
func resumeStorm(addr string, n, rounds int) {
	type session struct {
		id     encoding.SessionID
		passwd []byte
		conn   net.Conn
	}
	ss := make([]session, n)
	handshake := func(s *session) bool {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return false
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 30000, SessionID: s.id, Passwd: s.passwd})); err != nil {
			c.Close()
			return false
		}
		s.conn = c
		return true
	}
	var wg sync.WaitGroup
	for i := range ss {
		wg.Go(func() {
			s := &ss[i]
			s.passwd = make([]byte, 16)
			if !handshake(s) {
				return
			}
			f, err := encoding.ReadFrame(s.conn, nil, 1<<20)
			var resp encoding.ConnectResponse
			if err != nil || encoding.DecodeRecord(f, &resp) != nil {
				s.conn.Close()
				s.conn = nil
				return
			}
			s.id, s.passwd = resp.SessionID, resp.Passwd
			s.conn.Write(rawRequest(1, encoding.OpCreate, &encoding.CreateRequest{Path: fmt.Sprintf("/storm%d", i), ACL: itest.RawOpenACL, Flags: 1}))
			encoding.ReadFrame(s.conn, nil, 1<<20)
		})
	}
	wg.Wait()
	for range rounds {
		for i := range ss {
			s := &ss[i]
			if s.conn == nil {
				continue
			}
			s.conn.Write(rawRequest(2, encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/"}))
			if i%2 == 0 {
				resetClose(s.conn)
			} else {
				s.conn.Close()
			}
			s.conn = nil
		}
		for i := range ss {
			wg.Go(func() {
				s := &ss[i]
				if s.id == 0 || !handshake(s) {
					return
				}
				if i%3 == 0 {
					resetClose(s.conn)
					s.conn = nil
					return
				}
				encoding.ReadFrame(s.conn, nil, 1<<20)
			})
		}
		wg.Wait()
	}
	for _, s := range ss {
		if s.conn != nil {
			resetClose(s.conn)
		}
	}
}

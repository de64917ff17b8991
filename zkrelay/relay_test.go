package zkrelay_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/zkrelay"
)

// startRelay serves a Relay to servers on a loopback listener, until the test's cleanup.
func startRelay(t *testing.T, servers ...string) (*zkrelay.Relay, string) {
	t.Helper()
	r := zkrelay.New(zkrelay.Config{Servers: servers, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.Serve(ctx, nc)
			}()
		}
	}()
	return r, ln.Addr().String()
}

// client is a go-zookeeper session through addrs that counts the sessions it (re)established.
type client struct {
	*zk.Conn
	sessions atomic.Int32
}

func connect(t *testing.T, addrs ...string) *client {
	t.Helper()
	c := &client{}
	conn, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(itest.QuietLogger{}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				c.sessions.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	c.Conn = conn
	c.waitSessions(t, 1)
	return c
}

// waitSessions waits until the client has established its session n times.
func (c *client) waitSessions(t *testing.T, n int32) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("session established %d times", n), func() error {
		if got := c.sessions.Load(); got < n {
			return fmt.Errorf("%d times", got)
		}
		return nil
	})
}

// session returns the relay's record of id.
func session(t *testing.T, r *zkrelay.Relay, id int64) zkrelay.Session {
	t.Helper()
	for _, s := range r.Sessions() {
		if int64(s.ID) == id {
			return s
		}
	}
	t.Fatalf("session 0x%x not recorded; recorded: %+v", id, r.Sessions())
	return zkrelay.Session{}
}

// waitSession waits until the relay's record of id satisfies cond.
func waitSession(t *testing.T, r *zkrelay.Relay, id int64, what string, cond func(zkrelay.Session) error) zkrelay.Session {
	t.Helper()
	var s zkrelay.Session
	testenv.Eventually(t, 10*time.Second, what, func() error {
		s = session(t, r, id)
		return cond(s)
	})
	return s
}

// zkHasSession reports whether ZooKeeper's cons lists a connection of session id.
func zkHasSession(t *testing.T, addr string, id int64) bool {
	t.Helper()
	out, err := zkserver.FourLetterWord(addr, "cons", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(out, fmt.Sprintf("sid=0x%x,", id))
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func mustList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// TestRelaySession: a go-zookeeper client through the relay holds ZooKeeper's own session, its
// requests and watches work, and the relay records the session's watches, ephemerals, last
// zxid and its close.
func TestRelaySession(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	r, addr := startRelay(t, zks.Addr)
	c := connect(t, addr)
	id := c.SessionID()
	if !zkHasSession(t, zks.Addr, id) {
		t.Fatalf("ZooKeeper's cons does not list session 0x%x", id)
	}

	if _, err := c.Create("/a", []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	eph, err := c.Create("/a/e-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Multi(&zk.CreateRequest{Path: "/a/m", Flags: zk.FlagEphemeral, Acl: zk.WorldACL(zk.PermAll)},
		&zk.CreateRequest{Path: "/a/p", Acl: zk.WorldACL(zk.PermAll)}); err != nil {
		t.Fatal(err)
	}
	_, _, dataCh, err := c.GetW("/a")
	if err != nil {
		t.Fatal(err)
	}
	_, _, childCh, err := c.ChildrenW("/a")
	if err != nil {
		t.Fatal(err)
	}
	_, _, existCh, err := c.ExistsW("/b")
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, r, id)
	mustList(t, "data watches", s.Watches.Data, []string{"/a"})
	mustList(t, "child watches", s.Watches.Child, []string{"/a"})
	mustList(t, "exist watches", s.Watches.Exist, []string{"/b"})
	mustList(t, "ephemerals", s.Ephemerals, []string{eph, "/a/m"})
	mustEqual(t, "connected", s.Connected, true)
	mustEqual(t, "timeout", s.Timeout, 10*time.Second)

	st, err := c.Set("/a", []byte("2"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-dataCh; ev.Type != zk.EventNodeDataChanged || ev.Path != "/a" {
		t.Fatalf("data watch fired %+v", ev)
	}
	if _, err := c.Create("/b", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if ev := <-existCh; ev.Type != zk.EventNodeCreated || ev.Path != "/b" {
		t.Fatalf("exist watch fired %+v", ev)
	}
	if err := c.Delete("/a/m", -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-childCh; ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/a" {
		t.Fatalf("child watch fired %+v", ev)
	}
	s = waitSession(t, r, id, "one-shot watches consumed", func(s zkrelay.Session) error {
		if len(s.Watches.Data)+len(s.Watches.Exist)+len(s.Watches.Child) != 0 {
			return fmt.Errorf("watches %+v", s.Watches)
		}
		return nil
	})
	mustList(t, "ephemerals after delete", s.Ephemerals, []string{eph})
	if s.LastZxid < encoding.Zxid(st.Mzxid) {
		t.Fatalf("last zxid 0x%x below the setData's 0x%x", s.LastZxid, st.Mzxid)
	}

	passwd := s.Passwd
	c.Close()
	s = waitSession(t, r, id, "closed", func(s zkrelay.Session) error {
		if !s.Closed || s.Connected {
			return fmt.Errorf("closed %v connected %v", s.Closed, s.Connected)
		}
		return nil
	})
	if s.ClosedAt.IsZero() || !bytes.Equal(s.Passwd, passwd) {
		t.Fatalf("closed session recorded %+v", s)
	}
}

// TestRelayResume: the relayed TCP connections dropped (CloseAll), the client reconnects
// through the relay and resumes the same session, its watch re-armed; the password the relay
// recorded resumes the session directly on ZooKeeper.
func TestRelayResume(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	r, addr := startRelay(t, zks.Addr)
	c := connect(t, addr)
	id := c.SessionID()
	if _, err := c.Create("/e", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := c.GetW("/e")
	if err != nil {
		t.Fatal(err)
	}

	r.CloseAll()
	c.waitSessions(t, 2)
	mustEqual(t, "session id after reconnecting", c.SessionID(), id)
	s := waitSession(t, r, id, "watch re-armed by setWatches", func(s zkrelay.Session) error {
		if !slices.Equal(s.Watches.Data, []string{"/e"}) || !s.Connected {
			return fmt.Errorf("data watches %q connected %v", s.Watches.Data, s.Connected)
		}
		return nil
	})
	mustList(t, "ephemerals", s.Ephemerals, []string{"/e"})
	if _, err := c.Set("/e", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("watch fired %+v", ev)
	}

	// The recorded id and password are ZooKeeper's: they resume the session there directly.
	raw := itest.DialRaw(t, zks.Addr)
	resp, err := raw.Handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: s.ID, Passwd: s.Passwd, LastZxidSeen: s.LastZxid})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "session resumed on ZooKeeper", resp.SessionID, s.ID)
	if resp.TimeOut <= 0 {
		t.Fatalf("ZooKeeper refused the recorded session: %+v", resp)
	}
}

// TestRelayEnsembleFailover: the ZooKeeper server a relayed session is on stops; the client
// reconnects through the relay, which reaches another server of the ensemble, and keeps its
// session and ephemeral.
func TestRelayEnsembleFailover(t *testing.T) {
	ens := zkserver.StartEnsemble(t, 3, zkserver.Options{})
	addrs := make([]string, len(ens))
	for i, s := range ens {
		addrs[i] = s.Addr
	}
	r, addr := startRelay(t, addrs...)
	c := connect(t, addr)
	id := c.SessionID()
	if _, err := c.Create("/e", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	first := session(t, r, id).Server
	for _, s := range ens {
		if s.Addr == first {
			s.Stop()
		}
	}
	c.waitSessions(t, 2)
	mustEqual(t, "session id after failover", c.SessionID(), id)
	s := waitSession(t, r, id, "relayed to another server", func(s zkrelay.Session) error {
		if !s.Connected || s.Server == first {
			return fmt.Errorf("connected %v to %s", s.Connected, s.Server)
		}
		return nil
	})
	st, err := func() (*zk.Stat, error) {
		_, st, err := c.Get("/e")
		return st, err
	}()
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ephemeral owner", st.EphemeralOwner, id)
	if !zkHasSession(t, s.Server, id) {
		t.Fatalf("%s's cons does not list session 0x%x", s.Server, id)
	}
}

// captureProxy forwards connections to target and keeps every byte target sent.
type captureProxy struct {
	ln  net.Listener
	mu  sync.Mutex
	got bytes.Buffer
}

func startCapture(t *testing.T, target string) *captureProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &captureProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(io.MultiWriter(p, c), s); c.Close() }()
		}
	}()
	return p
}

func (p *captureProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got.Write(b)
}

func (p *captureProxy) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.got.Bytes())
}

// TestRelayBytes: the bytes a raw client receives through the relay are the bytes ZooKeeper
// sent, handshake, replies, errors and notifications alike.
func TestRelayBytes(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	capture := startCapture(t, zks.Addr)
	r, addr := startRelay(t, capture.ln.Addr().String())
	var received bytes.Buffer
	raw := itest.ConnectRaw(t, addr)
	raw.R = bufio.NewReader(io.TeeReader(raw.Conn, &received))
	// ConnectRaw read the handshake already: its frame starts what was received.
	received.Write(appendConnectResponse(raw.Session))

	raw.MustCreate("/n", []byte("v"), encoding.ModePersistent)
	raw.Watch("getData", "/n")
	if code := raw.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/n", ACL: itest.RawOpenACL}, nil); code != encoding.ErrNodeExists {
		t.Fatalf("create of an existing node: %v", code)
	}
	raw.SetData("/n", []byte("w"))
	raw.WaitEvents(1)
	if code := raw.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/", Mode: encoding.AddWatchPersistentRecursive}, nil); code != encoding.ErrOK {
		t.Fatalf("addWatch: %v", code)
	}
	if code := raw.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/n", Mode: encoding.AddWatchPersistent}, nil); code != encoding.ErrOK {
		t.Fatalf("addWatch: %v", code)
	}
	raw.Delete("/n")
	raw.WaitEvents(1)
	s := session(t, r, int64(raw.Session.SessionID))
	mustList(t, "recursive watches", s.Watches.PersistentRecursive, []string{"/"})
	mustList(t, "persistent watches", s.Watches.Persistent, []string{"/n"})
	mustList(t, "data watches", s.Watches.Data, nil)
	if code := raw.MustCall(encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: "/n", Type: encoding.WatcherPersistent}, nil); code != encoding.ErrOK {
		t.Fatalf("removeWatches: %v", code)
	}
	mustList(t, "persistent watches removed", session(t, r, int64(raw.Session.SessionID)).Watches.Persistent, nil)
	raw.Close()
	testenv.Eventually(t, 5*time.Second, "every byte ZooKeeper sent received", func() error {
		if got, sent := received.Bytes(), capture.bytes(); !bytes.Equal(got, sent) {
			return fmt.Errorf("client received %d bytes, ZooKeeper sent %d:\n%x\n%x", len(got), len(sent), got, sent)
		}
		return nil
	})
}

func appendConnectResponse(resp encoding.ConnectResponse) []byte {
	return encoding.AppendFrame(nil, &resp)
}

// TestRelayHostile: a garbage first frame, or a length past the limit, closes that connection
// and no other.
func TestRelayHostile(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	r, addr := startRelay(t, zks.Addr)
	c := connect(t, addr)
	for name, first := range map[string][]byte{
		"garbage": append(binary.BigEndian.AppendUint32(nil, 3), 1, 2, 3),
		"huge":    binary.BigEndian.AppendUint32(nil, 1<<30),
	} {
		raw := itest.DialRaw(t, addr)
		if _, err := raw.Conn.Write(first); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw.ExpectClosed(0)
	}
	if _, _, err := c.Get("/"); err != nil {
		t.Fatalf("the other client's session after the hostile ones: %v", err)
	}
	if n := len(r.Sessions()); n != 1 {
		t.Fatalf("%d sessions recorded, want 1", n)
	}

	// CloseAll closes a connection still in its handshake too.
	silent := itest.DialRaw(t, addr)
	testenv.Eventually(t, 5*time.Second, "CloseAll closes a connection that has sent nothing", func() error {
		r.CloseAll()
		silent.Conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := silent.R.ReadByte(); err != io.EOF {
			return fmt.Errorf("read: %v", err)
		}
		return nil
	})
}

// TestZetcdHandoff: a zetcd server handing its connections to the relay answers four-letter
// words itself and relays sessions to ZooKeeper; handing off no more, it serves new sessions
// itself; closing, it closes the connections it handed off.
func TestZetcdHandoff(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	z := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{})
	r := zkrelay.New(zkrelay.Config{Servers: []string{zks.Addr}, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	z.Server.SetHandoff(func(ctx context.Context, nc net.Conn) { r.Serve(ctx, nc) })

	out, err := itest.FourLetter(z.Addr, "srvr")
	if err != nil || !strings.Contains(out, "zetcd") {
		t.Fatalf("srvr through a handing-off zetcd: %q %v", out, err)
	}
	relayed := connect(t, z.Addr)
	if !zkHasSession(t, zks.Addr, relayed.SessionID()) {
		t.Fatalf("the session through zetcd, 0x%x, is not ZooKeeper's", relayed.SessionID())
	}
	session(t, r, relayed.SessionID())
	raw := itest.ConnectRaw(t, z.Addr)

	z.Server.SetHandoff(nil)
	own := connect(t, z.Addr)
	if zkHasSession(t, zks.Addr, own.SessionID()) || len(r.Sessions()) != 2 {
		t.Fatalf("a session opened after SetHandoff(nil) went to ZooKeeper: 0x%x, relayed %d", own.SessionID(), len(r.Sessions()))
	}
	mustEqual(t, "relayed client still served", raw.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{}), encoding.ErrOK)

	z.Stop()
	raw.ExpectClosed(0)
}

// TestRelayPartialFrame: a request whose next frame has only begun to arrive is relayed and
// answered without waiting for the rest of that frame.
func TestRelayPartialFrame(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	_, addr := startRelay(t, zks.Addr)
	raw := itest.ConnectRaw(t, addr)
	first := itest.AppendRequest(nil, 1, encoding.OpExists, &encoding.ExistsRequest{Path: "/"})
	second := itest.AppendRequest(nil, 2, encoding.OpExists, &encoding.ExistsRequest{Path: "/zookeeper"})
	if _, err := raw.Conn.Write(append(first, second[:3]...)); err != nil {
		t.Fatal(err)
	}
	raw.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr, _, err := raw.ReadReply()
	if err != nil || hdr.Xid != 1 || hdr.Err != encoding.ErrOK {
		t.Fatalf("reply to the whole request: %+v %v", hdr, err)
	}
	if _, err := raw.Conn.Write(second[3:]); err != nil {
		t.Fatal(err)
	}
	hdr, _, err = raw.ReadReply()
	if err != nil || hdr.Xid != 2 || hdr.Err != encoding.ErrOK {
		t.Fatalf("reply to the request completed later: %+v %v", hdr, err)
	}
}

// TestRelayRecordsWatches: the watches of multiRead, getChildren2 and exists, removeWatches,
// and setWatches2 on a resumed connection, as the relay records them; a wrong password does not
// make the session expired in the record, its expiry on ZooKeeper does.
func TestRelayRecordsWatches(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	r, addr := startRelay(t, zks.Addr)
	raw := itest.ConnectRawTimeout(t, addr, 4000)
	id := raw.Session.SessionID
	raw.MustCreate("/d", nil, encoding.ModePersistent)
	raw.MustCreate("/d/c", nil, encoding.ModePersistent)
	raw.MustCreate("/d/e", nil, encoding.ModeEphemeral)
	var mr encoding.MultiResponse
	if code := raw.MustCall(encoding.OpMultiRead, &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/d", Watch: true}},
		{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/d/c", Watch: true}},
	}}, &mr); code != encoding.ErrOK {
		t.Fatalf("multiRead: %v", code)
	}
	raw.Watch("getChildren2", "/d")
	raw.Watch("exists", "/d/c")
	s := session(t, r, int64(id))
	mustList(t, "ephemerals", s.Ephemerals, []string{"/d/e"})
	mustList(t, "data watches", s.Watches.Data, []string{"/d", "/d/c"})
	mustList(t, "child watches", s.Watches.Child, []string{"/d", "/d/c"})

	if code := raw.MustCall(encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: "/d", Type: encoding.WatcherAny}, nil); code != encoding.ErrOK {
		t.Fatalf("removeWatches: %v", code)
	}
	s = session(t, r, int64(id))
	mustList(t, "data watches after removeWatches", s.Watches.Data, []string{"/d/c"})
	mustList(t, "child watches after removeWatches", s.Watches.Child, []string{"/d/c"})
	raw.Close()
	waitSession(t, r, int64(id), "disconnected", func(s zkrelay.Session) error {
		if s.Connected || s.DisconnectedAt.IsZero() {
			return fmt.Errorf("connected %v since %v", s.Connected, s.DisconnectedAt)
		}
		return nil
	})

	resumed := itest.DialRaw(t, addr)
	resp, err := resumed.Handshake(encoding.ConnectRequest{TimeOut: 4000, SessionID: id, Passwd: s.Passwd, LastZxidSeen: s.LastZxid})
	if err != nil || resp.SessionID != id {
		t.Fatalf("resume through the relay: %+v %v", resp, err)
	}
	if _, err := resumed.Conn.Write(itest.AppendRequest(nil, encoding.XidSetWatches, encoding.OpSetWatches2, &encoding.SetWatches2{
		RelativeZxid: s.LastZxid, DataWatches: []string{"/d"}, ExistWatches: []string{}, ChildWatches: []string{},
		PersistentWatches: []string{"/d/c"}, PersistentRecursiveWatches: []string{}})); err != nil {
		t.Fatal(err)
	}
	if hdr, _, err := resumed.ReadReply(); err != nil || hdr.Xid != encoding.XidSetWatches || hdr.Err != encoding.ErrOK {
		t.Fatalf("setWatches2: %+v %v", hdr, err)
	}
	s = session(t, r, int64(id))
	mustList(t, "data watches re-armed", s.Watches.Data, []string{"/d"})
	mustList(t, "child watches re-armed", s.Watches.Child, nil)
	mustList(t, "persistent watches re-armed", s.Watches.Persistent, []string{"/d/c"})
	mustEqual(t, "connected", s.Connected, true)

	wrong := itest.DialRaw(t, addr)
	if resp, err := wrong.Handshake(encoding.ConnectRequest{TimeOut: 4000, SessionID: id, Passwd: make([]byte, 16)}); err != nil || resp.TimeOut != 0 {
		t.Fatalf("resume with a wrong password: %+v %v", resp, err)
	}
	mustEqual(t, "expired after a wrong password", session(t, r, int64(id)).Expired, false)

	// Expired on ZooKeeper (its ephemeral gone, seen directly there), the session's
	// resumption through the relay is refused.
	resumed.Close()
	direct := itest.ConnectRaw(t, zks.Addr)
	testenv.Eventually(t, 30*time.Second, "the session expired on ZooKeeper", func() error {
		if direct.Exists("/d/e") {
			return errors.New("its ephemeral is still there")
		}
		return nil
	})
	again := itest.DialRaw(t, addr)
	if resp, err := again.Handshake(encoding.ConnectRequest{TimeOut: 4000, SessionID: id, Passwd: s.Passwd}); err != nil || resp.TimeOut != 0 {
		t.Fatalf("resume of an expired session: %+v %v", resp, err)
	}
	waitSession(t, r, int64(id), "expired", func(s zkrelay.Session) error {
		if !s.Expired || s.ClosedAt.IsZero() || s.Connected {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
}

// TestRelayNoZooKeeper: with no ZooKeeper server answering, the client's connection is closed
// without an answer, as a client sees a ZooKeeper that is down.
func TestRelayNoZooKeeper(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	r, addr := startRelay(t, down, down)
	raw := itest.DialRaw(t, addr)
	if resp, err := raw.Handshake(encoding.ConnectRequest{TimeOut: 10000, HasReadOnly: true}); !errors.Is(err, io.EOF) {
		t.Fatalf("handshake with ZooKeeper down: %+v %v, want EOF", resp, err)
	}
	if n := len(r.Sessions()); n != 0 {
		t.Fatalf("%d sessions recorded", n)
	}
}

// TestRelayTLS: the relay reaches ZooKeeper on its secureClientPort over TLS.
func TestRelayTLS(t *testing.T) {
	pki := itest.NewPKI(t)
	certFile, _, pair := pki.Issue(t, "zookeeper", pkix.Name{CommonName: "zookeeper"})
	key, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	keyStore := filepath.Join(t.TempDir(), "keystore.pem")
	if err := os.WriteFile(keyStore, append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), cert...), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := itest.FreePort(t)
	_, port, _ := net.SplitHostPort(secure)
	zks := zkserver.Start(t, zkserver.Options{
		ConfigLines: []string{"secureClientPort=" + port},
		SystemProps: map[string]string{
			"zookeeper.serverCnxnFactory":       "org.apache.zookeeper.server.NettyServerCnxnFactory",
			"zookeeper.ssl.keyStore.location":   keyStore,
			"zookeeper.ssl.keyStore.type":       "PEM",
			"zookeeper.ssl.trustStore.location": pki.CAFile,
			"zookeeper.ssl.trustStore.type":     "PEM",
			"zookeeper.ssl.clientAuth":          "none",
		},
	})
	r := zkrelay.New(zkrelay.Config{Servers: []string{secure}, TLS: &tls.Config{RootCAs: pki.Pool},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); r.CloseAll() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go r.Serve(context.Background(), nc)
		}
	}()
	c := connect(t, ln.Addr().String())
	if _, err := c.Create("/tls", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	session(t, r, c.SessionID())
	if _, _, err := testenv.Connect(t, zks.Addr).Get("/tls"); err != nil {
		t.Fatalf("the node created through TLS, read on the plain port: %v", err)
	}

	// Without TLS the relay gets no session from the secure port.
	_, plain := startRelay(t, secure)
	raw := itest.DialRaw(t, plain)
	if resp, err := raw.Handshake(encoding.ConnectRequest{TimeOut: 10000}); err == nil {
		t.Fatalf("a plain relay to the secure port: %+v", resp)
	}
}

// TestRelayFourLetterWords: a four-letter word through the relay gets ZooKeeper's answer, and
// sessions go on beside it.
func TestRelayFourLetterWords(t *testing.T) {
	zks := zkserver.Start(t, zkserver.Options{})
	_, addr := startRelay(t, zks.Addr)
	c := connect(t, addr)
	for _, word := range []string{"ruok", "isro", "srvr"} {
		direct, err := zkserver.FourLetterWord(zks.Addr, word, 10*time.Second)
		if err != nil {
			t.Fatalf("%s to ZooKeeper: %v", word, err)
		}
		relayed, err := zkserver.FourLetterWord(addr, word, 10*time.Second)
		if err != nil {
			t.Fatalf("%s through the relay: %v", word, err)
		}
		if word == "srvr" { // counters and latencies move between the two
			direct, _, _ = strings.Cut(direct, "\n")
			relayed, _, _ = strings.Cut(relayed, "\n")
		}
		if relayed != direct || relayed == "" {
			t.Errorf("%s: relayed %q, ZooKeeper answers %q", word, relayed, direct)
		}
	}
	if _, _, err := c.Get("/"); err != nil {
		t.Fatalf("a session beside the four-letter words: %v", err)
	}
}

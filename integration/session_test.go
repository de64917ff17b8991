package integration

import (
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestSessionHandshakeShapes: a 44-byte ConnectRequest (no readOnly byte, go-zookeeper) gets a
// 36-byte response, a 45-byte one (Java, C, kazoo) a 37-byte one; timeouts are clamped to
// [4s, 40s].
func TestSessionHandshakeShapes(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		for _, tc := range []struct {
			hasReadOnly bool
			timeout     int32
			wantTimeout int32
		}{{false, 10000, 10000}, {true, 10000, 10000}, {true, 100, 4000}, {false, 100000, 40000}} {
			c := itest.DialRaw(t, addr)
			resp, err := c.Handshake(encoding.ConnectRequest{TimeOut: tc.timeout, HasReadOnly: tc.hasReadOnly})
			if err != nil {
				t.Fatal(err)
			}
			if resp.HasReadOnly != tc.hasReadOnly {
				t.Errorf("request readOnly byte %v: response has it %v", tc.hasReadOnly, resp.HasReadOnly)
			}
			if resp.TimeOut != tc.wantTimeout || resp.SessionID == 0 || len(resp.Passwd) != 16 || resp.ReadOnly {
				t.Errorf("timeout %d: response %+v, want timeout %d", tc.timeout, resp, tc.wantTimeout)
			}
			c.Close()
		}
	})
}

// TestSessionResume: a session survives its connection and is resumed with its id and
// password; a wrong password or a closed session gets the timeout-0 answer and a close; a
// client claiming a zxid from the future is dropped without an answer.
func TestSessionResume(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		a := itest.ConnectRaw(t, addr)
		var cr encoding.CreateResponse
		if code := a.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/eph", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, &cr); code != 0 {
			t.Fatal(code)
		}
		sess := a.Session
		hdr, err := a.Call(encoding.OpExists, &encoding.ExistsRequest{Path: "/eph"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		lastZxid := hdr.Zxid
		a.Close()

		// Wrong password.
		bad := itest.DialRaw(t, addr)
		resp, err := bad.Handshake(encoding.ConnectRequest{SessionID: sess.SessionID, Passwd: make([]byte, 16), TimeOut: 10000, HasReadOnly: true, LastZxidSeen: lastZxid})
		if err != nil {
			t.Fatal(err)
		}
		if resp.TimeOut != 0 || resp.SessionID != 0 || !slices.Equal(resp.Passwd, make([]byte, 16)) {
			t.Errorf("wrong password: response %+v, want timeout 0, id 0, zero password", resp)
		}
		bad.ExpectClosed(0)

		// Right password: same session, ephemeral still there.
		b := itest.DialRaw(t, addr)
		resp, err = b.Handshake(encoding.ConnectRequest{SessionID: sess.SessionID, Passwd: sess.Passwd, TimeOut: 10000, HasReadOnly: true, LastZxidSeen: lastZxid})
		if err != nil {
			t.Fatal(err)
		}
		if resp.SessionID != sess.SessionID || !slices.Equal(resp.Passwd, sess.Passwd) || resp.TimeOut != 10000 {
			t.Fatalf("resume: %+v, want session %v", resp, sess.SessionID)
		}
		var ex encoding.ExistsResponse
		if code := b.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/eph"}, &ex); code != 0 || ex.Stat.EphemeralOwner != sess.SessionID {
			t.Fatalf("ephemeral after resume: %v %+v", code, ex.Stat)
		}

		// A client that has seen the future is refused without a reply.
		future := itest.DialRaw(t, addr)
		if _, err := future.Handshake(encoding.ConnectRequest{TimeOut: 10000, HasReadOnly: true, LastZxidSeen: lastZxid + 1<<40}); err == nil {
			t.Error("lastZxidSeen ahead of the server: got a ConnectResponse, want the connection closed")
		}

		// closeSession: reply, then close; the ephemeral is gone; the session cannot be resumed.
		hdr, err = b.Call(encoding.OpCloseSession, nil, nil)
		if err != nil || hdr.Err != 0 {
			t.Fatalf("closeSession: %v %v", hdr, err)
		}
		b.ExpectClosed(0)
		c := itest.ConnectRaw(t, addr)
		if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/eph"}, nil); code != encoding.ErrNoNode {
			t.Errorf("ephemeral after closeSession: %v, want NoNode", code)
		}
		expectSessionGone(t, addr, sess, 10000, "resume a closed session")
	})
}

// TestSessionExpiry: a client silent past its timeout loses its session; its ephemerals are
// deleted with ZooKeeper's parent stats.
func TestSessionExpiry(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		watcher := connect(t, addr)
		if _, err := watcher.Create("/svc", nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
		silent := itest.DialRaw(t, addr)
		resp, err := silent.Handshake(encoding.ConnectRequest{TimeOut: 4000, HasReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/svc/a", "/svc/b"} {
			if code := silent.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: p, ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, nil); code != 0 {
				t.Fatal(code)
			}
		}
		start := time.Now()
		// Say nothing: no pings. The server closes the connection when the session expires.
		silent.ExpectClosed(0)
		elapsed := time.Since(start)
		if elapsed < 3*time.Second {
			t.Errorf("connection closed after %v, before the 4s timeout", elapsed)
		}
		if _, st := testenv.WaitChildren(t, watcher, "/svc", 0); st.Cversion != 4 || st.NumChildren != 0 || st.Pzxid <= st.Czxid {
			t.Errorf("parent after expiry: %+v, want cversion 4, 0 children, pzxid moved", st)
		}
		expectSessionGone(t, addr, resp, 4000, "resume an expired session")
	})
}

// TestSessionPingKeepsAlive: pings alone keep a session past its timeout.
func TestSessionPingKeepsAlive(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.DialRaw(t, addr)
		if _, err := c.Handshake(encoding.ConnectRequest{TimeOut: 4000, HasReadOnly: true}); err != nil {
			t.Fatal(err)
		}
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/alive", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, nil); code != 0 {
			t.Fatal(code)
		}
		for i := 0; i < 8; i++ {
			time.Sleep(time.Second)
			c.Send(encoding.OpPing, nil)
			c.Xid-- // pings do not use the xid sequence
			hdr, _, err := c.ReadReply()
			if err != nil {
				t.Fatalf("ping %d: %v", i, err)
			}
			if hdr.Xid != encoding.XidPing || hdr.Err != 0 || hdr.Zxid == 0 {
				t.Fatalf("ping reply %+v", hdr)
			}
		}
		if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/alive"}, nil); code != 0 {
			t.Errorf("ephemeral after 8s of pings: %v", code)
		}
	})
}

// TestProtocolBadInput: unknown opcodes get Unimplemented (at zxid -1) and a close; oversized
// and negative frames get a close; an undecodable body gets MarshallingError; none of it
// disturbs another session.
func TestProtocolBadInput(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		bystander := connect(t, addr)
		if _, err := bystander.Create("/b", []byte("b"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		for _, op := range []encoding.Op{999, encoding.OpNotification, encoding.OpCheck} {
			c := itest.ConnectRaw(t, addr)
			// A zxid seen first: Unimplemented still carries -1, not the newest zxid.
			if code := c.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/b"}, nil); code != encoding.ErrOK {
				t.Fatalf("exists /b: %v", code)
			}
			hdr, err := c.Call(op, &encoding.CheckVersionRequest{Path: "/b", Version: 0}, nil)
			if err != nil {
				t.Fatalf("op %v: %v", op, err)
			}
			if hdr.Err != encoding.ErrUnimplemented || hdr.Zxid != -1 {
				t.Errorf("op %v: %v at zxid %v, want Unimplemented at -1", op, hdr.Err, hdr.Zxid)
			}
			c.ExpectClosed(0)
		}

		// A body that does not decode: a create whose path length runs past the frame.
		c := itest.ConnectRaw(t, addr)
		if hdr := c.SendBody(encoding.OpCreate, binary.BigEndian.AppendUint32(nil, 1000)); hdr.Err != encoding.ErrMarshallingError {
			t.Errorf("undecodable create: %+v, want MarshallingError", hdr)
		}

		for _, length := range []int32{-5, encoding.DefaultMaxFrameBytes + 1} {
			c := itest.ConnectRaw(t, addr)
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(length))
			c.Conn.Write(b[:])
			c.ExpectClosed(0)
		}
		// Before the handshake, too.
		c2 := itest.DialRaw(t, addr)
		c2.Conn.Write([]byte{0x7f, 0xff, 0xff, 0xff})
		c2.ExpectClosed(0)

		data, _, err := bystander.Get("/b")
		if err != nil || string(data) != "b" {
			t.Errorf("bystander session after bad input: %q %v", data, err)
		}
	})
}

// TestProtocolPipelining: requests sent back to back are applied and answered in order.
func TestProtocolPipelining(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		const n = 200
		var xids []encoding.Xid
		xids = append(xids, c.Send(encoding.OpCreate, &encoding.CreateRequest{Path: "/pipe", ACL: itest.RawOpenACL}))
		for i := 0; i < n; i++ {
			xids = append(xids, c.Send(encoding.OpSetData, &encoding.SetDataRequest{Path: "/pipe", Data: []byte{byte(i)}, Version: int32(i)}))
		}
		xids = append(xids, c.Send(encoding.OpGetData, &encoding.GetDataRequest{Path: "/pipe"}))
		var last encoding.Zxid
		for i, want := range xids {
			hdr, body, err := c.ReadReply()
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Xid != want || hdr.Err != 0 {
				t.Fatalf("reply %d: %+v, want xid %d and no error", i, hdr, want)
			}
			if hdr.Zxid < last {
				t.Fatalf("reply %d: zxid %v went back from %v", i, hdr.Zxid, last)
			}
			last = hdr.Zxid
			if i == len(xids)-1 {
				var gd encoding.GetDataResponse
				if err := encoding.DecodeRecord(body, &gd); err != nil {
					t.Fatal(err)
				}
				if gd.Stat.Version != n || gd.Data[0] != byte(n-1) {
					t.Errorf("after %d pipelined sets: version %d data %v", n, gd.Stat.Version, gd.Data)
				}
			}
		}
	})
}

// TestFourLetterWords: ruok and srvr on the client port.
func TestFourLetterWords(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		for _, tc := range []struct{ cmd, want string }{{"ruok", "imok"}, {"srvr", "Mode: standalone"}} {
			c := itest.DialRaw(t, addr)
			c.Conn.Write([]byte(tc.cmd))
			out, err := readAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("%s answered %q, want it to contain %q", tc.cmd, out, tc.want)
			}
		}
	})
}

func readAll(c *itest.RawClient) (string, error) {
	c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.R.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			if itest.IsConnReset(err) || errors.Is(err, io.EOF) {
				return string(out), nil
			}
			return string(out), err
		}
	}
}

package faults

import (
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestSessionMovedWriteInFlight: a session's write that zetcd A has sent to etcd, but etcd has
// not received (a partition between them that keeps the connection up), while the client moves
// the session to zetcd B and reads the node there. ZooKeeper applies a session's requests in the
// order sent: its leader refuses a write from the server a session left (SessionMoved), so an
// earlier write never lands after a later request, such as a lock recipe's look at the children
// once it has lost its connection. zetcd guards each write with the session's ownership: A's
// write, once it reaches etcd, finds the session taken over and is refused, and the node keeps
// what the session read after it moved.
func TestSessionMovedWriteInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs zetcd processes")
	}
	cluster := startEtcd(t)
	p, endpoint := proxyTo(t, cluster.Etcd.Endpoint)
	a := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", endpoint)
	b := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", cluster.Etcd.Endpoint)

	c := itest.ConnectRaw(t, a.Addr)
	if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/x", Data: []byte("0"), ACL: itest.RawOpenACL}, &encoding.CreateResponse{}); code != encoding.ErrOK {
		t.Fatalf("create /x: %v", code)
	}

	p.Freeze()
	c.Send(encoding.OpSetData, &encoding.SetDataRequest{Path: "/x", Data: []byte("first"), Version: -1})
	time.Sleep(300 * time.Millisecond) // A reads it and sends its transaction into the partition

	moved := itest.DialRaw(t, b.Addr)
	resp, err := moved.Handshake(encoding.ConnectRequest{SessionID: c.Session.SessionID, Passwd: c.Session.Passwd,
		TimeOut: c.Session.TimeOut, HasReadOnly: true})
	if err != nil || resp.TimeOut == 0 {
		t.Fatalf("resume session %#x on B: %+v, %v", c.Session.SessionID, resp, err)
	}
	var read encoding.GetDataResponse
	if code := moved.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/x"}, &read); code != encoding.ErrOK || string(read.Data) != "0" {
		t.Fatalf("getData on B: %v %q, want %q", code, read.Data, "0")
	}
	p.Thaw()

	// What became of the first write: refused, or its connection closed. Either way it must
	// not land after the read.
	c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr, _, err := c.ReadReply()
	t.Logf("the first write, on A: %+v, %v", hdr, err)
	time.Sleep(time.Second) // room for A's transaction to commit, if it does
	if code := moved.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/x"}, &encoding.SyncResponse{}); code != encoding.ErrOK {
		t.Fatalf("sync on B: %v", code)
	}
	var got encoding.GetDataResponse
	if code := moved.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/x"}, &got); code != encoding.ErrOK || string(got.Data) != "0" {
		t.Errorf("/x after the session moved: %v %q; want %q: the write sent before the session read /x on B landed after that read", code, got.Data, "0")
	}
}

package integration

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestSessionMovedClosesOldConnection: a session resumed through another zetcd while its old
// connection is still open: the old zetcd closes that connection, as ZooKeeper closes other
// connections bound to a resumed session.
func TestSessionMovedClosesOldConnection(t *testing.T) {
	cluster := startEtcd(t)
	a := startZetcdOn(t, cluster)
	b := startZetcdOn(t, cluster)
	// A long session timeout, so that only the move can close the connection within the test.
	old := itest.ConnectRawTimeout(t, a.Addr, 40000)
	old.Create("/moved", nil, encoding.ModeEphemeral)

	moved := itest.DialRaw(t, b.Addr)
	resp, err := moved.Handshake(encoding.ConnectRequest{SessionID: old.Session.SessionID, Passwd: old.Session.Passwd, TimeOut: 40000, HasReadOnly: true})
	if err != nil || resp.SessionID != old.Session.SessionID {
		t.Fatalf("resume on the second zetcd: %+v %v", resp, err)
	}
	old.ExpectClosedWithin(0, 5*time.Second)
	// The session lives on through b, ephemeral included.
	var ex encoding.ExistsResponse
	if code := moved.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/moved"}, &ex); code != 0 || ex.Stat.EphemeralOwner != resp.SessionID {
		t.Errorf("after the move: exists /moved: %v %+v", code, ex.Stat)
	}
}

// TestSessionExpiredInEtcdClosesConnection: when etcd ends a session behind zetcd's back (its
// lease revoked or expired, e.g. while zetcd was cut off from etcd), zetcd closes the client's
// connection, and the client's resume is answered as expired.
func TestSessionExpiredInEtcdClosesConnection(t *testing.T) {
	cluster := startEtcd(t)
	z := startZetcdOn(t, cluster)
	c := itest.ConnectRawTimeout(t, z.Addr, 40000)
	c.Create("/doomed", nil, encoding.ModeEphemeral)

	cli := cluster.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(c.Session.SessionID)); err != nil {
		t.Fatal(err)
	}
	c.ExpectClosedWithin(0, 5*time.Second)

	expectSessionGone(t, z.Addr, c.Session, 10000, "resume after etcd ended the session")
	other := itest.ConnectRaw(t, z.Addr)
	if code := other.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/doomed"}, nil); code != encoding.ErrNoNode {
		t.Errorf("ephemeral of the ended session: %v, want NoNode", code)
	}
}

// expectSessionGone asks, on a new connection to addr, to resume the session of sess with the
// given timeout, and checks that the answer is the one for a session that has ended (closed or
// expired): a ConnectResponse with timeout 0. what names the case in the error.
func expectSessionGone(t testing.TB, addr string, sess encoding.ConnectResponse, timeoutMs int32, what string) {
	t.Helper()
	c := itest.DialRaw(t, addr)
	resp, err := c.Handshake(encoding.ConnectRequest{SessionID: sess.SessionID, Passwd: sess.Passwd, TimeOut: timeoutMs, HasReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.TimeOut != 0 {
		t.Errorf("%s: %+v, want timeout 0", what, resp)
	}
}

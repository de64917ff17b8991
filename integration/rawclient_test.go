package integration

import (
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

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

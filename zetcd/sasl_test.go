package zetcd_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// fakeSASL is a two-step mechanism: any first token gets "challenge"; "secret" then completes
// as bob with "ok"; "abort" fails as a mechanism ZooKeeper would not answer; anything else
// fails.
type fakeSASL struct {
	step     int
	complete bool
}

type abortErr struct{}

func (abortErr) Error() string    { return "abort" }
func (abortErr) Unanswered() bool { return true }

func (f *fakeSASL) Step(token []byte) ([]byte, error) {
	f.step++
	switch {
	case f.step == 1:
		return []byte("challenge"), nil
	case f.step == 2 && string(token) == "secret":
		f.complete = true
		return []byte("ok"), nil
	case string(token) == "abort":
		return nil, abortErr{}
	}
	return nil, errors.New("bad token")
}

func (f *fakeSASL) Complete() bool          { return f.complete }
func (f *fakeSASL) AuthorizationID() string { return "bob" }

func saslConfig(a zetcd.AuthConfig) zetcd.Config {
	cfg := testConfig()
	a.NewSASLServer = func() zetcd.SASLServer { return &fakeSASL{} }
	cfg.Auth = a
	return cfg
}

// sasl sends one sasl request and returns the reply header and raw body.
func (c *testClient) sasl(token []byte) (encoding.ReplyHeader, []byte) {
	c.t.Helper()
	xid := c.send(encoding.OpSasl, &encoding.GetSASLRequest{Token: token})
	b := c.readFrame()
	var h encoding.ReplyHeader
	if err := encoding.DecodeRecord(b, &h); err != nil {
		c.t.Fatal(err)
	}
	if h.Xid != xid {
		c.t.Fatalf("sasl reply xid %v, want %v", h.Xid, xid)
	}
	return h, b[encoding.ReplyHeaderSize:]
}

func saslToken(t *testing.T, body []byte) string {
	t.Helper()
	var r encoding.SetSASLResponse
	if err := encoding.DecodeRecord(body, &r); err != nil {
		t.Fatal(err)
	}
	return string(r.Token)
}

func (c *testClient) whoAmI() []string {
	c.t.Helper()
	var r encoding.WhoAmIResponse
	if h := c.call(encoding.OpWhoAmI, &encoding.Empty{}, &r); h.Err != 0 {
		c.t.Fatalf("whoAmI: %v", h.Err)
	}
	var out []string
	for _, ci := range r.ClientInfo {
		out = append(out, ci.AuthScheme+":"+ci.User)
	}
	return out
}

var nullToken = []byte{0xff, 0xff, 0xff, 0xff}

// TestSASLExchange: each step's reply has zxid 0 and the mechanism's token; completion gives
// the session sasl:<id>, and super: for the SASL super user.
func TestSASLExchange(t *testing.T) {
	ts := startTestServer(t, saslConfig(zetcd.AuthConfig{SASLSuperUser: "bob"}))
	c := ts.connect(10000)
	c.call(encoding.OpCreate, &encoding.CreateRequest{Path: "/a"}, &encoding.CreateResponse{}) // the connection has seen a zxid
	h, body := c.sasl([]byte{})
	if h.Err != 0 || h.Zxid != 0 || saslToken(t, body) != "challenge" {
		t.Errorf("first step: %+v %q", h, body)
	}
	h, body = c.sasl([]byte("secret"))
	if h.Err != 0 || h.Zxid != 0 || saslToken(t, body) != "ok" {
		t.Errorf("second step: %+v %q", h, body)
	}
	if got := c.whoAmI(); !slices.Equal(got, []string{"sasl:bob", "super:"}) {
		t.Errorf("identities added: %v", got)
	}
	c.ping()
}

// TestSASLFailures: a failed step is AuthFailed with a null token and a close; one the
// mechanism marks unanswered and a null token close without a reply; allowSaslFailedClients
// keeps the connection; with SASL required the code is SessionClosedRequireSaslAuth.
func TestSASLFailures(t *testing.T) {
	ts := startTestServer(t, saslConfig(zetcd.AuthConfig{}))
	c := ts.connect(10000)
	c.sasl([]byte{})
	if h, body := c.sasl([]byte("wrong")); h.Err != encoding.ErrAuthFailed || h.Zxid != 0 || !bytes.Equal(body, nullToken) {
		t.Errorf("failed step: %+v %x", h, body)
	}
	c.expectEOF()
	c = ts.resume(c, 10000) // the session survives
	c.ping()
	if got := c.whoAmI(); len(got) != 0 {
		t.Errorf("identities after a failure: %v", got)
	}

	c = ts.connect(10000)
	c.sasl([]byte{})
	c.send(encoding.OpSasl, &encoding.GetSASLRequest{Token: []byte("abort")})
	c.expectClosedUnanswered()

	c = ts.connect(10000)
	c.send(encoding.OpSasl, &encoding.GetSASLRequest{Token: nil})
	c.expectClosedUnanswered()

	allow := startTestServer(t, saslConfig(zetcd.AuthConfig{AllowSASLFailedClients: true}))
	c = allow.connect(10000)
	c.sasl([]byte{})
	if h, body := c.sasl([]byte("wrong")); h.Err != 0 || !bytes.Equal(body, nullToken) {
		t.Errorf("allowSaslFailedClients: %+v %x", h, body)
	}
	c.ping()

	req := startTestServer(t, saslConfig(zetcd.AuthConfig{EnforceSchemes: []string{"sasl"}}))
	c = req.connect(10000)
	c.sasl([]byte{})
	if h, body := c.sasl([]byte("wrong")); h.Err != encoding.ErrSessionClosedRequireSaslAuth || !bytes.Equal(body, nullToken) {
		t.Errorf("SASL required: %+v %x", h, body)
	}
	c.expectEOF()
}

// TestEnforceAuth: before it holds an enforced scheme, every request of a connection but auth
// and sasl, pings included, is SessionClosedRequireSaslAuth and closes it; pings pipelined
// behind the exchange are answered in order, after it.
func TestEnforceAuth(t *testing.T) {
	ts := startTestServer(t, saslConfig(zetcd.AuthConfig{EnforceSchemes: []string{"sasl", "digest"}}))
	for _, op := range []encoding.Op{encoding.OpPing, encoding.OpExists, encoding.OpCloseSession} {
		c := ts.connect(10000)
		xid := encoding.Xid(1)
		var body encoding.Record = &encoding.ExistsRequest{Path: "/"}
		switch op {
		case encoding.OpPing:
			xid, body = encoding.XidPing, nil
		case encoding.OpCloseSession:
			body = nil
		}
		if body == nil {
			c.writeFrame(&encoding.RequestHeader{Xid: xid, Op: op})
		} else {
			c.writeFrame(&encoding.RequestHeader{Xid: xid, Op: op}, body)
		}
		if h := c.readReply(nil); h.Xid != xid || h.Err != encoding.ErrSessionClosedRequireSaslAuth || h.Zxid != 0 {
			t.Errorf("%v before authenticating: %+v", op, h)
		}
		c.expectEOF()
	}

	c := ts.connect(10000)
	var frames []byte
	frames = encoding.AppendFrame(frames, &encoding.RequestHeader{Xid: 1, Op: encoding.OpSasl}, &encoding.GetSASLRequest{Token: []byte{}})
	frames = encoding.AppendFrame(frames, &encoding.RequestHeader{Xid: 2, Op: encoding.OpSasl}, &encoding.GetSASLRequest{Token: []byte("secret")})
	frames = encoding.AppendFrame(frames, &encoding.RequestHeader{Xid: encoding.XidPing, Op: encoding.OpPing})
	c.write(frames)
	for _, want := range []encoding.Xid{1, 2, encoding.XidPing} {
		if h := c.readReply(nil); h.Xid != want || h.Err != 0 {
			t.Errorf("pipelined: %+v, want xid %v OK", h, want)
		}
	}
	c.ping()

	c = ts.connect(10000)
	if h := c.call(encoding.OpAuth, &encoding.AuthPacket{Scheme: "digest", Auth: []byte("u:p")}, nil); h.Err != 0 {
		t.Fatalf("auth: %+v", h)
	}
	c.ping()
	if h := c.call(encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{}); h.Err == encoding.ErrSessionClosedRequireSaslAuth {
		t.Errorf("exists after digest auth: %+v", h)
	}
}

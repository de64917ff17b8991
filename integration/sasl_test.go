package integration

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// SASL authentication (DIGEST-MD5) and the sasl ACL scheme (PROTOCOL.md §8), against zetcd and
// a ZooKeeper configured alike (JAAS Server section, SASLAuthenticationProvider); xchk cannot
// mirror an exchange and skips. Every expectation here was first observed on ZooKeeper 3.9.6.

var saslUsers = map[string]string{"bob": "bobsecret", "alice": "alicesecret", "super": "adminsecret"}

func saslServers(t *testing.T, o testenv.SASLOptions, f func(t *testing.T, addr string)) {
	if o.Users == nil {
		o.Users = saslUsers
	}
	testenv.ForEachServerWith(t, testenv.ServerOptions{SASL: &o}, f)
}

// saslReply is what the server answered a sasl request: its header and raw body, or that it
// closed the connection without answering.
type saslReply struct {
	hdr    encoding.ReplyHeader
	body   []byte
	closed bool
}

func (r saslReply) String() string {
	if r.closed {
		return "closed without a reply"
	}
	return fmt.Sprintf("{zxid %d %v body %x}", r.hdr.Zxid, r.hdr.Err, r.body)
}

// token is the reply's SetSASLResponse token.
func (r saslReply) token(t testing.TB) []byte {
	t.Helper()
	var resp encoding.SetSASLResponse
	if err := encoding.DecodeRecord(r.body, &resp); err != nil {
		t.Fatalf("decode SetSASLResponse %x: %v", r.body, err)
	}
	return resp.Token
}

// sasl sends one sasl request with token and reads its reply.
func (c *rawClient) sasl(token []byte) saslReply {
	c.t.Helper()
	xid := c.send(encoding.OpSasl, &encoding.GetSASLRequest{Token: token})
	return c.saslReplyTo(xid)
}

func (c *rawClient) saslReplyTo(xid encoding.Xid) saslReply {
	c.t.Helper()
	for {
		hdr, body, err := c.readReply()
		if err != nil {
			return saslReply{closed: true}
		}
		if hdr.Xid == encoding.XidPing || hdr.Xid == encoding.XidNotification {
			continue
		}
		if hdr.Xid != xid {
			c.t.Fatalf("reply xid %d, want %d", hdr.Xid, xid)
		}
		return saslReply{hdr: hdr, body: append([]byte(nil), body...)}
	}
}

// digestClient answers ZooKeeper's DIGEST-MD5 challenge as the JDK's client does.
type digestClient struct {
	user, password string
	cnonce         string
}

func md5hex(b string) string { s := md5.Sum([]byte(b)); return hex.EncodeToString(s[:]) }

// directive returns the value of key in a digest-challenge (no escapes in ZooKeeper's).
func directive(challenge, key string) string {
	for _, part := range strings.Split(challenge, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k == key {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// respond returns the digest-response to challenge and the rspauth the server must answer.
func (d digestClient) respond(challenge string) (response, rspauth string) {
	nonce, realm := directive(challenge, "nonce"), directive(challenge, "realm")
	uri := "zookeeper/zk-sasl-md5"
	s := md5.Sum([]byte(d.user + ":" + realm + ":" + d.password))
	ha1 := md5hex(string(s[:]) + ":" + nonce + ":" + d.cnonce)
	kd := func(method string) string {
		return md5hex(ha1 + ":" + nonce + ":00000001:" + d.cnonce + ":auth:" + md5hex(method+":"+uri))
	}
	response = fmt.Sprintf(`charset=utf-8,username="%s",realm="%s",nonce="%s",nc=00000001,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=auth`,
		d.user, realm, nonce, d.cnonce, uri, kd("AUTHENTICATE"))
	return response, "rspauth=" + kd("")
}

// saslLogin runs a whole DIGEST-MD5 exchange as user and fails the test unless it succeeds.
func (c *rawClient) saslLogin(user, password string) {
	c.t.Helper()
	first := c.sasl([]byte{})
	if first.closed || first.hdr.Err != 0 || first.hdr.Zxid != 0 {
		c.t.Fatalf("first sasl step: %v", first)
	}
	resp, rspauth := digestClient{user: user, password: password, cnonce: "c2FzbGNub25jZQ"}.respond(string(first.token(c.t)))
	second := c.sasl([]byte(resp))
	if second.closed || second.hdr.Err != 0 || second.hdr.Zxid != 0 {
		c.t.Fatalf("sasl as %s: %v", user, second)
	}
	if got := string(second.token(c.t)); got != rspauth {
		c.t.Fatalf("sasl as %s: server answered %q, want %q", user, got, rspauth)
	}
}

// expectSaslFailed checks the answer to a failed SASL step: code, zxid 0 and a null token,
// then the server closes the connection.
func (c *rawClient) expectSaslFailed(r saslReply, code encoding.ErrCode) {
	c.t.Helper()
	if r.closed || r.hdr.Err != code || r.hdr.Zxid != 0 || !bytes.Equal(r.body, []byte{0xff, 0xff, 0xff, 0xff}) {
		c.t.Errorf("failed sasl step: %v, want %v, zxid 0 and a null token", r, code)
	}
	c.expectClosed(0)
}

// TestSaslDigestMD5: the DIGEST-MD5 exchange (challenge, response, rspauth; zxid 0 on every
// reply), the sasl identity in whoAmI and in ACL checks, the auth scheme expanding to it, the
// SASL user named super matching every sasl entry, a token after completion refused, and a
// resumed session authenticating again.
func TestSaslDigestMD5(t *testing.T) {
	saslServers(t, testenv.SASLOptions{}, func(t *testing.T, addr string) {
		c := connectRaw(t, addr)
		c.mustCreate("/z", nil, 0) // the connection has seen a zxid: sasl still answers 0
		first := c.sasl([]byte{})
		ch := string(first.token(t))
		if first.hdr.Err != 0 || first.hdr.Zxid != 0 || !strings.HasPrefix(ch, `realm="zk-sasl-md5",nonce="`) ||
			!strings.HasSuffix(ch, `",charset=utf-8,algorithm=md5-sess`) || len(directive(ch, "nonce")) != 40 {
			t.Fatalf("challenge: %v %q", first, ch)
		}
		resp, rspauth := digestClient{user: "bob", password: "bobsecret", cnonce: "OA6MHXh6VqTrRk"}.respond(ch)
		second := c.sasl([]byte(resp))
		if second.hdr.Err != 0 || second.hdr.Zxid != 0 || string(second.token(t)) != rspauth {
			t.Fatalf("response: %v, want rspauth %q", second, rspauth)
		}
		if got := c.whoAmI(); !slices.Equal(got, []string{"sasl:bob", "ip:127.0.0.1"}) {
			t.Errorf("whoAmI %v", got)
		}
		bob := aclOf(encoding.PermAll, "sasl", "bob")
		c.mustCreateACL("/s", bob, worldACL(encoding.PermRead))
		c.mustCreateACL("/s/auth", aclOf(encoding.PermAll, "auth", ""))
		if acl, code := c.getACL("/s/auth"); code != 0 || !slices.Equal(acl, []encoding.ACL{bob}) {
			t.Errorf("auth ACL: %v %v", acl, code)
		}
		for _, id := range []string{"a@b@c", "a/b/c@R"} {
			if code := c.createACL("/s/bad", aclOf(encoding.PermAll, "sasl", id)); code != encoding.ErrInvalidACL {
				t.Errorf("sasl:%s: %v, want InvalidACL", id, code)
			}
		}
		if code := c.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Data: []byte("bob"), Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("bob setData: %v", code)
		}

		anon := connectRaw(t, addr)
		alice := connectRaw(t, addr)
		alice.saslLogin("alice", "alicesecret")
		for name, o := range map[string]*rawClient{"anonymous": anon, "alice": alice} {
			if code := o.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
				t.Errorf("%s setData: %v, want NoAuth", name, code)
			}
			if code := o.createACL("/s/x", worldACL(encoding.PermAll)); code != encoding.ErrNoAuth {
				t.Errorf("%s create: %v, want NoAuth", name, code)
			}
			if code := o.mustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/s"}, &encoding.GetDataResponse{}); code != 0 {
				t.Errorf("%s getData: %v", name, code)
			}
		}
		// SASLAuthenticationProvider.matches: the SASL principal "super" matches every sasl
		// entry (not other schemes).
		su := connectRaw(t, addr)
		su.saslLogin("super", "adminsecret")
		if code := su.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("sasl:super setData: %v", code)
		}
		c.mustCreateACL("/d", digestACL(encoding.PermAll, "u", "p"))
		if code := su.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/d", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("sasl:super setData on a digest node: %v, want NoAuth", code)
		}

		// Another step after completion fails the exchange.
		c.mustCreate("/e", nil, encoding.ModeEphemeral)
		c.expectSaslFailed(c.sasl([]byte{}), encoding.ErrAuthFailed)
		// The session survives; the resumed connection authenticates again.
		r := dialRaw(t, addr)
		if resp, err := r.handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, HasReadOnly: true}); err != nil || resp.SessionID != c.Session.SessionID {
			t.Fatalf("resume: %+v %v", resp, err)
		}
		if !r.exists("/e") {
			t.Error("the session's ephemeral is gone")
		}
		if code := r.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("resumed, before SASL: %v, want NoAuth", code)
		}
		r.saslLogin("bob", "bobsecret")
		if code := r.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("resumed, after SASL: %v", code)
		}
	})
}

// TestSaslFailures: bad credentials, other mechanisms' tokens and malformed or truncated
// tokens are AuthFailed with zxid 0 and a null token, then the connection closes; a null token,
// a sasl body that does not decode and the JDK's runtime exceptions (maxbuf not a number)
// close it without a reply. The session survives every one.
func TestSaslFailures(t *testing.T) {
	saslServers(t, testenv.SASLOptions{}, func(t *testing.T, addr string) {
		valid := func(ch string) string {
			resp, _ := digestClient{user: "bob", password: "bobsecret", cnonce: "abc"}.respond(ch)
			return resp
		}
		for _, tc := range []struct {
			name     string
			first    []byte
			second   func(challenge string) string // "": no second step
			answered bool
		}{
			{name: "wrong password", second: func(ch string) string {
				r, _ := digestClient{user: "bob", password: "wrong", cnonce: "abc"}.respond(ch)
				return r
			}, answered: true},
			{name: "unknown user", second: func(ch string) string {
				r, _ := digestClient{user: "mallory", password: "x", cnonce: "abc"}.respond(ch)
				return r
			}, answered: true},
			{name: "truncated response", second: func(ch string) string { r := valid(ch); return r[:len(r)/2] }, answered: true},
			{name: "response without its last byte", second: func(ch string) string { r := valid(ch); return r[:len(r)-1] }, answered: true},
			{name: "garbage", second: func(string) string { return "\x00\x01xx" }, answered: true},
			{name: "empty response", second: func(string) string { return "" }, answered: true},
			{name: "qop auth-conf", second: func(ch string) string { return strings.Replace(valid(ch), "qop=auth", "qop=auth-conf", 1) }, answered: true},
			{name: "other nonce", second: func(ch string) string { return strings.Replace(valid(ch), `nonce="`, `nonce="x`, 1) }, answered: true},
			// PLAIN's initial response is ignored, and its answer to the challenge refused.
			{name: "mechanism PLAIN", first: []byte("\x00bob\x00bobsecret"), second: func(string) string { return "\x00bob\x00bobsecret" }, answered: true},
			// A GSSAPI client's first token (an AP-REQ) gets the DIGEST-MD5 challenge too.
			{name: "mechanism GSSAPI", first: []byte{0x60, 0x82, 0x02, 0x1d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02}, second: func(string) string { return "\x60\x30" }, answered: true},
			{name: "too long first token", first: []byte(strings.Repeat("a", 5000)), answered: true},
			{name: "maxbuf not a number", second: func(ch string) string { return strings.Replace(valid(ch), "maxbuf=65536", "maxbuf=big", 1) }},
			{name: "null first token", first: nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := connectRaw(t, addr)
				c.mustCreate("/e", nil, encoding.ModeEphemeral)
				first := tc.first
				if first == nil && tc.name != "null first token" {
					first = []byte{}
				}
				r := c.sasl(first)
				if tc.second != nil {
					if r.closed || r.hdr.Err != 0 {
						t.Fatalf("first step: %v", r)
					}
					r = c.sasl([]byte(tc.second(string(r.token(t)))))
				}
				if tc.answered {
					c.expectSaslFailed(r, encoding.ErrAuthFailed)
				} else if !r.closed {
					t.Errorf("answered %v, want the connection closed without a reply", r)
				}
				s := dialRaw(t, addr)
				if resp, err := s.handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, HasReadOnly: true}); err != nil || resp.SessionID != c.Session.SessionID || !s.exists("/e") {
					t.Errorf("resume after the failure: %+v %v", resp, err)
				}
				s.mustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/e", Version: -1}, nil)
			})
		}
		// A sasl body that does not decode (its token is longer than the frame).
		c := connectRaw(t, addr)
		hdr := encoding.RequestHeader{Xid: 7, Op: encoding.OpSasl}
		frame := encoding.AppendFrame(nil, &hdr, &encoding.GetSASLRequest{Token: []byte("abcdef")})
		frame = frame[:len(frame)-3]
		frame[3] -= 3
		if _, err := c.conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(0)
	})
}

// TestSaslRequired: with sessionRequireClientSASLAuth, every request before SASL (pings and
// closeSession included; a digest identity does not count) is SessionClosedRequireSaslAuth
// with zxid 0 and closes the connection; a failed SASL step is answered with that code too;
// after SASL everything is served.
func TestSaslRequired(t *testing.T) {
	saslServers(t, testenv.SASLOptions{Required: true}, func(t *testing.T, addr string) {
		refused := func(name string, op encoding.Op, xid encoding.Xid, body encoding.Record, digestFirst bool) {
			c := connectRaw(t, addr)
			if digestFirst {
				c.mustAuth("digest", "a:b")
			}
			hdr := encoding.RequestHeader{Xid: xid, Op: op}
			recs := []encoding.Record{&hdr}
			if body != nil {
				recs = append(recs, body)
			}
			if _, err := c.conn.Write(encoding.AppendFrame(nil, recs...)); err != nil {
				t.Fatal(err)
			}
			rh, rb, err := c.readReply()
			if err != nil || rh.Xid != xid || rh.Err != encoding.ErrSessionClosedRequireSaslAuth || rh.Zxid != 0 || len(rb) != 0 {
				t.Errorf("%s before SASL: %+v %x %v, want SessionClosedRequireSaslAuth, zxid 0, no body", name, rh, rb, err)
			}
			c.expectClosed(0)
		}
		refused("ping", encoding.OpPing, encoding.XidPing, nil, false)
		refused("exists", encoding.OpExists, 1, &encoding.ExistsRequest{Path: "/"}, false)
		refused("closeSession", encoding.OpCloseSession, 1, nil, false)
		refused("exists after digest auth", encoding.OpExists, 1, &encoding.ExistsRequest{Path: "/"}, true)

		c := connectRaw(t, addr)
		c.sasl([]byte{})
		c.expectSaslFailed(c.sasl([]byte("username=bob")), encoding.ErrSessionClosedRequireSaslAuth)

		c = connectRaw(t, addr)
		c.saslLogin("bob", "bobsecret")
		c.mustCreate("/ok", nil, 0)
		if _, err := c.conn.Write(encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: encoding.XidPing, Op: encoding.OpPing})); err != nil {
			t.Fatal(err)
		}
		if rh, _, err := c.readReply(); err != nil || rh.Xid != encoding.XidPing || rh.Err != 0 {
			t.Errorf("ping after SASL: %+v %v", rh, err)
		}
		if got := c.whoAmI(); !slices.Equal(got, []string{"sasl:bob", "ip:127.0.0.1"}) {
			t.Errorf("whoAmI %v", got)
		}
	})
}

// TestSaslEnforceSchemes: with enforce.auth.schemes=digest,sasl either identity lets a
// connection through; a failed SASL step is SessionClosedRequireSaslAuth (sasl is enforced).
func TestSaslEnforceSchemes(t *testing.T) {
	saslServers(t, testenv.SASLOptions{EnforceSchemes: []string{"digest", "sasl"}}, func(t *testing.T, addr string) {
		c := connectRaw(t, addr)
		c.mustAuth("digest", "a:b")
		c.mustCreate("/digest", nil, 0)
		s := connectRaw(t, addr)
		s.saslLogin("alice", "alicesecret")
		s.mustCreate("/sasl", nil, 0)
		n := connectRaw(t, addr)
		if code := n.mustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{}); code != encoding.ErrSessionClosedRequireSaslAuth {
			t.Errorf("unauthenticated exists: %v", code)
		}
		n.expectClosed(0)
		f := connectRaw(t, addr)
		f.sasl([]byte{})
		f.expectSaslFailed(f.sasl([]byte("x")), encoding.ErrSessionClosedRequireSaslAuth)
	})
}

// TestSaslAllowFailedClients: with allowSaslFailedClients a failed step is answered with
// err 0 and a null token, and the connection stays, unauthenticated.
func TestSaslAllowFailedClients(t *testing.T) {
	saslServers(t, testenv.SASLOptions{AllowFailedClients: true}, func(t *testing.T, addr string) {
		c := connectRaw(t, addr)
		c.sasl([]byte{})
		r := c.sasl([]byte("username=bob"))
		if r.closed || r.hdr.Err != 0 || r.hdr.Zxid != 0 || !bytes.Equal(r.body, []byte{0xff, 0xff, 0xff, 0xff}) {
			t.Errorf("failed step: %v, want OK, zxid 0, a null token", r)
		}
		c.mustCreate("/still", nil, 0)
		if got := c.whoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1"}) {
			t.Errorf("whoAmI %v", got)
		}
	})
}

// TestSaslSuperUser: zookeeper.superUser gives the principal named by it the super identity.
func TestSaslSuperUser(t *testing.T) {
	saslServers(t, testenv.SASLOptions{SuperUser: "alice"}, func(t *testing.T, addr string) {
		c := connectRaw(t, addr)
		c.mustCreateACL("/d", digestACL(encoding.PermAll, "u", "p"))
		a := connectRaw(t, addr)
		a.saslLogin("alice", "alicesecret")
		if got := a.whoAmI(); !slices.Contains(got, "super:") || !slices.Contains(got, "sasl:alice") {
			t.Errorf("whoAmI %v", got)
		}
		if code := a.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/d", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("super setData: %v", code)
		}
		b := connectRaw(t, addr)
		b.saslLogin("bob", "bobsecret")
		if code := b.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/d", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("bob setData: %v, want NoAuth", code)
		}
	})
}

// TestSaslResumeOnOtherZetcd: a session authenticated by SASL on one zetcd resumes on another
// in front of the same etcd; the new connection authenticates again there and its sasl
// identity works as on the first.
func TestSaslResumeOnOtherZetcd(t *testing.T) {
	cluster := startEtcd(t)
	opts := testenv.ServerOptions{SASL: &testenv.SASLOptions{Users: saslUsers}}.ZetcdOptions()
	a := testenv.StartZetcdOn(t, cluster, opts)
	b := testenv.StartZetcdOn(t, cluster, opts)
	c := connectRaw(t, a.Addr)
	c.saslLogin("bob", "bobsecret")
	c.mustCreateACL("/r", aclOf(encoding.PermAll, "sasl", "bob"))
	c.mustCreate("/r/e", nil, encoding.ModeEphemeral)
	a.Stop()
	r := dialRaw(t, b.Addr)
	if resp, err := r.handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, LastZxidSeen: 0, HasReadOnly: true}); err != nil || resp.SessionID != c.Session.SessionID {
		t.Fatalf("resume on the other zetcd: %+v %v", resp, err)
	}
	if code := r.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/r", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
		t.Errorf("before SASL: %v, want NoAuth", code)
	}
	r.saslLogin("bob", "bobsecret")
	if code := r.mustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/r", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
		t.Errorf("after SASL: %v", code)
	}
	if !r.exists("/r/e") {
		t.Error("the session's ephemeral is gone")
	}
}

package integration

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// SASL authentication (DIGEST-MD5) and the sasl ACL scheme (ZooKeeperSaslServer, SASLAuthenticationProvider), against zetcd and
// a ZooKeeper configured alike (JAAS Server section, SASLAuthenticationProvider); xchk cannot
// mirror an exchange and skips. Every expectation here was first observed on ZooKeeper 3.9.6.

func saslServers(t *testing.T, o testenv.SASLOptions, f func(t *testing.T, addr string)) {
	if o.Users == nil {
		o.Users = itest.SaslUsers
	}
	testenv.ForEachServerWith(t, testenv.ServerOptions{SASL: &o}, f)
}

// TestSaslDigestMD5: the DIGEST-MD5 exchange (challenge, response, rspauth; zxid 0 on every
// reply), the sasl identity in whoAmI and in ACL checks, the auth scheme expanding to it, the
// SASL user named super matching every sasl entry, a token after completion refused, and a
// resumed session authenticating again.
func TestSaslDigestMD5(t *testing.T) {
	saslServers(t, testenv.SASLOptions{}, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/z", nil, 0) // the connection has seen a zxid: sasl still answers 0
		first := c.Sasl([]byte{})
		ch := string(first.Token(t))
		if first.Hdr.Err != 0 || first.Hdr.Zxid != 0 || !strings.HasPrefix(ch, `realm="zk-sasl-md5",nonce="`) ||
			!strings.HasSuffix(ch, `",charset=utf-8,algorithm=md5-sess`) || len(itest.Directive(ch, "nonce")) != 40 {
			t.Fatalf("challenge: %v %q", first, ch)
		}
		resp, rspauth := itest.DigestClient{User: "bob", Password: "bobsecret", Cnonce: "OA6MHXh6VqTrRk"}.Respond(ch)
		second := c.Sasl([]byte(resp))
		if second.Hdr.Err != 0 || second.Hdr.Zxid != 0 || string(second.Token(t)) != rspauth {
			t.Fatalf("response: %v, want rspauth %q", second, rspauth)
		}
		if got := c.WhoAmI(); !slices.Equal(got, []string{"sasl:bob", "ip:127.0.0.1"}) {
			t.Errorf("whoAmI %v", got)
		}
		bob := itest.ACLOf(encoding.PermAll, "sasl", "bob")
		c.MustCreateACL("/s", bob, itest.WorldACL(encoding.PermRead))
		c.MustCreateACL("/s/auth", itest.ACLOf(encoding.PermAll, "auth", ""))
		if acl, code := c.GetACL("/s/auth"); code != 0 || !slices.Equal(acl, []encoding.ACL{bob}) {
			t.Errorf("auth ACL: %v %v", acl, code)
		}
		for _, id := range []string{"a@b@c", "a/b/c@R"} {
			if code := c.CreateACL("/s/bad", itest.ACLOf(encoding.PermAll, "sasl", id)); code != encoding.ErrInvalidACL {
				t.Errorf("sasl:%s: %v, want InvalidACL", id, code)
			}
		}
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Data: []byte("bob"), Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("bob setData: %v", code)
		}

		anon := itest.ConnectRaw(t, addr)
		alice := itest.ConnectRaw(t, addr)
		alice.SaslLogin("alice", "alicesecret")
		for name, o := range map[string]*itest.RawClient{"anonymous": anon, "alice": alice} {
			if code := o.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
				t.Errorf("%s setData: %v, want NoAuth", name, code)
			}
			if code := o.CreateACL("/s/x", itest.WorldACL(encoding.PermAll)); code != encoding.ErrNoAuth {
				t.Errorf("%s create: %v, want NoAuth", name, code)
			}
			if code := o.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/s"}, &encoding.GetDataResponse{}); code != 0 {
				t.Errorf("%s getData: %v", name, code)
			}
		}
		// SASLAuthenticationProvider.matches: the SASL principal "super" matches every sasl
		// entry (not other schemes).
		su := itest.ConnectRaw(t, addr)
		su.SaslLogin("super", "adminsecret")
		if code := su.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("sasl:super setData: %v", code)
		}
		c.MustCreateACL("/d", digestACL(encoding.PermAll, "u", "p"))
		if code := su.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/d", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("sasl:super setData on a digest node: %v, want NoAuth", code)
		}

		// Another step after completion fails the exchange.
		c.MustCreate("/e", nil, encoding.ModeEphemeral)
		c.ExpectSaslFailed(c.Sasl([]byte{}), encoding.ErrAuthFailed)
		// The session survives; the resumed connection authenticates again.
		r := itest.DialRaw(t, addr)
		if resp, err := r.Handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, HasReadOnly: true}); err != nil || resp.SessionID != c.Session.SessionID {
			t.Fatalf("resume: %+v %v", resp, err)
		}
		if !r.Exists("/e") {
			t.Error("the session's ephemeral is gone")
		}
		if code := r.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("resumed, before SASL: %v, want NoAuth", code)
		}
		r.SaslLogin("bob", "bobsecret")
		if code := r.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/s", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
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
			resp, _ := itest.DigestClient{User: "bob", Password: "bobsecret", Cnonce: "abc"}.Respond(ch)
			return resp
		}
		for _, tc := range []struct {
			name     string
			first    []byte
			second   func(challenge string) string // "": no second step
			answered bool
		}{
			{name: "wrong password", second: func(ch string) string {
				r, _ := itest.DigestClient{User: "bob", Password: "wrong", Cnonce: "abc"}.Respond(ch)
				return r
			}, answered: true},
			{name: "unknown user", second: func(ch string) string {
				r, _ := itest.DigestClient{User: "mallory", Password: "x", Cnonce: "abc"}.Respond(ch)
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
				c := itest.ConnectRaw(t, addr)
				c.MustCreate("/e", nil, encoding.ModeEphemeral)
				first := tc.first
				if first == nil && tc.name != "null first token" {
					first = []byte{}
				}
				r := c.Sasl(first)
				if tc.second != nil {
					if r.Closed || r.Hdr.Err != 0 {
						t.Fatalf("first step: %v", r)
					}
					r = c.Sasl([]byte(tc.second(string(r.Token(t)))))
				}
				if tc.answered {
					c.ExpectSaslFailed(r, encoding.ErrAuthFailed)
				} else if !r.Closed {
					t.Errorf("answered %v, want the connection closed without a reply", r)
				}
				s := itest.DialRaw(t, addr)
				if resp, err := s.Handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, HasReadOnly: true}); err != nil || resp.SessionID != c.Session.SessionID || !s.Exists("/e") {
					t.Errorf("resume after the failure: %+v %v", resp, err)
				}
				s.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/e", Version: -1}, nil)
			})
		}
		// A sasl body that does not decode (its token is longer than the frame).
		c := itest.ConnectRaw(t, addr)
		hdr := encoding.RequestHeader{Xid: 7, Op: encoding.OpSasl}
		frame := encoding.AppendFrame(nil, &hdr, &encoding.GetSASLRequest{Token: []byte("abcdef")})
		frame = frame[:len(frame)-3]
		frame[3] -= 3
		if _, err := c.Conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		c.ExpectClosed(0)
	})
}

// TestSaslRequired: with sessionRequireClientSASLAuth, every request before SASL (pings and
// closeSession included; a digest identity does not count) is SessionClosedRequireSaslAuth
// with zxid 0 and closes the connection; a failed SASL step is answered with that code too;
// after SASL everything is served.
func TestSaslRequired(t *testing.T) {
	saslServers(t, testenv.SASLOptions{Required: true}, func(t *testing.T, addr string) {
		refused := func(name string, op encoding.Op, xid encoding.Xid, body encoding.Record, digestFirst bool) {
			c := itest.ConnectRaw(t, addr)
			if digestFirst {
				c.MustAuth("digest", "a:b")
			}
			hdr := encoding.RequestHeader{Xid: xid, Op: op}
			recs := []encoding.Record{&hdr}
			if body != nil {
				recs = append(recs, body)
			}
			if _, err := c.Conn.Write(encoding.AppendFrame(nil, recs...)); err != nil {
				t.Fatal(err)
			}
			rh, rb, err := c.ReadReply()
			if err != nil || rh.Xid != xid || rh.Err != encoding.ErrSessionClosedRequireSaslAuth || rh.Zxid != 0 || len(rb) != 0 {
				t.Errorf("%s before SASL: %+v %x %v, want SessionClosedRequireSaslAuth, zxid 0, no body", name, rh, rb, err)
			}
			c.ExpectClosed(0)
		}
		refused("ping", encoding.OpPing, encoding.XidPing, nil, false)
		refused("exists", encoding.OpExists, 1, &encoding.ExistsRequest{Path: "/"}, false)
		refused("closeSession", encoding.OpCloseSession, 1, nil, false)
		refused("exists after digest auth", encoding.OpExists, 1, &encoding.ExistsRequest{Path: "/"}, true)

		c := itest.ConnectRaw(t, addr)
		c.Sasl([]byte{})
		c.ExpectSaslFailed(c.Sasl([]byte("username=bob")), encoding.ErrSessionClosedRequireSaslAuth)

		c = itest.ConnectRaw(t, addr)
		c.SaslLogin("bob", "bobsecret")
		c.MustCreate("/ok", nil, 0)
		if _, err := c.Conn.Write(encoding.AppendFrame(nil, &encoding.RequestHeader{Xid: encoding.XidPing, Op: encoding.OpPing})); err != nil {
			t.Fatal(err)
		}
		if rh, _, err := c.ReadReply(); err != nil || rh.Xid != encoding.XidPing || rh.Err != 0 {
			t.Errorf("ping after SASL: %+v %v", rh, err)
		}
		if got := c.WhoAmI(); !slices.Equal(got, []string{"sasl:bob", "ip:127.0.0.1"}) {
			t.Errorf("whoAmI %v", got)
		}
	})
}

// TestSaslEnforceSchemes: with enforce.auth.schemes=digest,sasl either identity lets a
// connection through; a failed SASL step is SessionClosedRequireSaslAuth (sasl is enforced).
func TestSaslEnforceSchemes(t *testing.T) {
	saslServers(t, testenv.SASLOptions{EnforceSchemes: []string{"digest", "sasl"}}, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustAuth("digest", "a:b")
		c.MustCreate("/digest", nil, 0)
		s := itest.ConnectRaw(t, addr)
		s.SaslLogin("alice", "alicesecret")
		s.MustCreate("/sasl", nil, 0)
		n := itest.ConnectRaw(t, addr)
		if code := n.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{}); code != encoding.ErrSessionClosedRequireSaslAuth {
			t.Errorf("unauthenticated exists: %v", code)
		}
		n.ExpectClosed(0)
		f := itest.ConnectRaw(t, addr)
		f.Sasl([]byte{})
		f.ExpectSaslFailed(f.Sasl([]byte("x")), encoding.ErrSessionClosedRequireSaslAuth)
	})
}

// TestSaslAllowFailedClients: with allowSaslFailedClients a failed step is answered with
// err 0 and a null token, and the connection stays, unauthenticated.
func TestSaslAllowFailedClients(t *testing.T) {
	saslServers(t, testenv.SASLOptions{AllowFailedClients: true}, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.Sasl([]byte{})
		r := c.Sasl([]byte("username=bob"))
		if r.Closed || r.Hdr.Err != 0 || r.Hdr.Zxid != 0 || !bytes.Equal(r.Body, []byte{0xff, 0xff, 0xff, 0xff}) {
			t.Errorf("failed step: %v, want OK, zxid 0, a null token", r)
		}
		c.MustCreate("/still", nil, 0)
		if got := c.WhoAmI(); !slices.Equal(got, []string{"ip:127.0.0.1"}) {
			t.Errorf("whoAmI %v", got)
		}
	})
}

// TestSaslSuperUser: zookeeper.superUser gives the principal named by it the super identity.
func TestSaslSuperUser(t *testing.T) {
	saslServers(t, testenv.SASLOptions{SuperUser: "alice"}, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreateACL("/d", digestACL(encoding.PermAll, "u", "p"))
		a := itest.ConnectRaw(t, addr)
		a.SaslLogin("alice", "alicesecret")
		if got := a.WhoAmI(); !slices.Contains(got, "super:") || !slices.Contains(got, "sasl:alice") {
			t.Errorf("whoAmI %v", got)
		}
		if code := a.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/d", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
			t.Errorf("super setData: %v", code)
		}
		b := itest.ConnectRaw(t, addr)
		b.SaslLogin("bob", "bobsecret")
		if code := b.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/d", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
			t.Errorf("bob setData: %v, want NoAuth", code)
		}
	})
}

// TestSaslResumeOnOtherZetcd: a session authenticated by SASL on one zetcd resumes on another
// in front of the same etcd; the new connection authenticates again there and its sasl
// identity works as on the first.
func TestSaslResumeOnOtherZetcd(t *testing.T) {
	cluster := startEtcd(t)
	opts := testenv.ServerOptions{SASL: &testenv.SASLOptions{Users: itest.SaslUsers}}.ZetcdOptions()
	a := testenv.StartZetcdOn(t, cluster, opts)
	b := testenv.StartZetcdOn(t, cluster, opts)
	c := itest.ConnectRaw(t, a.Addr)
	c.SaslLogin("bob", "bobsecret")
	c.MustCreateACL("/r", itest.ACLOf(encoding.PermAll, "sasl", "bob"))
	c.MustCreate("/r/e", nil, encoding.ModeEphemeral)
	a.Stop()
	r := itest.DialRaw(t, b.Addr)
	if resp, err := r.Handshake(encoding.ConnectRequest{TimeOut: 10000, SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, LastZxidSeen: 0, HasReadOnly: true}); err != nil || resp.SessionID != c.Session.SessionID {
		t.Fatalf("resume on the other zetcd: %+v %v", resp, err)
	}
	if code := r.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/r", Version: -1}, &encoding.SetDataResponse{}); code != encoding.ErrNoAuth {
		t.Errorf("before SASL: %v, want NoAuth", code)
	}
	r.SaslLogin("bob", "bobsecret")
	if code := r.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/r", Version: -1}, &encoding.SetDataResponse{}); code != 0 {
		t.Errorf("after SASL: %v", code)
	}
	if !r.Exists("/r/e") {
		t.Error("the session's ephemeral is gone")
	}
}

// TestSaslFailedWithRequestsBehind: a client that sends requests right behind a SASL step
// that fails (as the Java client does with its queued packets) still reads the AuthFailed
// answer, and the server runs none of the requests behind it: it stops reading, as
// ZooKeeper's processSasl does with disableRecv, and closes the connection.
func TestSaslFailedWithRequestsBehind(t *testing.T) {
	saslServers(t, testenv.SASLOptions{}, func(t *testing.T, addr string) {
		for _, behind := range []int{1, 64, 2048} {
			t.Run(fmt.Sprintf("%d requests", behind), func(t *testing.T) {
				c := itest.ConnectRaw(t, addr)
				first := c.Sasl([]byte{})
				if first.Closed || first.Hdr.Err != 0 {
					t.Fatalf("first step: %v", first)
				}
				resp, _ := itest.DigestClient{User: "bob", Password: "wrong", Cnonce: "abc"}.Respond(string(first.Token(t)))
				c.Xid++
				saslXid := c.Xid
				frames := itest.AppendRequest(nil, saslXid, encoding.OpSasl, &encoding.GetSASLRequest{Token: []byte(resp)})
				path := fmt.Sprintf("/behind%d", behind)
				for i := 0; i < behind; i++ {
					c.Xid++
					frames = itest.AppendRequest(frames, c.Xid, encoding.OpCreate, &encoding.CreateRequest{Path: fmt.Sprintf("%s-%d", path, i), ACL: []encoding.ACL{itest.WorldACL(encoding.PermAll)}})
				}
				if _, err := c.Conn.Write(frames); err != nil {
					t.Fatalf("write the sasl step and %d requests: %v", behind, err)
				}
				c.ExpectSaslFailed(c.SaslReplyTo(saslXid), encoding.ErrAuthFailed)
				s := itest.ConnectRaw(t, addr)
				if s.Exists(path+"-0") || s.Exists(fmt.Sprintf("%s-%d", path, behind-1)) {
					t.Errorf("a request sent behind the failed sasl step ran")
				}
			})
		}
	})
}

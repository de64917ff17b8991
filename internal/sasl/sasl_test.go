package sasl

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestResponseValueRFC2831: the two worked examples of RFC 2831 §4 (IMAP and ACAP).
func TestResponseValueRFC2831(t *testing.T) {
	for _, tc := range []struct {
		uri, nonce, cnonce, response, rspauth string
	}{
		{"imap/elwood.innosoft.com", "OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk", "d388dad90d4bbd760a152321f2143af7", "ea40f60335c427b5527b84dbabcdfffd"},
		{"acap/elwood.innosoft.com", "OA9BSXrbuRhWay", "OA9BSuZWMSpW8m", "6084c6db3fede7352c551284490fd0fc", "2f0b3d7c3c2e486600ef710726aa2eae"},
	} {
		got := responseValue("AUTHENTICATE", tc.uri, "auth", "chris", "elwood.innosoft.com", "secret", []byte(tc.nonce), []byte(tc.cnonce), nil)
		if string(got) != tc.response {
			t.Errorf("%s: response %s, want %s", tc.uri, got, tc.response)
		}
		got = responseValue("", tc.uri, "auth", "chris", "elwood.innosoft.com", "secret", []byte(tc.nonce), []byte(tc.cnonce), nil)
		if string(got) != tc.rspauth {
			t.Errorf("%s: rspauth %s, want %s", tc.uri, got, tc.rspauth)
		}
	}
}

// client is a DIGEST-MD5 client as the JDK's DigestMD5Client answers ZooKeeper's challenge.
type client struct {
	user, password, cnonce string
	authzid                *string
	extra                  string // appended to the response
}

func h(b []byte) []byte { s := md5.Sum(b); return s[:] }

func (c client) respond(t *testing.T, challenge []byte) []byte {
	t.Helper()
	d, err := parseDirectives(challenge, []string{"realm", "nonce", "qop", "charset", "algorithm", "maxbuf", "cipher"})
	if err != nil {
		t.Fatalf("challenge %q: %v", challenge, err)
	}
	if string(d["realm"]) != Realm || string(d["charset"]) != "utf-8" || string(d["algorithm"]) != "md5-sess" || d["qop"] != nil {
		t.Fatalf("challenge %q", challenge)
	}
	nonce := string(d["nonce"])
	a1 := bytes.Join([][]byte{h(latin1OrUTF8(c.user + ":" + Realm + ":" + c.password)), []byte(nonce), []byte(c.cnonce)}, []byte(":"))
	if c.authzid != nil {
		a1 = append(a1, ":"+*c.authzid...)
	}
	ha1 := hex.EncodeToString(h(a1))
	ha2 := hex.EncodeToString(h([]byte("AUTHENTICATE:" + DigestURI)))
	resp := hex.EncodeToString(h([]byte(ha1 + ":" + nonce + ":00000001:" + c.cnonce + ":auth:" + ha2)))
	out := fmt.Sprintf(`charset=utf-8,username="%s",realm="%s",nonce="%s",nc=00000001,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=auth`,
		quote(c.user), Realm, nonce, c.cnonce, DigestURI, resp)
	if c.authzid != nil {
		out += `,authzid="` + quote(*c.authzid) + `"`
	}
	return []byte(out + c.extra)
}

var testConfig = &Config{Users: map[string]string{"bob": "bobsecret", "super": "adminsecret", "kafka/broker1@EXAMPLE.COM": "k", "zoë": "pässwörd", "名": "пароль"}}

func TestDigestMD5Exchange(t *testing.T) {
	for _, user := range []string{"bob", "zoë", "名"} {
		d := testConfig.NewDigestMD5()
		ch, err := d.Step(nil)
		if err != nil || d.Complete() {
			t.Fatalf("first step: %q %v", ch, err)
		}
		c := client{user: user, password: testConfig.Users[user], cnonce: "OA6MHXh6VqTrRk"}
		rsp, err := d.Step(c.respond(t, ch))
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if !d.Complete() || d.AuthorizationID() != user {
			t.Errorf("%s: complete %v id %q", user, d.Complete(), d.AuthorizationID())
		}
		if !bytes.HasPrefix(rsp, []byte("rspauth=")) || len(rsp) != 8+32 {
			t.Errorf("%s: rspauth %q", user, rsp)
		}
		if _, err := d.Step(nil); err == nil {
			t.Errorf("%s: a token after completion is accepted", user)
		}
	}
}

func TestDigestMD5Nonce(t *testing.T) {
	d := testConfig.NewDigestMD5()
	ch, _ := d.Step([]byte("an initial response is ignored"))
	d2 := testConfig.NewDigestMD5()
	ch2, _ := d2.Step(nil)
	if bytes.Equal(ch, ch2) {
		t.Error("two exchanges got the same nonce")
	}
	n := bytes.TrimSuffix(bytes.TrimPrefix(ch, []byte(`realm="zk-sasl-md5",nonce="`)), []byte(`",charset=utf-8,algorithm=md5-sess`))
	if len(n) != 40 {
		t.Errorf("challenge %q: nonce %q, want 40 base64 characters", ch, n)
	}
}

func TestDigestMD5Failures(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name       string
		c          client
		edit       func(string) string
		unanswered bool
	}{
		{name: "wrong password", c: client{user: "bob", password: "nope"}},
		{name: "unknown user", c: client{user: "alice", password: "x"}},
		{name: "authzid changes the digest", c: client{user: "bob", password: "bobsecret"}, edit: func(s string) string { return s + `,authzid="bob"` }},
		{name: "no realm", edit: func(s string) string { return strings.Replace(s, `realm="zk-sasl-md5",`, "", 1) }},
		{name: "other realm", edit: func(s string) string { return strings.Replace(s, `realm="zk-sasl-md5"`, `realm="x"`, 1) }},
		{name: "no nonce", edit: func(s string) string { return strings.Replace(s, `nonce="`, `xnonce="`, 1) }},
		{name: "other nonce", edit: func(s string) string { return strings.Replace(s, `nonce="`, `nonce="x`, 1) }},
		{name: "no cnonce", edit: func(s string) string { return strings.Replace(s, `cnonce=`, `xcnonce=`, 1) }},
		{name: "no username", edit: func(s string) string { return strings.Replace(s, `username=`, `user=`, 1) }},
		{name: "no response", edit: func(s string) string { return strings.Replace(s, `response=`, `resp=`, 1) }},
		{name: "no digest-uri", edit: func(s string) string { return strings.Replace(s, `digest-uri=`, `uri=`, 1) }},
		{name: "other digest-uri", edit: func(s string) string { return strings.Replace(s, DigestURI, "zookeeper/x", 1) }},
		{name: "qop auth-int", edit: func(s string) string { return strings.Replace(s, `qop=auth`, `qop=auth-int`, 1) }},
		{name: "qop unknown", edit: func(s string) string { return strings.Replace(s, `qop=auth`, `qop=x`, 1) }},
		{name: "charset latin1", edit: func(s string) string { return strings.Replace(s, `charset=utf-8`, `charset=UTF-8`, 1) }},
		{name: "duplicate username", edit: func(s string) string { return s + `,username="bob"` }},
		{name: "unterminated quote", edit: func(s string) string { return s + `,authzid="bob` }},
		{name: "truncated", edit: func(s string) string { return s[:len(s)/2] }},
		{name: "empty", edit: func(string) string { return "" }},
		{name: "garbage", edit: func(string) string { return "\x00\x01\x02" }},
		{name: "too long", edit: func(s string) string { return s + "," + strings.Repeat("x", 4096) + "=1" }},
		{name: "nonce-count 2", edit: func(s string) string { return s + ",nonce-count=2" }},
		{name: "nonce-count not hex", edit: func(s string) string { return s + ",nonce-count=zz" }, unanswered: true},
		{name: "maxbuf not a number", edit: func(s string) string { return strings.Replace(s, "maxbuf=65536", "maxbuf=big", 1) }, unanswered: true},
		{name: "response of the wrong length", c: client{user: "bob", password: "bobsecret", authzid: str("x")}, edit: func(s string) string { return strings.Replace(s, "response=", "response=0", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c.user == "" {
				c = client{user: "bob", password: "bobsecret"}
			}
			c.cnonce = "abc"
			d := testConfig.NewDigestMD5()
			ch, err := d.Step(nil)
			if err != nil {
				t.Fatal(err)
			}
			resp := string(c.respond(t, ch))
			if tc.edit != nil {
				resp = tc.edit(resp)
			}
			_, err = d.Step([]byte(resp))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: %v, want an *Error", resp, err)
			}
			if e.Unanswered() != tc.unanswered {
				t.Errorf("%q: %v: unanswered %v", resp, err, e.Unanswered())
			}
			if d.Complete() {
				t.Error("complete after a failure")
			}
			// The JDK checks the length before the state: a too long token leaves the
			// exchange where it was. Any other failure ends it.
			_, err = d.Step([]byte(c.respond(t, ch)))
			if tc.name == "too long" && err != nil {
				t.Errorf("a response after a too long one: %v", err)
			}
			if tc.name != "too long" && err == nil {
				t.Error("a second response after a failure is accepted")
			}
		})
	}
}

// TestDigestMD5Authzid: the JDK's server puts the authzid into A1; ZooKeeper's callback then
// authorizes the client as its canonical authenticated name, whatever authzid it asked for.
func TestDigestMD5Authzid(t *testing.T) {
	admin := "admin"
	d := testConfig.NewDigestMD5()
	ch, _ := d.Step(nil)
	if _, err := d.Step(client{user: "bob", password: "bobsecret", cnonce: "c", authzid: &admin}.respond(t, ch)); err != nil {
		t.Fatal(err)
	}
	if d.AuthorizationID() != "bob" {
		t.Errorf("id %q, want bob", d.AuthorizationID())
	}
}

func TestDirectives(t *testing.T) {
	keys := []string{"a", "b", "c"}
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  bool
	}{
		{in: `a=1,b="two",c=3`, want: map[string]string{"a": "1", "b": "two", "c": "3"}},
		{in: " \r\n a = 1 , ,, B=\"x\\\"y\\\\\" ,\tc=\"\"", want: map[string]string{"a": "1", "b": `x"y\`, "c": ""}},
		{in: `a=1,zz=2,A=1`, err: true}, // duplicate, case-insensitively
		{in: `a=1,zz=2`, want: map[string]string{"a": "1"}},
		{in: `a`, want: map[string]string{"a": ""}}, // a last key without '=' has the empty value
		{in: `=1`, err: true},
		{in: `a=`, err: true},
		{in: `a b=1`, err: true},
		{in: `a,=1`, err: true},
		{in: `a="x"y`, err: true},
		{in: `a="x`, err: true},
		{in: `a="x\`, err: true},
		{in: ``, want: map[string]string{}},
	} {
		got, err := parseDirectives([]byte(tc.in), keys)
		if (err != nil) != tc.err {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if tc.err {
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
		for k, v := range tc.want {
			if string(got[k]) != v {
				t.Errorf("%q: %s=%q, want %q", tc.in, k, got[k], v)
			}
		}
	}
}

func TestPrincipalMapping(t *testing.T) {
	for _, tc := range []struct {
		m              PrincipalMapping
		authc, authz   string
		want           string
		wantUnanswered bool
	}{
		{authc: "bob", authz: "bob", want: "bob"},
		{authc: "bob", authz: "admin", want: "bob"},
		{authc: "a/b", authz: "a/b", want: "a/b"}, // no realm: not split
		{m: PrincipalMapping{RemoveHost: true}, authc: "a/b", authz: "a/b", want: "a/b"},
		{authc: "bob@EXAMPLE.COM", authz: "bob@EXAMPLE.COM", want: "bob@EXAMPLE.COM"},                                         // no rule: unchanged
		{authc: "bob@EXAMPLE.COM", authz: "x", want: "x"},                                                                     // ... the authzid asked for
		{m: PrincipalMapping{RemoveRealm: true}, authc: "bob@EXAMPLE.COM", authz: "bob@EXAMPLE.COM", want: "bob@EXAMPLE.COM"}, // not the default realm
		{m: PrincipalMapping{DefaultRealm: "EXAMPLE.COM"}, authc: "kafka/h1@EXAMPLE.COM", authz: "x", want: "kafka/h1@EXAMPLE.COM"},
		{m: PrincipalMapping{DefaultRealm: "EXAMPLE.COM", RemoveRealm: true}, authc: "kafka/h1@EXAMPLE.COM", authz: "x", want: "kafka/h1"},
		{m: PrincipalMapping{DefaultRealm: "EXAMPLE.COM", RemoveHost: true}, authc: "kafka/h1@EXAMPLE.COM", authz: "x", want: "kafka@EXAMPLE.COM"},
		{m: PrincipalMapping{DefaultRealm: "EXAMPLE.COM", RemoveHost: true, RemoveRealm: true}, authc: "kafka/h1@EXAMPLE.COM", authz: "x", want: "kafka"},
		{m: PrincipalMapping{RemoveRealm: true}, authc: "bob@", authz: "x", want: "bob"}, // "" is the default realm without krb5.conf
		{authc: "a@b@c", authz: "x", wantUnanswered: true},
		{authc: "a/b/c@R", authz: "x", wantUnanswered: true},
	} {
		got, err := tc.m.authorize(tc.authc, tc.authz)
		if tc.wantUnanswered {
			var e *Error
			if !errors.As(err, &e) || !e.Unanswered() {
				t.Errorf("%+v %q: %q %v, want an unanswered error", tc.m, tc.authc, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v %q as %q: %q %v, want %q", tc.m, tc.authc, tc.authz, got, err, tc.want)
		}
	}
	for _, id := range []string{"bob", "a/b", "a/b@R", "@", "a@", "/@", "a b", ""} {
		if !ValidName(id) {
			t.Errorf("ValidName(%q) false", id)
		}
	}
	for _, id := range []string{"a@b@c", "a/b/c@R", "a@R/x"} {
		if ValidName(id) {
			t.Errorf("ValidName(%q) true", id)
		}
	}
}

func TestJAAS(t *testing.T) {
	j, err := ParseJAAS(`
// ZooKeeper's server side
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="adminsecret" /* the super user */
    user_bob="bob\"secret"
    user_kafka = kafkasecret
    debug=true;
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule Required
    username="bob" password="bobsecret";
};
KafkaServer{org.apache.kafka.common.security.plain.PlainLoginModule required;
  com.example.Other optional a="1";};
`)
	if err != nil {
		t.Fatal(err)
	}
	users, err := j.ServerUsers("Server")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"super": "adminsecret", "bob": `bob"secret`, "kafka": "kafkasecret"}
	if fmt.Sprint(users) != fmt.Sprint(want) {
		t.Errorf("users %v, want %v", users, want)
	}
	if c := j["Client"]; len(c) != 1 || c[0].Flag != "required" || c[0].Options["username"] != "bob" {
		t.Errorf("Client %+v", c)
	}
	if k := j["KafkaServer"]; len(k) != 2 || k[1].Options["a"] != "1" {
		t.Errorf("KafkaServer %+v", k)
	}
	if _, err := j.ServerUsers("Missing"); err == nil {
		t.Error("a missing section is accepted")
	}
	krb, err := ParseJAAS(`Server { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="zookeeper/h@R"; };`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := krb.ServerUsers("Server"); err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Errorf("Krb5LoginModule: %v", err)
	}
	for _, bad := range []string{
		`Server {`,
		`Server { a required x="1" }; `,
		`Server { a sometimes; };`,
		`Server { a required x=; };`,
		`Server { a required x="1; };`,
		`Server { a required; }`,
		`Server { a required; }; Server { b required; };`,
		`/* unterminated`,
		`{ a required; };`,
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

package itest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// SaslUsers are the DIGEST-MD5 users and passwords the SASL tests configure on every server.
var SaslUsers = map[string]string{"bob": "bobsecret", "alice": "alicesecret", "super": "adminsecret"}

// SaslReply is what the server answered a sasl request: its header and raw body, or that it
// closed the connection without answering.
type SaslReply struct {
	Hdr    encoding.ReplyHeader
	Body   []byte
	Closed bool
}

// String describes the reply for a failure message.
func (r SaslReply) String() string {
	if r.Closed {
		return "closed without a reply"
	}
	return fmt.Sprintf("{zxid %d %v body %x}", r.Hdr.Zxid, r.Hdr.Err, r.Body)
}

// Token is the reply's SetSASLResponse token.
func (r SaslReply) Token(t testing.TB) []byte {
	t.Helper()
	var resp encoding.SetSASLResponse
	if err := encoding.DecodeRecord(r.Body, &resp); err != nil {
		t.Fatalf("decode SetSASLResponse %x: %v", r.Body, err)
	}
	return resp.Token
}

// Sasl sends one sasl request with token and reads its reply.
func (c *RawClient) Sasl(token []byte) SaslReply {
	c.T.Helper()
	xid := c.Send(encoding.OpSasl, &encoding.GetSASLRequest{Token: token})
	return c.SaslReplyTo(xid)
}

// SaslReplyTo reads the reply to request xid, past pings and notifications; Closed says the
// connection closed first.
func (c *RawClient) SaslReplyTo(xid encoding.Xid) SaslReply {
	c.T.Helper()
	for {
		hdr, body, err := c.ReadReply()
		if err != nil {
			return SaslReply{Closed: true}
		}
		if hdr.Xid == encoding.XidPing || hdr.Xid == encoding.XidNotification {
			continue
		}
		if hdr.Xid != xid {
			c.T.Fatalf("reply xid %d, want %d", hdr.Xid, xid)
		}
		return SaslReply{Hdr: hdr, Body: append([]byte(nil), body...)}
	}
}

// DigestClient answers ZooKeeper's DIGEST-MD5 challenge as the JDK's client does.
type DigestClient struct {
	User, Password string
	Cnonce         string
}

// MD5Hex is the hexadecimal MD5 digest of b.
func MD5Hex(b string) string { s := md5.Sum([]byte(b)); return hex.EncodeToString(s[:]) }

// Directive returns the value of key in a digest-challenge (no escapes in ZooKeeper's).
func Directive(challenge, key string) string {
	for _, part := range strings.Split(challenge, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k == key {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// Respond returns the digest-response to challenge and the rspauth the server must answer.
func (d DigestClient) Respond(challenge string) (response, rspauth string) {
	nonce, realm := Directive(challenge, "nonce"), Directive(challenge, "realm")
	uri := "zookeeper/zk-sasl-md5"
	s := md5.Sum([]byte(d.User + ":" + realm + ":" + d.Password))
	ha1 := MD5Hex(string(s[:]) + ":" + nonce + ":" + d.Cnonce)
	kd := func(method string) string {
		return MD5Hex(ha1 + ":" + nonce + ":00000001:" + d.Cnonce + ":auth:" + MD5Hex(method+":"+uri))
	}
	response = fmt.Sprintf(`charset=utf-8,username="%s",realm="%s",nonce="%s",nc=00000001,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=auth`,
		d.User, realm, nonce, d.Cnonce, uri, kd("AUTHENTICATE"))
	return response, "rspauth=" + kd("")
}

// SaslLogin runs a whole DIGEST-MD5 exchange as user and fails the test unless it succeeds.
func (c *RawClient) SaslLogin(user, password string) {
	c.T.Helper()
	first := c.Sasl([]byte{})
	if first.Closed || first.Hdr.Err != 0 || first.Hdr.Zxid != 0 {
		c.T.Fatalf("first sasl step: %v", first)
	}
	resp, rspauth := DigestClient{User: user, Password: password, Cnonce: "c2FzbGNub25jZQ"}.Respond(string(first.Token(c.T)))
	second := c.Sasl([]byte(resp))
	if second.Closed || second.Hdr.Err != 0 || second.Hdr.Zxid != 0 {
		c.T.Fatalf("sasl as %s: %v", user, second)
	}
	if got := string(second.Token(c.T)); got != rspauth {
		c.T.Fatalf("sasl as %s: server answered %q, want %q", user, got, rspauth)
	}
}

// ExpectSaslFailed checks the answer to a failed SASL step: code, zxid 0 and a null token,
// then the server closes the connection.
func (c *RawClient) ExpectSaslFailed(r SaslReply, code encoding.ErrCode) {
	c.T.Helper()
	if r.Closed || r.Hdr.Err != code || r.Hdr.Zxid != 0 || !bytes.Equal(r.Body, []byte{0xff, 0xff, 0xff, 0xff}) {
		c.T.Errorf("failed sasl step: %v, want %v, zxid 0 and a null token", r, code)
	}
	c.ExpectClosed(0)
}

package sasl

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ZooKeeper's fixed DIGEST-MD5 parameters (ZooKeeperSaslServer: Sasl.createSaslServer with
// protocol "zookeeper" and server name "zk-sasl-md5", no properties).
const (
	Realm     = "zk-sasl-md5"
	DigestURI = "zookeeper/" + Realm

	// maxResponseBytes is the JDK's MAX_RESPONSE_LENGTH: a longer token fails the exchange.
	maxResponseBytes = 4096
	// rawNonceBytes is the JDK's RAW_NONCE_SIZE; the nonce is their base64 (40 characters).
	rawNonceBytes = 30
)

// Config is what the DIGEST-MD5 server knows: the users and how an authenticated name becomes
// the identity. It is read-only once servers use it.
type Config struct {
	// Users maps each user name to its password: the user_<name>="<password>" options of the
	// JAAS Server section.
	Users map[string]string
	// Principal canonicalises the authenticated name as ZooKeeper's SaslServerCallbackHandler
	// does.
	Principal PrincipalMapping
	// Rand is the nonce source; nil means crypto/rand.
	Rand io.Reader
}

// Error is a failed exchange. ZooKeeper answers most failures (the JDK's SaslException) with
// AuthFailed; a few inputs make the JDK throw a runtime exception instead (a maxbuf or
// nonce-count that is not a number, a name that is no Kerberos name), after which ZooKeeper
// closes the connection without answering. Unanswered reports which.
type Error struct {
	msg        string
	unanswered bool
}

func (e *Error) Error() string { return e.msg }

// Unanswered reports whether ZooKeeper closes the connection without a reply on this error.
func (e *Error) Unanswered() bool { return e.unanswered }

func failf(format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...)}
}

func runtimef(format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...), unanswered: true}
}

// DigestMD5 is the server side of one DIGEST-MD5 exchange (one connection). Not safe for
// concurrent use; the connection's executor drives it.
type DigestMD5 struct {
	cfg      *Config
	step     int // 1: expects the first token; 3: expects the digest-response; 0: done or failed
	nonce    []byte
	complete bool
	authzID  string
}

// NewDigestMD5 starts an exchange.
func (c *Config) NewDigestMD5() *DigestMD5 {
	return &DigestMD5{cfg: c, step: 1}
}

// Complete reports whether the client has authenticated.
func (d *DigestMD5) Complete() bool { return d.complete }

// AuthorizationID is the identity the client authenticated as, once Complete.
func (d *DigestMD5) AuthorizationID() string { return d.authzID }

// Step takes the client's next token and returns the server's answer: the digest-challenge
// for the first token (whatever it holds: subsequent authentication is not supported), then,
// for a valid digest-response, "rspauth=<hex>" and the exchange is complete. Any error ends
// the exchange (every later token is an error too).
func (d *DigestMD5) Step(token []byte) ([]byte, error) {
	if len(token) > maxResponseBytes {
		return nil, failf("DIGEST-MD5: Invalid digest response length. Got:  %d Expected < %d", len(token), maxResponseBytes)
	}
	switch d.step {
	case 1:
		nonce, err := newNonce(d.cfg.Rand)
		if err != nil {
			return nil, fmt.Errorf("DIGEST-MD5: Error generating challenge: %w", err)
		}
		d.nonce = nonce
		d.step = 3
		return []byte(`realm="` + quote(Realm) + `",nonce="` + quote(string(nonce)) + `",charset=utf-8,algorithm=md5-sess`), nil
	case 3:
		d.step = 0
		dirs, err := parseDirectives(token, responseKeys)
		if err != nil {
			return nil, &Error{msg: err.Error()}
		}
		rspauth, authzID, err := d.validate(dirs)
		if err != nil {
			return nil, err
		}
		d.complete, d.authzID = true, authzID
		return rspauth, nil
	}
	return nil, failf("DIGEST-MD5: Server at illegal state")
}

func newNonce(r io.Reader) ([]byte, error) {
	if r == nil {
		r = rand.Reader
	}
	raw := make([]byte, rawNonceBytes)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(raw)), nil
}

// validate checks a digest-response in the JDK's order (DigestMD5Server.validateClientResponse)
// and returns the rspauth answer and the authorization id.
func (d *DigestMD5) validate(dirs directives) ([]byte, string, error) {
	if cs, ok := dirs["charset"]; ok && javaString(cs) != "utf-8" {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Incompatible charset value: %s", cs)
	}
	if mb, ok := dirs["maxbuf"]; ok {
		if _, err := javaParseInt(javaString(mb), 10); err != nil {
			return nil, "", runtimef("DIGEST-MD5: maxbuf %q: %v", mb, err)
		}
	}
	ub, ok := dirs["username"]
	if !ok {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Missing username.")
	}
	username := javaString(ub)
	realm := javaString(dirs["realm"]) // absent: "", which is not the server's realm
	if realm != Realm {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Nonexistent realm: %s", realm)
	}
	nonce, ok := dirs["nonce"]
	if !ok {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Missing nonce.")
	}
	if !bytes.Equal(nonce, d.nonce) {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Mismatched nonce.")
	}
	cnonce, ok := dirs["cnonce"]
	if !ok {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Missing cnonce.")
	}
	if nc, ok := dirs["nonce-count"]; ok {
		n, err := javaParseInt(javaString(nc), 16)
		if err != nil {
			return nil, "", runtimef("DIGEST-MD5: nonce-count %q: %v", nc, err)
		}
		if n != 1 {
			return nil, "", failf("DIGEST-MD5: digest response format violation. Nonce count does not match: %s", nc)
		}
	}
	qop := "auth"
	if q, ok := dirs["qop"]; ok {
		qop = javaString(q)
	}
	switch qop {
	case "auth":
	case "auth-int", "auth-conf":
		return nil, "", failf("DIGEST-MD5: server does not support  qop: %s", qop)
	default:
		return nil, "", failf("DIGEST-MD5: digest response format violation. Invalid QOP: %s", qop)
	}
	uri, ok := dirs["digest-uri"]
	if !ok || !strings.EqualFold(javaString(uri), DigestURI) {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Mismatched URI: %s; expecting: %s", uri, DigestURI)
	}
	digestURI := javaString(uri) // the client's spelling, as the JDK keeps it
	resp, ok := dirs["response"]
	if !ok {
		return nil, "", failf("DIGEST-MD5: digest response format  violation. Missing response.")
	}
	authzBytes, hasAuthz := dirs["authzid"]
	if !hasAuthz {
		authzBytes = nil
	}
	password, ok := d.cfg.Users[username]
	if !ok {
		return nil, "", failf("DIGEST-MD5: cannot acquire password for %s in realm : %s", username, realm)
	}
	want := responseValue("AUTHENTICATE", digestURI, qop, username, realm, password, d.nonce, cnonce, authzBytes)
	if !bytes.Equal(resp, want) {
		return nil, "", failf("DIGEST-MD5: digest response format violation. Mismatched response.")
	}
	authzFromClient := username
	if hasAuthz {
		authzFromClient = javaString(authzBytes)
	}
	id, err := d.cfg.Principal.authorize(username, authzFromClient)
	if err != nil {
		return nil, "", err
	}
	rsp := responseValue("", digestURI, qop, username, realm, password, d.nonce, cnonce, authzBytes)
	return append([]byte("rspauth="), rsp...), id, nil
}

// responseValue is RFC 2831's response-value (§2.1.2.1), lowercase hex:
//
//	HEX( KD( HEX(H(A1)), nonce ":" nc ":" cnonce ":" qop ":" HEX(H(A2)) ) )
//	A1 = H( username ":" realm ":" passwd ) ":" nonce ":" cnonce [ ":" authzid ]
//	A2 = method ":" digest-uri      (qop "auth"; method "AUTHENTICATE", or "" for rspauth)
//
// with nc 00000001, and username, realm and password in ISO 8859-1 when every character fits,
// else UTF-8 (charset=utf-8, §2.1.2.1).
func responseValue(method, digestURI, qop, username, realm, password string, nonce, cnonce, authzid []byte) []byte {
	a2 := md5.Sum([]byte(method + ":" + digestURI))
	var b bytes.Buffer
	b.Write(latin1OrUTF8(username))
	b.WriteByte(':')
	b.Write(latin1OrUTF8(realm))
	b.WriteByte(':')
	b.Write(latin1OrUTF8(password))
	secret := md5.Sum(b.Bytes())

	b.Reset()
	b.Write(secret[:])
	b.WriteByte(':')
	b.Write(nonce)
	b.WriteByte(':')
	b.Write(cnonce)
	if authzid != nil {
		b.WriteByte(':')
		b.Write(authzid)
	}
	a1 := md5.Sum(b.Bytes())

	b.Reset()
	b.WriteString(hex.EncodeToString(a1[:]))
	b.WriteByte(':')
	b.Write(nonce)
	b.WriteString(":00000001:")
	b.Write(cnonce)
	b.WriteString(":" + qop + ":")
	b.WriteString(hex.EncodeToString(a2[:]))
	kd := md5.Sum(b.Bytes())
	return []byte(hex.EncodeToString(kd[:]))
}

// javaString decodes b as Java's new String(b, UTF_8): each invalid byte becomes U+FFFD.
func javaString(b []byte) string { return string([]rune(string(b))) }

// latin1OrUTF8 is the JDK's stringToByte_8859_1 with UTF-8 on: ISO 8859-1 bytes if every
// character is at most U+00FF, else UTF-8.
func latin1OrUTF8(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			return []byte(s)
		}
		out = append(out, byte(r))
	}
	return out
}

// javaParseInt is Java's Integer.parseInt: an optional sign, at least one digit of the radix,
// and a value in int32.
func javaParseInt(s string, radix int) (int32, error) {
	n, err := strconv.ParseInt(s, radix, 32)
	if err != nil {
		return 0, errors.New("not a number")
	}
	return int32(n), nil
}

package sasl

import (
	"errors"
	"fmt"
	"strings"
)

// The digest-response syntax (RFC 2831 §2.1.2), parsed as the JDK's DigestMD5Base.parseDirectives
// parses it: comma-separated key=value pairs, values plain or quoted with backslash escapes,
// linear white space (CR, LF, SP, HT, byte by byte) around separators, empty elements allowed.
// Keys are matched case-insensitively against the ones the server knows; unknown keys are
// ignored, and a known key given twice is an error.

// responseKeys are the directives the server reads from a digest-response, in the JDK's
// spelling: note "nonce-count", not RFC 2831's "nc", so the nc a client sends is ignored and
// the nonce count is always 1 (only initial authentication is supported).
var responseKeys = []string{
	"username", "realm", "nonce", "cnonce", "nonce-count", "qop", "digest-uri",
	"response", "maxbuf", "charset", "cipher", "authzid", "auth-param",
}

// directives holds the value of each key of responseKeys that was present (nil if absent).
type directives map[string][]byte

func isLWS(b byte) bool { return b == '\r' || b == '\n' || b == ' ' || b == '\t' }

func skipLWS(buf []byte, i int) int {
	for i < len(buf) && isLWS(buf[i]) {
		i++
	}
	return i
}

// parseDirectives parses buf. Errors carry the JDK's messages.
func parseDirectives(buf []byte, keys []string) (directives, error) {
	out := directives{}
	var key, value []byte
	gettingKey, quoted, expectSep := true, false, false
	put := func() error {
		k := string(key)
		for _, known := range keys {
			if !strings.EqualFold(k, known) {
				continue
			}
			if _, dup := out[known]; dup {
				return fmt.Errorf("DIGEST-MD5: peer sent more than one %s directive: %s", k, value)
			}
			out[known] = append([]byte{}, value...)
			return nil
		}
		return nil
	}
	i := skipLWS(buf, 0)
	for i < len(buf) {
		b := buf[i]
		switch {
		case gettingKey:
			switch {
			case b == ',':
				if len(key) != 0 {
					return nil, fmt.Errorf("directive key contains a ',': %s", key)
				}
				i = skipLWS(buf, i+1)
			case b == '=':
				if len(key) == 0 {
					return nil, errors.New("empty directive key")
				}
				gettingKey = false
				i = skipLWS(buf, i+1)
				if i >= len(buf) {
					return nil, fmt.Errorf("valueless directive found: %s", key)
				}
				if buf[i] == '"' {
					quoted = true
					i++
				}
			case isLWS(b):
				i = skipLWS(buf, i+1)
				if i >= len(buf) || buf[i] != '=' {
					return nil, fmt.Errorf("'=' expected after key: %s", key)
				}
			default:
				key = append(key, b)
				i++
			}
		case quoted:
			switch b {
			case '\\':
				i++
				if i >= len(buf) {
					return nil, fmt.Errorf("unmatched quote found for directive: %s with value: %s", key, value)
				}
				value = append(value, buf[i])
				i++
			case '"':
				i++
				quoted, expectSep = false, true
			default:
				value = append(value, b)
				i++
			}
		case isLWS(b) || b == ',':
			if err := put(); err != nil {
				return nil, err
			}
			key, value = key[:0], value[:0]
			gettingKey, quoted, expectSep = true, false, false
			i = skipLWS(buf, i+1)
		case expectSep:
			return nil, fmt.Errorf("expecting comma or linear whitespace after quoted string: %q", value)
		default:
			value = append(value, b)
			i++
		}
	}
	if quoted {
		return nil, fmt.Errorf("unmatched quote found for directive: %s with value: %s", key, value)
	}
	if len(key) > 0 {
		if err := put(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// quote writes v as the inside of a quoted-string: '"', '\\', DEL and the control characters
// other than CR, HT and LF are escaped with a backslash.
func quote(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '"' || c == '\\' || c == 127 || (c <= 31 && c != '\r' && c != '\t' && c != '\n') {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

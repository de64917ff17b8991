package encoding

import (
	"unicode/utf16"
	"unicode/utf8"
)

// JavaString returns b as ZooKeeper reads a jute ustring, re-encoded in UTF-8. ZooKeeper decodes
// it with Java's new String(b, UTF_8), which replaces each malformed sequence with U+FFFD, so a
// string that is not valid UTF-8 means what Java made of it: a sync echoes that, an ACL id or a
// digest user keeps it, and two different malformed paths name the same watch. (No node has
// such a name: U+FFFD fails path validation.)
//
// Which bytes one U+FFFD stands for follows Java (JDK 17's String decoder), not Go's range
// loop: a truncated sequence (E2 82, F0 9F 98) is one replacement, and so is a surrogate
// encoded in three bytes (ED A0 80, as a Java client sends each half of a character outside
// the BMP). Valid UTF-8, nearly every string, is returned as it is.
func JavaString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for sp := 0; sp < len(b); {
		var n int
		switch b1 := b[sp]; {
		case b1 < 0x80:
			out, n = append(out, b1), 1
		case b1 >= 0xc2 && b1 <= 0xdf:
			out, n = javaDecode2(out, b[sp:])
		case b1 >= 0xe0 && b1 <= 0xef:
			out, n = javaDecode3(out, b[sp:])
		case b1 >= 0xf0 && b1 <= 0xf7:
			out, n = javaDecode4(out, b[sp:])
		default: // a continuation byte, C0, C1 or F8-FF on its own
			out, n = utf8.AppendRune(out, utf8.RuneError), 1
		}
		sp += n
	}
	return string(out)
}

// isContinuation reports whether c is a UTF-8 continuation byte (10xxxxxx).
func isContinuation(c byte) bool { return c&0xc0 == 0x80 }

// javaDecode2 decodes the two-byte sequence that s begins with (s[0] is C2-DF), appending it
// or U+FFFD to out, and returns how many bytes of s it used. A sequence cut short by the end
// of the input is one replacement for the rest.
func javaDecode2(out, s []byte) ([]byte, int) {
	switch {
	case len(s) < 2:
		return utf8.AppendRune(out, utf8.RuneError), len(s)
	case !isContinuation(s[1]):
		return utf8.AppendRune(out, utf8.RuneError), 1
	}
	return append(out, s[0], s[1]), 2
}

// javaDecode3 is javaDecode2 for a three-byte sequence (s[0] is E0-EF). An overlong form
// (E0 followed by 80-9F) or a missing continuation replaces the bytes before the fault; a
// well-formed surrogate (ED A0-BF xx) is one replacement for all three.
func javaDecode3(out, s []byte) ([]byte, int) {
	repl := func(n int) ([]byte, int) { return utf8.AppendRune(out, utf8.RuneError), n }
	overlong := func(b2 byte) bool { return s[0] == 0xe0 && b2&0xe0 == 0x80 }
	if len(s) < 3 {
		if len(s) == 2 && (overlong(s[1]) || !isContinuation(s[1])) {
			return repl(1)
		}
		return repl(len(s))
	}
	b2, b3 := s[1], s[2]
	switch {
	case overlong(b2) || !isContinuation(b2):
		return repl(1)
	case !isContinuation(b3):
		return repl(2)
	}
	if r := rune(s[0]&0x0f)<<12 | rune(b2&0x3f)<<6 | rune(b3&0x3f); r >= 0xd800 && r <= 0xdfff {
		return repl(3)
	}
	return append(out, s[0], b2, b3), 3
}

// javaDecode4 is javaDecode2 for a four-byte sequence (s[0] is F0-F7). A lead byte past F4,
// a second byte out of its lead's range (F0: 90-BF, F4: 80-8F) or a missing continuation
// replaces the bytes before the fault.
func javaDecode4(out, s []byte) ([]byte, int) {
	repl := func(n int) ([]byte, int) { return utf8.AppendRune(out, utf8.RuneError), n }
	b1 := s[0]
	badSecond := func(b2 byte) bool {
		return b1 == 0xf0 && (b2 < 0x90 || b2 > 0xbf) || b1 == 0xf4 && b2&0xf0 != 0x80 || !isContinuation(b2)
	}
	if len(s) < 4 {
		switch {
		case b1 > 0xf4 || len(s) > 1 && badSecond(s[1]):
			return repl(1)
		case len(s) > 2 && !isContinuation(s[2]):
			return repl(2)
		}
		return repl(len(s))
	}
	b2, b3, b4 := s[1], s[2], s[3]
	r := rune(b1&0x07)<<18 | rune(b2&0x3f)<<12 | rune(b3&0x3f)<<6 | rune(b4&0x3f)
	if isContinuation(b2) && isContinuation(b3) && isContinuation(b4) && r >= 0x10000 && r <= utf8.MaxRune {
		return append(out, b1, b2, b3, b4), 4
	}
	switch {
	case b1 > 0xf4 || badSecond(b2):
		return repl(1)
	case !isContinuation(b3):
		return repl(2)
	}
	return repl(3)
}

// JavaBytes returns s as ZooKeeper's jute writes a Java string (BinaryOutputArchive writes each
// UTF-16 unit on its own): the same bytes, except that a character outside the BMP, four bytes
// in UTF-8, takes six, each of its surrogates in three (CESU-8). s is valid UTF-8 (a decoded
// string is: JavaString).
func JavaBytes(s string) string {
	i := 0
	for i < len(s) && s[i] < 0xf0 {
		i++
	}
	if i == len(s) {
		return s
	}
	out := make([]byte, 0, len(s)+len(s)/2)
	for _, r := range s {
		if r < 0x10000 {
			out = utf8.AppendRune(out, r)
			continue
		}
		hi, lo := utf16.EncodeRune(r)
		out = appendSurrogate(appendSurrogate(out, hi), lo)
	}
	return string(out)
}

// appendSurrogate appends the three-byte form of the UTF-16 surrogate r, which UTF-8 itself
// does not allow (utf8.AppendRune would write U+FFFD).
func appendSurrogate(out []byte, r rune) []byte {
	return append(out, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
}

// JavaRoundTrip is what a client reads of s once ZooKeeper has written it: JavaBytes(s)
// decoded as a ustring, where each surrogate of a character outside the BMP is one U+FFFD; a
// NullString is written and read as null. (xchk compares zetcd's strings with ZooKeeper's
// through it.)
func JavaRoundTrip(s string) string {
	if s == NullString {
		return s
	}
	return JavaString([]byte(JavaBytes(s)))
}

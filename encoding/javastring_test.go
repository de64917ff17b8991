package encoding

import (
	"bytes"
	"encoding/hex"
	"testing"
	"unicode/utf8"
)

// TestJavaString: what JDK 17's new String(b, UTF_8).getBytes(UTF_8) gives for each input
// (taken from Java; a comparison of 200,000 random short inputs found no difference).
func TestJavaString(t *testing.T) {
	const r = "efbfbd" // U+FFFD
	for _, c := range []struct{ in, want string }{
		{"2f722f63", "2f722f63"},          // valid: as it is
		{"f09f9880", "f09f9880"},          // valid outside the BMP
		{"61ff62", "61" + r + "62"},       // a byte that starts nothing
		{"e282", r},                       // cut short at the end: one replacement
		{"e28241", r + "41"},              // cut short before another character
		{"eda080", r},                     // a surrogate in three bytes: one
		{"eda0bdedb880", r + r},           // a pair of them (a Java client's U+1F600)
		{"f09f98", r},                     // four bytes cut short at the end
		{"f09f9841", r + "41"},            // four bytes cut short before another
		{"c0af", r + r},                   // an overlong two-byte form: two
		{"e080af", r + r + r},             // an overlong three-byte form: three
		{"f4908080", r + r + r + r},       // past U+10FFFF
		{"f880808080", r + r + r + r + r}, // five-byte forms do not exist
		{"80bf", r + r},                   // lone continuation bytes
		{"ffff", r + r},                   //
		{"c3", r},                         //
	} {
		in, _ := hex.DecodeString(c.in)
		want, _ := hex.DecodeString(c.want)
		if got := JavaString(in); got != string(want) {
			t.Errorf("JavaString(%s) = %x, want %s", c.in, got, c.want)
		}
	}
}

// TestDecoderStringJava: a decoded ustring is valid UTF-8 whatever its bytes, and the
// replacement reaches strings inside records.
func TestDecoderStringJava(t *testing.T) {
	enc := AppendRecord(nil, &GetDataRequest{Path: "/a\xffb"})
	var req GetDataRequest
	if err := DecodeRecord(enc, &req); err != nil {
		t.Fatal(err)
	}
	if req.Path != "/a\uFFFDb" {
		t.Errorf("path %q, want %q", req.Path, "/a\uFFFDb")
	}
	for i := range 256 {
		for j := range 256 {
			b := []byte{byte(i), byte(j), 0xe2}
			if s := NewDecoder(append([]byte{0, 0, 0, 3}, b...)).String(); !utf8.ValidString(s) || bytes.Equal([]byte(s), b) && !utf8.Valid(b) {
				t.Fatalf("%x decoded as %x", b, s)
			}
		}
	}
}

// TestJavaBytes: what jute 3.9.6's BinaryOutputArchive.writeString writes (taken from it), and
// what a reply of sync, getACL or whoAmI, or a watch event, carries; other replies keep their
// strings as they are.
func TestJavaBytes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"2f61", "2f61"},
		{"2ff09f9880", "2feda0bdedb880"},
		{"78f090808079c3a9e282ac", "78eda080edb08079c3a9e282ac"},
	} {
		in, _ := hex.DecodeString(c.in)
		if got := hex.EncodeToString([]byte(JavaBytes(string(in)))); got != c.want {
			t.Errorf("JavaBytes(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := JavaRoundTrip("/\U0001F600"); got != "/\uFFFD\uFFFD" {
		t.Errorf("JavaRoundTrip = %q, want two U+FFFD", got)
	}
	emoji := "/\U0001F600"
	sync := MarshalReply(ReplyHeader{Xid: 1}, &SyncResponse{Path: emoji}).Bytes()
	if want := "\x00\x00\x00\x07/\xed\xa0\xbd\xed\xb8\x80"; !bytes.HasSuffix(sync, []byte(want)) {
		t.Errorf("sync reply %x, want it to end in %x", sync, want)
	}
	event := MarshalReply(ReplyHeader{Xid: XidNotification, Zxid: -1}, &WatcherEvent{Type: EventNodeDeleted, State: StateSyncConnected, Path: emoji}).Bytes()
	if want := "\x00\x00\x00\x07/\xed\xa0\xbd\xed\xb8\x80"; !bytes.HasSuffix(event, []byte(want)) {
		t.Errorf("watch event %x, want it to end in %x", event, want)
	}
	create := MarshalReply(ReplyHeader{Xid: 1}, &CreateResponse{Path: emoji}).Bytes()
	if want := "\x00\x00\x00\x05" + emoji; !bytes.HasSuffix(create, []byte(want)) {
		t.Errorf("create reply %x, want it to end in %x", create, want)
	}
}

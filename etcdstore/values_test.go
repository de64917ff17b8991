package etcdstore

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/watch"
)

// TestValuesRoundTrip: each value codec decodes what it encodes, and refuses a truncated value.
func TestValuesRoundTrip(t *testing.T) {
	acl := aclValue{Ctime: 42, Mode: encoding.ModePersistentWithTTL, TTL: 5000, ACL: []encoding.ACL{
		{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}},
		{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "digest", ID: "u:p"}},
	}}
	for _, v := range []aclValue{acl, {ACL: openACL}, {}} {
		enc := encodeACLValue(v)
		if got, err := decodeACLValue([]byte(enc), nil); err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("ACL value: %+v, %v; want %+v", got, err, v)
		}
		if n := aclValueLen(v); n != len(enc) {
			t.Errorf("aclValueLen(%+v) = %d, encoded %d bytes", v, n, len(enc))
		}
	}
	if _, err := decodeACLValue([]byte(encodeACLValue(acl))[:20], nil); err == nil {
		t.Error("a truncated ACL value decoded")
	}
	for _, data := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte{0, 1, 2}, 1000)} {
		for _, ix := range []zxidIndexes{{}, {czxid: 3}, {mzxid: 65535}, {czxid: 1, mzxid: 2}} {
			for _, meta := range []aclValue{{}, acl} {
				got, mtime, gotIx, gotMeta, err := decodeDataValue([]byte(encodeDataValue(data, 1234567, ix, meta)))
				if err != nil || !bytes.Equal(got, data) || (got == nil) != (data == nil) || mtime != 1234567 || gotIx != ix {
					t.Errorf("data value of %d bytes, indexes %+v: %d bytes, mtime %d, indexes %+v, %v", len(data), ix, len(got), mtime, gotIx, err)
				}
				if v, err := decodeACLValue(gotMeta, nil); err != nil || !reflect.DeepEqual(v, meta) {
					t.Errorf("data value's meta: %+v, %v; want %+v", v, err, meta)
				}
			}
		}
	}
	if _, _, _, _, err := decodeDataValue([]byte{1}); err == nil {
		t.Error("a truncated data value decoded")
	}
	if _, _, _, _, err := decodeDataValue([]byte(encodeDataValue(nil, 1, zxidIndexes{czxid: 1}, acl))[:11]); err == nil {
		t.Error("a data value with truncated indexes decoded")
	}
	if _, _, _, _, err := decodeDataValue([]byte(encodeDataValue(nil, 1, zxidIndexes{}, acl))[:20]); err == nil {
		t.Error("a data value with truncated meta decoded")
	}
	if _, _, _, _, err := decodeDataValue([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1}); err == nil {
		t.Error("a data value without meta decoded")
	}
	for _, ix := range []uint16{0, 1, 65535} {
		if got, err := decodeIndexValue([]byte(encodeIndexValue(ix))); err != nil || got != ix {
			t.Errorf("index value %d: %d, %v", ix, got, err)
		}
	}
	if _, err := decodeIndexValue([]byte{1}); err == nil {
		t.Error("a truncated index value decoded")
	}

	sess := sessionValue{passwd: bytes.Repeat([]byte{7}, 16), timeoutMs: 6000, owner: 0xfeedface}
	if got, err := decodeSessionValue([]byte(encodeSessionValue(sess))); err != nil || !reflect.DeepEqual(got, sess) {
		t.Errorf("session value: %+v, %v; want %+v", got, err, sess)
	}

	for _, czxid := range []int64{0, czxidOwn(0), czxidOwn(7), int64(zxidOf(12, 3))} {
		off := offsetsValue{Version: 3, Aversion: -1, Creates: 9, Czxid: czxid}
		if got, err := decodeOffsetsValue([]byte(encodeOffsetsValue(off))); err != nil || got != off {
			t.Errorf("offsets value: %+v, %v; want %+v", got, err, off)
		}
	}
	// Format 1 held a positive czxid as a revision.
	old := []byte(encodeOffsetsValue(offsetsValue{Czxid: 12}))
	old[0] = 1
	if got, err := decodeOffsetsValue(old); err != nil || got.Czxid != int64(zxidOf(12, 0)) {
		t.Errorf("format 1 offsets value: %+v, %v; want czxid %d", got, err, zxidOf(12, 0))
	}

	changes := []journalChange{
		{watch.Change{Kind: watch.Created, Path: "/a", CreatedACL: acl.ACL}, 0},
		{watch.Change{Kind: watch.DataChanged, Path: "/a"}, 5},
		{watch.Change{Kind: watch.Created, Path: "/c", CreatedACL: acl.ACL}, 65535},
		{watch.Change{Kind: watch.Deleted, Path: "/b"}, 6},
	}
	got, err := decodeJournal([]byte(encodeJournal(changes)), 77)
	if err != nil || len(got) != len(changes) {
		t.Fatalf("journal: %+v, %v", got, err)
	}
	for i, c := range got {
		want := changes[i]
		if c.Kind != want.Kind || c.Path != want.Path || c.Zxid != zxidOf(77, int(want.index)) || !reflect.DeepEqual(c.CreatedACL, want.CreatedACL) {
			t.Errorf("journal change %d: %+v, want %+v at zxid %v", i, c, want, zxidOf(77, int(want.index)))
		}
	}
	if _, err := decodeJournal([]byte(encodeJournal(changes))[:2], 77); err == nil {
		t.Error("a truncated journal decoded")
	}
}

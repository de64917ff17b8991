package encoding

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// unhex decodes hex written with spaces and newlines between fields, so the
// golden values below can be laid out one field per group.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad golden hex: %v", err)
	}
	return b
}

var pw16 = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// goldens are derived by hand from zookeeper.jute field order; each group of
// hex digits is one field.
var goldens = []struct {
	name string
	hex  string
	rec  Record
	size int
}{
	{
		name: "ConnectRequest/44-no-readonly",
		hex: `00000000                       protocolVersion 0
		      000000000000001f               lastZxidSeen 0x1f
		      00007530                       timeOut 30000
		      0000000000000000               sessionId 0
		      00000010                       passwd length 16
		      00000000000000000000000000000000`,
		rec:  &ConnectRequest{LastZxidSeen: 0x1f, TimeOut: 30000, Passwd: make([]byte, 16)},
		size: 44,
	},
	{
		name: "ConnectRequest/45-readonly",
		hex: `00000000
		      0000000100000002
		      00002710                       timeOut 10000
		      0123456789abcdef
		      00000010
		      000102030405060708090a0b0c0d0e0f
		      01                             readOnly true`,
		rec: &ConnectRequest{LastZxidSeen: 0x100000002, TimeOut: 10000, SessionID: 0x0123456789abcdef,
			Passwd: pw16, ReadOnly: true, HasReadOnly: true},
		size: 45,
	},
	{
		name: "ConnectRequest/45-readwrite",
		hex: `00000000 0000000000000000 00007530 0000000000000000 00000010
		      00000000000000000000000000000000 00`,
		rec:  &ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16), HasReadOnly: true},
		size: 45,
	},
	{
		name: "ConnectResponse/36",
		hex: `00000000                       protocolVersion
		      00007530                       timeOut
		      0123456789abcdef               sessionId
		      00000010
		      000102030405060708090a0b0c0d0e0f`,
		rec:  &ConnectResponse{TimeOut: 30000, SessionID: 0x0123456789abcdef, Passwd: pw16},
		size: 36,
	},
	{
		name: "ConnectResponse/37",
		hex: `00000000 00001770 fedcba9876543210 00000010
		      000102030405060708090a0b0c0d0e0f 00`,
		rec: &ConnectResponse{TimeOut: 6000, SessionID: -0x123456789abcdf0, Passwd: pw16,
			HasReadOnly: true},
		size: 37,
	},
	{
		name: "ConnectResponse/expired",
		hex:  `00000000 00000000 0000000000000000 00000010 00000000000000000000000000000000`,
		rec:  &ConnectResponse{Passwd: make([]byte, 16)},
		size: 36,
	},
	{
		name: "RequestHeader/ping",
		hex:  `fffffffe 0000000b`,
		rec:  &RequestHeader{Xid: XidPing, Op: OpPing},
		size: 8,
	},
	{
		name: "ReplyHeader/NoNode",
		hex: `00000007                       xid 7
		      000000000000001f               zxid 0x1f
		      ffffff9b                       err -101`,
		rec:  &ReplyHeader{Xid: 7, Zxid: 0x1f, Err: ErrNoNode},
		size: 16,
	},
	{
		name: "ReplyHeader/notification",
		hex:  `ffffffff ffffffffffffffff 00000000`,
		rec:  &ReplyHeader{Xid: XidNotification, Zxid: -1},
		size: 16,
	},
	{
		name: "Stat",
		hex: `0000000000000003               czxid
		      0000000000000005               mzxid
		      0000018bcfe56800               ctime 1700000000000
		      0000018bcfe56be8               mtime 1700000001000
		      00000002                       version
		      00000001                       cversion
		      00000000                       aversion
		      0123456789abcdef               ephemeralOwner
		      0000000b                       dataLength 11
		      00000000                       numChildren
		      0000000000000004               pzxid`,
		rec: &Stat{Czxid: 3, Mzxid: 5, Ctime: 1700000000000, Mtime: 1700000001000, Version: 2,
			Cversion: 1, EphemeralOwner: 0x0123456789abcdef, DataLength: 11, Pzxid: 4},
		size: StatSize,
	},
	{
		name: "CreateRequest",
		hex: `00000002 2f61                  path "/a"
		      00000002 6869                  data "hi"
		      00000001                       1 ACL
		      0000001f                       perms all
		      00000005 776f726c64            "world"
		      00000006 616e796f6e65          "anyone"
		      00000003                       flags EphemeralSequential`,
		rec: &CreateRequest{Path: "/a", Data: []byte("hi"),
			ACL:   []ACL{{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}}},
			Flags: ModeEphemeralSequential},
		size: 43,
	},
	{
		name: "CreateRequest/null-data",
		hex:  `00000002 2f62 ffffffff 00000000 00000000`,
		rec:  &CreateRequest{Path: "/b", ACL: []ACL{}},
		size: 18,
	},
	{
		name: "MultiResponse/failed",
		hex: `ffffffff 00 00000000 00000000  error result OK: header, body
		      ffffffff 00 ffffff9b ffffff9b  error result NoNode
		      ffffffff 00 fffffffe fffffffe  error result RuntimeInconsistency
		      ffffffff 01 ffffffff           terminator`,
		rec: &MultiResponse{Results: []MultiResult{
			{Op: OpError, Err: ErrOK},
			{Op: OpError, Err: ErrNoNode},
			{Op: OpError, Err: ErrRuntimeInconsistency},
		}},
		size: 48,
	},
	{
		name: "MultiRequest/create-check",
		hex: `00000001 00 ffffffff           create
		      00000002 2f61 ffffffff 00000000 00000000
		      0000000d 00 ffffffff           check
		      00000002 2f61 00000003
		      ffffffff 01 ffffffff`,
		rec: &MultiRequest{Ops: []MultiOp{
			{Op: OpCreate, Record: &CreateRequest{Path: "/a", ACL: []ACL{}}},
			{Op: OpCheck, Record: &CheckVersionRequest{Path: "/a", Version: 3}},
		}},
		size: 9 + 18 + 9 + 10 + 9,
	},
	{
		name: "WatcherEvent",
		hex: `00000003                       NodeDataChanged
		      00000003                       SyncConnected
		      00000004 2f612f62              "/a/b"`,
		rec:  &WatcherEvent{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/a/b"},
		size: 16,
	},
	{
		name: "ErrorResponse/addWatch",
		hex:  `00000000`,
		rec:  &ErrorResponse{},
		size: 4,
	},
}

// stripComments removes the trailing prose from golden hex lines.
func stripComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		var keep []string
		for _, f := range strings.Fields(line) {
			if _, err := hex.DecodeString(f); err != nil || len(f)%2 != 0 {
				break
			}
			keep = append(keep, f)
		}
		out = append(out, strings.Join(keep, ""))
	}
	return strings.Join(out, "")
}

func goldenBytes(t testing.TB, s string) []byte { return unhex(t, stripComments(s)) }

// golden returns the bytes of the named golden.
func golden(t testing.TB, name string) []byte {
	t.Helper()
	for _, g := range goldens {
		if g.name == name {
			return goldenBytes(t, g.hex)
		}
	}
	t.Fatalf("no golden %q", name)
	return nil
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			want := goldenBytes(t, g.hex)
			if len(want) != g.size {
				t.Fatalf("golden is %d bytes, want %d (bad hand derivation)", len(want), g.size)
			}
			got := AppendRecord(nil, g.rec)
			if !bytes.Equal(got, want) {
				t.Fatalf("encode:\n got %x\nwant %x", got, want)
			}
			fresh := reflect.New(reflect.TypeOf(g.rec).Elem()).Interface().(Record)
			if err := DecodeRecord(want, fresh); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(fresh, g.rec) {
				t.Fatalf("decode:\n got %#v\nwant %#v", fresh, g.rec)
			}
		})
	}
}

// TestConnectOldClientForms checks the optional readOnly byte is chosen by
// what remains, and that trailing bytes beyond it are ignored.
func TestConnectOldClientForms(t *testing.T) {
	b44 := golden(t, "ConnectRequest/44-no-readonly")
	var req ConnectRequest
	if err := DecodeRecord(b44, &req); err != nil || req.HasReadOnly {
		t.Fatalf("44-byte request: err %v HasReadOnly %v", err, req.HasReadOnly)
	}
	b46 := append(append([]byte{}, b44...), 7, 0xee)
	if err := DecodeRecord(b46, &req); err != nil || !req.HasReadOnly || !req.ReadOnly {
		t.Fatalf("46-byte request: err %v %+v", err, req)
	}
	// Decoding into a used record must clear the flag again.
	if err := DecodeRecord(b44, &req); err != nil || req.HasReadOnly || req.ReadOnly {
		t.Fatalf("reuse: err %v %+v", err, req)
	}
	var resp ConnectResponse
	if err := DecodeRecord(golden(t, "ConnectResponse/36")[:35], &resp); err == nil {
		t.Fatal("35-byte response decoded without error")
	}
}

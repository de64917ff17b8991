package encoding

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

var sampleStat = Stat{
	Czxid: 0x100000001, Mzxid: 0x100000007, Ctime: 1700000000000, Mtime: 1700000009999,
	Version: 6, Cversion: -3, Aversion: 2, EphemeralOwner: -0x7edcba9876543210,
	DataLength: 11, NumChildren: 4, Pzxid: 0x10000000a,
}

var sampleACL = []ACL{
	{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}},
	{Perms: PermRead | PermAdmin, ID: ID{Scheme: "digest", ID: "bob:c2VjcmV0"}},
	{Perms: 0x40, ID: ID{}},
}

// sampleRecords returns, for every record type in the package, values that
// exercise each field, null against empty buffers and nil against empty
// vectors. Names must be unique.
func sampleRecords() map[string]Record {
	return map[string]Record{
		"Stat":                         &sampleStat,
		"Stat/zero":                    &Stat{},
		"ID":                           &ID{Scheme: "ip", ID: "10.0.0.0/8"},
		"ACL":                          &sampleACL[1],
		"ConnectRequest":               &ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 0x500000123, TimeOut: 4000, SessionID: 0x7fffffffffffffff, Passwd: pw16},
		"ConnectRequest/ro":            &ConnectRequest{Passwd: []byte{}, ReadOnly: true, HasReadOnly: true},
		"ConnectRequest/nullpw":        &ConnectRequest{TimeOut: 1, Passwd: nil, HasReadOnly: true},
		"ConnectResponse":              &ConnectResponse{ProtocolVersion: 1, TimeOut: 4000, SessionID: -1, Passwd: pw16, ReadOnly: true, HasReadOnly: true},
		"ConnectResponse/old":          &ConnectResponse{TimeOut: 4000, SessionID: 1, Passwd: []byte{}},
		"RequestHeader":                &RequestHeader{Xid: 0x7fffffff, Op: OpCloseSession},
		"ReplyHeader":                  &ReplyHeader{Xid: -8, Zxid: 0x7fffffffffffffff, Err: ErrThrottledOp},
		"WatcherEvent":                 &WatcherEvent{Type: EventNodeChildrenChanged, State: StateSyncConnected, Path: "/zk/ü"},
		"CreateRequest":                &CreateRequest{Path: "/a/b-", Data: []byte{0, 0xff}, ACL: sampleACL, Flags: ModePersistentSequential},
		"CreateRequest/null":           &CreateRequest{Path: "/n", Data: nil, ACL: nil, Flags: 99},
		"CreateRequest/empty":          &CreateRequest{Path: "", Data: []byte{}, ACL: []ACL{}, Flags: ModeContainer},
		"CreateTTLRequest":             &CreateTTLRequest{Path: "/ttl", Data: []byte("x"), ACL: sampleACL[:1], Flags: ModePersistentWithTTL, TTL: 1<<40 - 1},
		"CreateResponse":               &CreateResponse{Path: "/a/b-0000000007"},
		"Create2Response":              &Create2Response{Path: "/c", Stat: sampleStat},
		"DeleteRequest":                &DeleteRequest{Path: "/d", Version: -1},
		"ExistsRequest":                &ExistsRequest{Path: "/e", Watch: true},
		"ExistsResponse":               &ExistsResponse{Stat: sampleStat},
		"GetDataRequest":               &GetDataRequest{Path: "/g", Watch: true},
		"GetDataResponse":              &GetDataResponse{Data: []byte("hello world"), Stat: sampleStat},
		"GetDataResponse/null":         &GetDataResponse{Data: nil, Stat: sampleStat},
		"GetDataResponse/empty":        &GetDataResponse{Data: []byte{}},
		"SetDataRequest":               &SetDataRequest{Path: "/s", Data: []byte("v2"), Version: 5},
		"SetDataResponse":              &SetDataResponse{Stat: sampleStat},
		"GetACLRequest":                &GetACLRequest{Path: "/acl"},
		"GetACLResponse":               &GetACLResponse{ACL: sampleACL, Stat: sampleStat},
		"GetACLResponse/null":          &GetACLResponse{ACL: nil},
		"SetACLRequest":                &SetACLRequest{Path: "/acl", ACL: sampleACL, Version: 9},
		"SetACLResponse":               &SetACLResponse{Stat: sampleStat},
		"GetChildrenRequest":           &GetChildrenRequest{Path: "/", Watch: true},
		"GetChildrenResponse":          &GetChildrenResponse{Children: []string{"zookeeper", "a", ""}},
		"GetChildrenResponse/0":        &GetChildrenResponse{Children: []string{}},
		"GetChildrenResponse/n":        &GetChildrenResponse{Children: nil},
		"GetChildren2Request":          &GetChildren2Request{Path: "/x", Watch: false},
		"GetChildren2Response":         &GetChildren2Response{Children: []string{"b", "c"}, Stat: sampleStat},
		"SyncRequest":                  &SyncRequest{Path: "/sync"},
		"SyncResponse":                 &SyncResponse{Path: "/sync"},
		"CheckVersionRequest":          &CheckVersionRequest{Path: "/c", Version: 3},
		"ReconfigRequest":              &ReconfigRequest{JoiningServers: "server.4=h:2888:3888", LeavingServers: "3", NewMembers: "", CurConfigID: 0x100000000},
		"CheckWatchesRequest":          &CheckWatchesRequest{Path: "/w", Type: WatcherAny},
		"RemoveWatchesRequest":         &RemoveWatchesRequest{Path: "/w", Type: WatcherPersistentRecursive},
		"DeleteContainerRequest":       &DeleteContainerRequest{Path: "/container"},
		"AuthPacket":                   &AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("bob:secret")},
		"AuthPacket/null":              &AuthPacket{Type: 7, Scheme: "", Auth: nil},
		"SetWatches":                   &SetWatches{RelativeZxid: 0x42, DataWatches: []string{"/a", "/b"}, ExistWatches: []string{}, ChildWatches: nil},
		"SetWatches2":                  &SetWatches2{RelativeZxid: -1, DataWatches: nil, ExistWatches: []string{"/e"}, ChildWatches: []string{}, PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/r", "/r/s"}},
		"GetSASLRequest":               &GetSASLRequest{Token: []byte{1, 2, 3}},
		"SetSASLResponse":              &SetSASLResponse{Token: []byte{}},
		"GetEphemeralsRequest":         &GetEphemeralsRequest{PrefixPath: "/eph"},
		"GetEphemeralsResponse":        &GetEphemeralsResponse{Ephemerals: []string{"/eph/1", "/eph/2"}},
		"GetAllChildrenNumberRequest":  &GetAllChildrenNumberRequest{Path: "/"},
		"GetAllChildrenNumberResponse": &GetAllChildrenNumberResponse{TotalNumber: 1234567},
		"AddWatchRequest":              &AddWatchRequest{Path: "/aw", Mode: AddWatchPersistentRecursive},
		"ErrorResponse":                &ErrorResponse{Err: ErrNoWatcher},
		"ClientInfo":                   &ClientInfo{AuthScheme: "ip", User: "127.0.0.1"},
		"WhoAmIResponse":               &WhoAmIResponse{ClientInfo: []ClientInfo{{"ip", "127.0.0.1"}, {"digest", "bob"}}},
		"WhoAmIResponse/0":             &WhoAmIResponse{ClientInfo: []ClientInfo{}},
		"WhoAmIResponse/n":             &WhoAmIResponse{},
		"Empty":                        &Empty{},
		"MultiHeader":                  &MultiHeader{Type: OpCreate2, Done: true, Err: ErrNodeExists},
		"MultiRequest":                 &MultiRequest{Ops: sampleMultiOps()},
		"MultiRequest/empty":           &MultiRequest{},
		"MultiResponse":                &MultiResponse{Results: sampleMultiResults()},
		"MultiResponse/empty":          &MultiResponse{},
	}
}

func sampleMultiOps() []MultiOp {
	return []MultiOp{
		{OpCreate, &CreateRequest{Path: "/m", Data: []byte("d"), ACL: sampleACL[:1], Flags: ModeEphemeral}},
		{OpCreate2, &CreateRequest{Path: "/m2", ACL: sampleACL[:1]}},
		{OpCreateContainer, &CreateRequest{Path: "/mc", Data: []byte{}, ACL: sampleACL[:1], Flags: ModeContainer}},
		{OpCreateTTL, &CreateTTLRequest{Path: "/mt", ACL: sampleACL[:1], Flags: ModePersistentWithTTL, TTL: 5000}},
		{OpDelete, &DeleteRequest{Path: "/m", Version: -1}},
		{OpSetData, &SetDataRequest{Path: "/m2", Data: []byte("x"), Version: 0}},
		{OpCheck, &CheckVersionRequest{Path: "/m2", Version: 1}},
		{OpGetChildren, &GetChildrenRequest{Path: "/", Watch: true}},
		{OpGetData, &GetDataRequest{Path: "/m2"}},
	}
}

func sampleMultiResults() []MultiResult {
	return []MultiResult{
		{Op: OpCreate, Record: &CreateResponse{Path: "/m"}},
		{Op: OpCreate2, Record: &Create2Response{Path: "/m2", Stat: sampleStat}},
		{Op: OpDelete},
		{Op: OpSetData, Record: &SetDataResponse{Stat: sampleStat}},
		{Op: OpCheck},
		{Op: OpGetChildren, Record: &GetChildrenResponse{Children: []string{"a"}}},
		{Op: OpGetData, Record: &GetDataResponse{Data: nil, Stat: sampleStat}},
		{Op: OpError, Err: ErrNoNode},
	}
}

// roundTrip encodes r, decodes into a fresh value of the same type, checks
// equality and that the re-encoding is byte-identical.
func roundTrip(t testing.TB, r Record) {
	t.Helper()
	b := AppendRecord(nil, r)
	fresh := reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record)
	if err := DecodeRecord(b, fresh); err != nil {
		t.Fatalf("decode %T: %v\nbytes %x", r, err, b)
	}
	if !reflect.DeepEqual(fresh, r) {
		t.Fatalf("round trip %T:\n got %#v\nwant %#v", r, fresh, r)
	}
	if b2 := AppendRecord(nil, fresh); !bytes.Equal(b, b2) {
		t.Fatalf("re-encode %T differs:\n%x\n%x", r, b, b2)
	}
	// Every strict prefix must fail cleanly, except where the record ends
	// in an optional field (connect records) or may be empty.
	for i := 0; i < len(b); i++ {
		fresh := reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record)
		err := DecodeRecord(b[:i], fresh)
		if err == nil {
			if hasOptionalTail(r) && i == len(b)-1 {
				continue
			}
			t.Fatalf("%T: decoding %d of %d bytes succeeded", r, i, len(b))
		}
		if !errors.Is(err, ErrShortBuffer) {
			t.Fatalf("%T: truncated to %d: error %v does not wrap ErrShortBuffer", r, i, err)
		}
	}
}

func hasOptionalTail(r Record) bool {
	switch r := r.(type) {
	case *ConnectRequest:
		return r.HasReadOnly
	case *ConnectResponse:
		return r.HasReadOnly
	}
	return false
}

func TestRoundTrip(t *testing.T) {
	for name, r := range sampleRecords() {
		t.Run(name, func(t *testing.T) { roundTrip(t, r) })
	}
}

func TestStatSize(t *testing.T) {
	if n := len(AppendRecord(nil, &sampleStat)); n != StatSize || StatSize != 68 {
		t.Fatalf("Stat encodes to %d bytes, StatSize %d, want 68", n, StatSize)
	}
	if n := len(AppendRecord(nil, &ReplyHeader{})); n != ReplyHeaderSize {
		t.Fatalf("ReplyHeader %d bytes", n)
	}
	if n := len(AppendRecord(nil, &RequestHeader{})); n != RequestHeaderSize {
		t.Fatalf("RequestHeader %d bytes", n)
	}
	if n := len(AppendRecord(nil, &MultiHeader{})); n != multiHeaderSize {
		t.Fatalf("MultiHeader %d bytes", n)
	}
}

// TestMultiResultEmptyBody checks that *Empty bodies for delete/check
// encode like nil, and that a nil Record on an error result is fine.
func TestMultiResultEmptyBody(t *testing.T) {
	a := AppendRecord(nil, &MultiResponse{Results: []MultiResult{{Op: OpDelete, Record: &Empty{}}, {Op: OpCheck, Record: &Empty{}}, {Op: OpError, Err: ErrBadVersion, Record: &ErrorResponse{Err: 1}}}})
	b := AppendRecord(nil, &MultiResponse{Results: []MultiResult{{Op: OpDelete}, {Op: OpCheck}, {Op: OpError, Err: ErrBadVersion}}})
	if !bytes.Equal(a, b) {
		t.Fatalf("%x != %x", a, b)
	}
}

func TestMultiDecodeErrors(t *testing.T) {
	end := "ffffffff01ffffffff"
	tests := []struct {
		name string
		rec  Record
		hex  string
		want error
	}{
		{"request/bad-op", &MultiRequest{}, "0000000300ffffffff 00000001 2f 00" + end, ErrBadMultiOp},
		{"request/no-terminator", &MultiRequest{}, "0000000200ffffffff 00000001 2f 00000000", ErrShortBuffer},
		{"request/empty-input", &MultiRequest{}, "", ErrShortBuffer},
		{"request/bad-body", &MultiRequest{}, "0000000200ffffffff fffffffe 00000000" + end, ErrBadLength},
		{"response/bad-type", &MultiResponse{}, "0000000900000000000000000000" + end, ErrBadMultiOp},
		{"response/no-terminator", &MultiResponse{}, "ffffffff00ffffff9bffffff9b", ErrShortBuffer},
		{"response/truncated-error", &MultiResponse{}, "ffffffff00ffffff9bffff", ErrShortBuffer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DecodeRecord(unhex(t, tt.hex), tt.rec)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// Decoding stops at the first Done header, whatever else it says, and
	// ignores what follows.
	var r MultiRequest
	if err := DecodeRecord(unhex(t, "0000000201000000000000000200"), &r); err != nil || r.Ops != nil {
		t.Fatalf("early done: %v %+v", err, r)
	}
	// The header err of an error result is ignored in favour of the body.
	var resp MultiResponse
	if err := DecodeRecord(unhex(t, "ffffffff0000000000ffffff9b"+end), &resp); err != nil ||
		len(resp.Results) != 1 || resp.Results[0].Err != ErrNoNode {
		t.Fatalf("error result: %v %+v", err, resp)
	}
}

// TestDecoderNegativeVectorCount: -1 is a null vector; any other negative count is an empty
// one, as ZooKeeper reads it (a setACL with such a count is refused InvalidACL, not
// MarshallingError), and decoding goes on after it.
func TestDecoderNegativeVectorCount(t *testing.T) {
	for _, c := range []struct {
		hex  string
		null bool
	}{{"ffffffff 00000007", true}, {"fffffffe 00000007", false}, {"80000000 00000007", false}} {
		d := NewDecoder(unhex(t, c.hex))
		s := d.Strings()
		if next := d.Int32(); d.Err() != nil || next != 7 || len(s) != 0 || (s == nil) != c.null {
			t.Errorf("%s: %#v then %d, err %v; want an empty vector (null: %v) then 7", c.hex, s, next, d.Err(), c.null)
		}
	}
}

func TestDecoderBounds(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		read func(d *Decoder) any
		want error
	}{
		{"buffer/neg", "fffffffe", func(d *Decoder) any { return d.Buffer() }, ErrBadLength},
		{"buffer/minint", "80000000", func(d *Decoder) any { return d.Buffer() }, ErrBadLength},
		{"buffer/huge", "7fffffff00", func(d *Decoder) any { return d.Buffer() }, ErrShortBuffer},
		{"buffer/one-over", "0000000300 00", func(d *Decoder) any { return d.Buffer() }, ErrShortBuffer},
		{"string/neg", "fffffff0", func(d *Decoder) any { return d.String() }, ErrBadLength},
		{"string/huge", "7fffffff", func(d *Decoder) any { return d.String() }, ErrShortBuffer},
		// 2 strings need at least 8 bytes; 7 remain.
		{"strings/count-too-big", "00000002 00000000 000000", func(d *Decoder) any { return d.Strings() }, ErrShortBuffer},
		{"strings/huge", "7fffffff", func(d *Decoder) any { return d.Strings() }, ErrShortBuffer},
		{"int32/short", "000000", func(d *Decoder) any { return d.Int32() }, ErrShortBuffer},
		{"int64/short", "00000000000000", func(d *Decoder) any { return d.Int64() }, ErrShortBuffer},
		{"bool/short", "", func(d *Decoder) any { return d.Bool() }, ErrShortBuffer},
		{"acl/huge", "7fffffff 00000000 00000000 00000000", func(d *Decoder) any { return decodeACLs(d) }, ErrShortBuffer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(unhex(t, tt.hex))
			v := tt.read(d)
			if !errors.Is(d.Err(), tt.want) {
				t.Fatalf("err = %v, want %v", d.Err(), tt.want)
			}
			if !reflect.ValueOf(v).IsZero() {
				t.Fatalf("value after error = %#v, want zero", v)
			}
			if d.Remaining() != 0 {
				t.Fatalf("Remaining after error = %d", d.Remaining())
			}
			// Sticky: later reads fail too and keep the first error.
			first := d.Err()
			if d.Int32() != 0 || d.String() != "" || d.Buffer() != nil || d.Err() != first {
				t.Fatal("error not sticky")
			}
		})
	}
}

func TestDecoderValues(t *testing.T) {
	d := NewDecoder(unhex(t, "02 00 ffffffff 00000000 ffffffff 00000000 00000001 00000001 61 ffffffff 80000000"))
	if !d.Bool() || d.Bool() {
		t.Fatal("bool: any non-zero byte is true, zero is false")
	}
	if b := d.Buffer(); b != nil {
		t.Fatalf("null buffer = %#v", b)
	}
	if b := d.Buffer(); b == nil || len(b) != 0 {
		t.Fatalf("empty buffer = %#v", b)
	}
	if s := d.Strings(); s != nil {
		t.Fatalf("null vector = %#v", s)
	}
	if s := d.Strings(); s == nil || len(s) != 0 {
		t.Fatalf("empty vector = %#v", s)
	}
	if s := d.Strings(); !reflect.DeepEqual(s, []string{"a"}) {
		t.Fatalf("vector = %#v", s)
	}
	if s := d.String(); s != "" {
		t.Fatalf("null string = %q", s)
	}
	if v := d.Int32(); v != -1<<31 {
		t.Fatalf("int32 = %d", v)
	}
	if d.Err() != nil || d.Remaining() != 0 {
		t.Fatalf("err %v remaining %d", d.Err(), d.Remaining())
	}
}

// TestBufferIsCopy checks decoded buffers and strings survive reuse of the
// frame buffer they came from.
func TestBufferIsCopy(t *testing.T) {
	in := AppendRecord(nil, &GetDataResponse{Data: []byte("abc"), Stat: sampleStat})
	var r GetDataResponse
	if err := DecodeRecord(in, &r); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 0xAA
	}
	if string(r.Data) != "abc" {
		t.Fatalf("decoded buffer aliases input: %q", r.Data)
	}
}

func TestDecoderFail(t *testing.T) {
	d := NewDecoder([]byte{0, 0, 0, 1})
	first := fmt.Errorf("first")
	d.Fail(first)
	d.Fail(fmt.Errorf("second"))
	if d.Err() != first || d.Int32() != 0 {
		t.Fatal("Fail not sticky")
	}
	d = NewDecoder(nil)
	d.Fail(nil)
	if d.Err() != nil {
		t.Fatal("Fail(nil) set an error")
	}
}

func TestEncoderZeroValue(t *testing.T) {
	var e Encoder
	e.Int32(1)
	e.Strings([]string{"ab"})
	e.Buffer(nil)
	e.Bool(true)
	e.Int64(-2)
	want := unhex(t, "00000001 00000001 00000002 6162 ffffffff 01 fffffffffffffffe")
	if !bytes.Equal(e.Bytes(), want) {
		t.Fatalf("got %x", e.Bytes())
	}
	// NewEncoder appends rather than overwriting.
	e2 := NewEncoder([]byte{9})
	e2.String("")
	if !bytes.Equal(e2.Bytes(), []byte{9, 0, 0, 0, 0}) {
		t.Fatalf("got %x", e2.Bytes())
	}
}

func TestDeleteContainerNullPath(t *testing.T) {
	var r DeleteContainerRequest
	if err := DecodeRecord(unhex(t, "ffffffff"), &r); err != nil || r.Path != "" {
		t.Fatalf("%v %q", err, r.Path)
	}
}

// TestNullString: the records whose answer depends on a null (a write's path, sync's, an ACL's
// scheme and id) decode it as NullString, which encodes back as null; the others decode it as "".
func TestNullString(t *testing.T) {
	null := unhex(t, "ffffffff")
	var create CreateRequest
	body := slices.Concat(null, null, unhex(t, "00000001"), unhex(t, "0000001f"), null, null, unhex(t, "00000000"))
	if null, err := DecodeRecordNulls(body, &create); err != nil || !null || create.Path != NullString || create.Data != nil ||
		create.ACL[0].ID != (ID{Scheme: NullString, ID: NullString}) {
		t.Fatalf("create: %+v, %v, %v", create, null, err)
	}
	if got := AppendRecord(nil, &create); !bytes.Equal(got, body) {
		t.Errorf("create encodes back as %x, want %x", got, body)
	}
	for _, r := range []interface {
		Record
		path() string
	}{&DeleteRequest{}, &SetDataRequest{}, &SetACLRequest{}, &CheckVersionRequest{}, &SyncRequest{}} {
		if _, err := DecodeRecordNulls(slices.Concat(null, make([]byte, 12)), r); err != nil || r.path() != NullString {
			t.Errorf("%T: path %q, %v; want NullString", r, r.path(), err)
		}
	}
	var exists ExistsRequest
	if isNull, err := DecodeRecordNulls(slices.Concat(null, []byte{0}), &exists); err != nil || !isNull || exists.Path != "" {
		t.Errorf("exists: %q, %v, %v; want \"\", a null", exists.Path, isNull, err)
	}
	if got := JavaRoundTrip(NullString); got != NullString {
		t.Errorf("JavaRoundTrip(NullString) = %q", got)
	}
}

func (r *DeleteRequest) path() string       { return r.Path }
func (r *SetDataRequest) path() string      { return r.Path }
func (r *SetACLRequest) path() string       { return r.Path }
func (r *CheckVersionRequest) path() string { return r.Path }
func (r *SyncRequest) path() string         { return r.Path }

// TestDecodeKnownIDStrings: an ACL id's common scheme and id strings decode to shared strings,
// with no allocation (a create carries its ACL); any other decodes as it was sent.
func TestDecodeKnownIDStrings(t *testing.T) {
	for _, want := range []ID{{Scheme: "world", ID: "anyone"}, {Scheme: "digest", ID: "bob:hash"}, {Scheme: "worl", ID: "anyones"}} {
		var got ID
		if err := DecodeRecord(AppendRecord(nil, &want), &got); err != nil || got != want {
			t.Errorf("decoded %+v, %v; want %+v", got, err, want)
		}
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates
	}
	world := AppendRecord(nil, &ID{Scheme: "world", ID: "anyone"})
	var id ID
	if n := testing.AllocsPerRun(100, func() { id.Decode(NewDecoder(world)) }); n != 0 {
		t.Errorf("decoding world:anyone: %v allocations, want 0", n)
	}
}

// TestAppendACLRecord: AppendACLRecord appends the bytes AppendRecord appends for the same
// SetACLRequest, for a null, an empty and non-empty lists and a null string in an id, and
// allocates nothing into a buffer with room.
func TestAppendACLRecord(t *testing.T) {
	for _, acl := range [][]ACL{nil, {}, sampleACL[:1], sampleACL, {{Perms: PermRead, ID: ID{Scheme: NullString, ID: ""}}}} {
		want := AppendRecord([]byte("prefix"), &SetACLRequest{ACL: acl})
		if got := AppendACLRecord([]byte("prefix"), acl); !bytes.Equal(got, want) {
			t.Errorf("%v: AppendACLRecord %x, AppendRecord %x", acl, got, want)
		}
	}
	if testing.CoverMode() != "" || raceEnabled {
		return // instrumentation allocates
	}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = AppendACLRecord(buf[:0], sampleACL) }); n != 0 {
		t.Errorf("AppendACLRecord: %v allocations, want 0", n)
	}
}

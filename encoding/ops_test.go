package encoding

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// opTable is the expected request and response record of every opcode
// (ZooDefs.OpCode). nil means NewRequest/NewResponse must report !ok.
var opTable = []struct {
	op       Op
	name     string
	request  Record
	response Record
}{
	{OpNotification, "notification", nil, &WatcherEvent{}},
	{OpCreate, "create", &CreateRequest{}, &CreateResponse{}},
	{OpDelete, "delete", &DeleteRequest{}, &Empty{}},
	{OpExists, "exists", &ExistsRequest{}, &ExistsResponse{}},
	{OpGetData, "getData", &GetDataRequest{}, &GetDataResponse{}},
	{OpSetData, "setData", &SetDataRequest{}, &SetDataResponse{}},
	{OpGetACL, "getACL", &GetACLRequest{}, &GetACLResponse{}},
	{OpSetACL, "setACL", &SetACLRequest{}, &SetACLResponse{}},
	{OpGetChildren, "getChildren", &GetChildrenRequest{}, &GetChildrenResponse{}},
	{OpSync, "sync", &SyncRequest{}, &SyncResponse{}},
	{OpPing, "ping", &Empty{}, &Empty{}},
	{OpGetChildren2, "getChildren2", &GetChildren2Request{}, &GetChildren2Response{}},
	{OpCheck, "check", &CheckVersionRequest{}, &Empty{}},
	{OpMulti, "multi", &MultiRequest{}, &MultiResponse{}},
	{OpCreate2, "create2", &CreateRequest{}, &Create2Response{}},
	{OpReconfig, "reconfig", &ReconfigRequest{}, &GetDataResponse{}},
	{OpCheckWatches, "checkWatches", &CheckWatchesRequest{}, &Empty{}},
	{OpRemoveWatches, "removeWatches", &RemoveWatchesRequest{}, &Empty{}},
	{OpCreateContainer, "createContainer", &CreateRequest{}, &Create2Response{}},
	{OpDeleteContainer, "deleteContainer", &DeleteContainerRequest{}, &Empty{}},
	{OpCreateTTL, "createTTL", &CreateTTLRequest{}, &Create2Response{}},
	{OpMultiRead, "multiRead", &MultiRequest{}, &MultiResponse{}},
	{OpAuth, "auth", &AuthPacket{}, &Empty{}},
	{OpSetWatches, "setWatches", &SetWatches{}, &Empty{}},
	{OpSasl, "sasl", &GetSASLRequest{}, &SetSASLResponse{}},
	{OpGetEphemerals, "getEphemerals", &GetEphemeralsRequest{}, &GetEphemeralsResponse{}},
	{OpGetAllChildrenNumber, "getAllChildrenNumber", &GetAllChildrenNumberRequest{}, &GetAllChildrenNumberResponse{}},
	{OpSetWatches2, "setWatches2", &SetWatches2{}, &Empty{}},
	{OpAddWatch, "addWatch", &AddWatchRequest{}, &ErrorResponse{}},
	{OpWhoAmI, "whoAmI", &Empty{}, &WhoAmIResponse{}},
	{OpCreateSession, "createSession", nil, nil},
	{OpCloseSession, "closeSession", &Empty{}, &Empty{}},
	{OpError, "error", nil, &ErrorResponse{}},
}

func TestOpcodeTable(t *testing.T) {
	if len(opTable) != len(opNames) {
		t.Fatalf("test table has %d opcodes, opNames %d: keep them in step", len(opTable), len(opNames))
	}
	// Sample request values, by type, to push through the table.
	samples := map[reflect.Type][]Record{}
	for _, r := range sampleRecords() {
		samples[reflect.TypeOf(r)] = append(samples[reflect.TypeOf(r)], r)
	}
	for _, tt := range opTable {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.op.String(); got != tt.name {
				t.Errorf("String() = %q", got)
			}
			check := func(kind string, f func(Op) (Record, bool), want Record) Record {
				got, ok := f(tt.op)
				if want == nil {
					if ok || got != nil {
						t.Errorf("%s(%v) = %T, %v; want nil, false", kind, tt.op, got, ok)
					}
					return nil
				}
				if !ok || reflect.TypeOf(got) != reflect.TypeOf(want) {
					t.Fatalf("%s(%v) = %T, %v; want %T", kind, tt.op, got, ok, want)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s(%v) is not a zero record: %#v", kind, tt.op, got)
				}
				// Fresh each call: two calls must not share a record.
				again, _ := f(tt.op)
				if _, isEmpty := got.(*Empty); !isEmpty && got == again {
					t.Errorf("%s(%v) returned the same record twice", kind, tt.op)
				}
				return got
			}
			req := check("NewRequest", NewRequest, tt.request)
			check("NewResponse", NewResponse, tt.response)
			if req == nil {
				return
			}
			// Every request record round-trips through the table: encode a
			// sample, decode into the record NewRequest made.
			typ := reflect.TypeOf(req)
			if len(samples[typ]) == 0 {
				t.Fatalf("no sample value for %v", typ)
			}
			for _, s := range samples[typ] {
				rec, _ := NewRequest(tt.op)
				if err := DecodeRecord(AppendRecord(nil, s), rec); err != nil {
					t.Fatalf("decode %T: %v", s, err)
				}
				if !reflect.DeepEqual(rec, s) {
					t.Fatalf("round trip:\n got %#v\nwant %#v", rec, s)
				}
			}
		})
	}
	for _, op := range []Op{10, 23, 99, 108, -2, -9, -12, 1 << 30} {
		if r, ok := NewRequest(op); ok || r != nil {
			t.Errorf("NewRequest(%d) = %T, %v", op, r, ok)
		}
		if r, ok := NewResponse(op); ok || r != nil {
			t.Errorf("NewResponse(%d) = %T, %v", op, r, ok)
		}
	}
}

// TestSampleCoverage checks every record type reachable from the opcode
// tables has a round-trip sample, so adding an opcode forces a sample.
func TestSampleCoverage(t *testing.T) {
	have := map[reflect.Type]bool{}
	for _, r := range sampleRecords() {
		have[reflect.TypeOf(r)] = true
	}
	for _, tt := range opTable {
		for _, r := range []Record{tt.request, tt.response} {
			if r != nil && !have[reflect.TypeOf(r)] {
				t.Errorf("no round-trip sample for %T", r)
			}
		}
	}
	for _, r := range []Record{&Stat{}, &ID{}, &ACL{}, &ConnectRequest{}, &ConnectResponse{},
		&RequestHeader{}, &ReplyHeader{}, &MultiHeader{}, &ClientInfo{}} {
		if !have[reflect.TypeOf(r)] {
			t.Errorf("no round-trip sample for %T", r)
		}
	}
}

func TestFourLetterWord(t *testing.T) {
	words := []string{"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "hash", "isro",
		"mntr", "ruok", "srst", "srvr", "stat", "stmk", "wchc", "wchp", "wchs"}
	for _, w := range words {
		n := int32(uint32(w[0])<<24 | uint32(w[1])<<16 | uint32(w[2])<<8 | uint32(w[3]))
		got, ok := FourLetterWord(n)
		if !ok || got != w {
			t.Errorf("FourLetterWord(%#x) = %q, %v; want %q", n, got, ok, w)
		}
		if n <= DefaultMaxFrameBytes {
			t.Errorf("%q = %d is a valid frame length", w, n)
		}
	}
	if w, ok := FourLetterWord(0x72756f6b); !ok || w != "ruok" {
		t.Errorf("ruok: %q %v", w, ok)
	}
	for _, n := range []int32{0, 44, 45, DefaultMaxFrameBytes, -1, 0x52554f4b /* RUOK */, 0x6b6f7572, -0x000bff03 /* telnet 0xfff4fffd */} {
		if w, ok := FourLetterWord(n); ok || w != "" {
			t.Errorf("FourLetterWord(%#x) = %q, true", n, w)
		}
	}
}

func TestScalarStrings(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{Op(42), "Op(42)"},
		{OpGetChildren2, "getChildren2"},
		{OpCloseSession, "closeSession"},
		{ErrNoNode, "NoNode"},
		{ErrCode(-999), "ErrCode(-999)"},
		{ErrSessionClosedRequireSaslAuth, "SessionClosedRequireSaslAuth"},
		{Zxid(0x1f), "0x1f"},
		{Zxid(0), "0x0"},
		{Zxid(-1), "-0x1"},
		{SessionID(0x1f), "0x000000000000001f"},
		{SessionID(-1), "0xffffffffffffffff"},
		{SessionID(-0x7edcba9876543210), "0x8123456789abcdf0"},
		{Xid(5), "5"},
		{XidPing, "ping"},
		{XidNotification, "notification"},
		{XidAuth, "auth"},
		{XidSetWatches, "setWatches"},
		{EventNodeChildrenChanged, "NodeChildrenChanged"},
		{EventType(9), "EventType(9)"},
		{StateExpired, "Expired"},
		{StateSyncConnected, "SyncConnected"},
		{KeeperState(2), "KeeperState(2)"},
		{ModeEphemeralSequential, "EphemeralSequential"},
		{CreateMode(7), "CreateMode(7)"},
		{WatcherPersistentRecursive, "PersistentRecursive"},
		{WatcherType(0), "WatcherType(0)"},
		{AddWatchPersistent, "Persistent"},
		{AddWatchMode(2), "AddWatchMode(2)"},
		{PermAll, "cdrwa"},
		{PermRead, "r"},
		{PermRead | PermAdmin, "ra"},
		{Perm(0), "none"},
		{Perm(0x41), "r|0x40"},
		{Perm(-1), "cdrwa|0xffffffe0"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T(%d).String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
	// Every named error code's String is its name, and Error wraps it.
	for code, name := range errNames {
		if want := fmt.Sprintf("zk: %s (%d)", name, int32(code)); code.Error() != want {
			t.Errorf("Error() = %q, want %q", code.Error(), want)
		}
	}
	if got := ErrNoNode.Error(); got != "zk: NoNode (-101)" {
		t.Errorf("ErrNoNode.Error() = %q", got)
	}
	var err error = fmt.Errorf("get /a: %w", ErrNoNode)
	var code ErrCode
	if !errors.As(err, &code) || code != ErrNoNode || !errors.Is(err, ErrNoNode) {
		t.Error("ErrCode does not work with errors.As/Is")
	}
	if len(errNames) != 32 {
		t.Errorf("%d error codes named, want 32", len(errNames))
	}
}

func TestCreateMode(t *testing.T) {
	tests := []struct {
		m                               CreateMode
		valid, eph, seq, container, ttl bool
	}{
		{ModePersistent, true, false, false, false, false},
		{ModeEphemeral, true, true, false, false, false},
		{ModePersistentSequential, true, false, true, false, false},
		{ModeEphemeralSequential, true, true, true, false, false},
		{ModeContainer, true, false, false, true, false},
		{ModePersistentWithTTL, true, false, false, false, true},
		{ModePersistentSequentialWithTTL, true, false, true, false, true},
		{-1, false, false, false, false, false},
		{7, false, false, false, false, false},
	}
	for _, tt := range tests {
		got := [5]bool{tt.m.Valid(), tt.m.IsEphemeral(), tt.m.IsSequential(), tt.m.IsContainer(), tt.m.IsTTL()}
		want := [5]bool{tt.valid, tt.eph, tt.seq, tt.container, tt.ttl}
		if got != want {
			t.Errorf("%v: valid/eph/seq/container/ttl = %v, want %v", tt.m, got, want)
		}
	}
}

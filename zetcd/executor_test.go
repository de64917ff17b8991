package zetcd

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

// recordingHandler records which Handler method was called.
type recordingHandler struct{ called string }

func (h *recordingHandler) Create(context.Context, *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	h.called = "Create"
	return &encoding.CreateResponse{}, 0, nil
}
func (h *recordingHandler) Create2(context.Context, *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	h.called = "Create2"
	return &encoding.Create2Response{}, 0, nil
}
func (h *recordingHandler) Delete(context.Context, *encoding.DeleteRequest) (encoding.Zxid, error) {
	h.called = "Delete"
	return 0, nil
}
func (h *recordingHandler) Exists(context.Context, *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	h.called = "Exists"
	return &encoding.ExistsResponse{}, 0, nil
}
func (h *recordingHandler) GetData(context.Context, *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	h.called = "GetData"
	return &encoding.GetDataResponse{}, 0, nil
}
func (h *recordingHandler) SetData(context.Context, *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
	h.called = "SetData"
	return &encoding.SetDataResponse{}, 0, nil
}
func (h *recordingHandler) GetACL(context.Context, *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	h.called = "GetACL"
	return &encoding.GetACLResponse{}, 0, nil
}
func (h *recordingHandler) SetACL(context.Context, *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	h.called = "SetACL"
	return &encoding.SetACLResponse{}, 0, nil
}
func (h *recordingHandler) GetChildren(context.Context, *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	h.called = "GetChildren"
	return &encoding.GetChildrenResponse{}, 0, nil
}
func (h *recordingHandler) GetChildren2(context.Context, *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	h.called = "GetChildren2"
	return &encoding.GetChildren2Response{}, 0, nil
}
func (h *recordingHandler) Sync(context.Context, *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	h.called = "Sync"
	return &encoding.SyncResponse{}, 0, nil
}
func (h *recordingHandler) SetWatches(context.Context, *encoding.SetWatches) (encoding.Zxid, error) {
	h.called = "SetWatches"
	return 0, nil
}
func (h *recordingHandler) SetWatches2(context.Context, *encoding.SetWatches2) (encoding.Zxid, error) {
	h.called = "SetWatches2"
	return 0, nil
}
func (h *recordingHandler) AddWatch(context.Context, *encoding.AddWatchRequest) (encoding.Zxid, error) {
	h.called = "AddWatch"
	return 0, nil
}
func (h *recordingHandler) CheckWatches(context.Context, *encoding.CheckWatchesRequest) (encoding.Zxid, error) {
	h.called = "CheckWatches"
	return 0, nil
}
func (h *recordingHandler) RemoveWatches(context.Context, *encoding.RemoveWatchesRequest) (encoding.Zxid, error) {
	h.called = "RemoveWatches"
	return 0, nil
}
func (h *recordingHandler) Multi(context.Context, *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	h.called = "Multi"
	return &encoding.MultiResponse{}, 0, nil
}
func (h *recordingHandler) MultiRead(context.Context, *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	h.called = "MultiRead"
	return &encoding.MultiResponse{}, 0, nil
}
func (h *recordingHandler) CreateContainer(context.Context, *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	h.called = "CreateContainer"
	return &encoding.Create2Response{}, 0, nil
}
func (h *recordingHandler) CreateTTL(context.Context, *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	h.called = "CreateTTL"
	return &encoding.Create2Response{}, 0, nil
}
func (h *recordingHandler) DeleteContainer(context.Context, *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	h.called = "DeleteContainer"
	return 0, nil
}
func (h *recordingHandler) GetEphemerals(context.Context, *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	h.called = "GetEphemerals"
	return &encoding.GetEphemeralsResponse{}, 0, nil
}
func (h *recordingHandler) GetAllChildrenNumber(context.Context, *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	h.called = "GetAllChildrenNumber"
	return &encoding.GetAllChildrenNumberResponse{}, 0, nil
}
func (h *recordingHandler) WhoAmI(context.Context, *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	h.called = "WhoAmI"
	return &encoding.WhoAmIResponse{}, 0, nil
}
func (h *recordingHandler) Reconfig(context.Context, *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	h.called = "Reconfig"
	return &encoding.GetDataResponse{}, 0, nil
}
func (h *recordingHandler) Sasl(context.Context, *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	h.called = "Sasl"
	return &encoding.SetSASLResponse{}, 0, nil
}
func (h *recordingHandler) Auth(context.Context, *encoding.AuthPacket) (encoding.Zxid, error) {
	h.called = "Auth"
	return 0, nil
}

var _ Handler = (*recordingHandler)(nil)

// TestServerDispatchTable is the opcode-completeness test: it lists the opcodes dispatched to
// Handler methods and checks every other opcode is answered Unimplemented. Adding a Handler
// method means adding its opcode here and a row to dispatchTable.
func TestServerDispatchTable(t *testing.T) {
	want := map[encoding.Op]string{
		encoding.OpCreate:       "Create",
		encoding.OpDelete:       "Delete",
		encoding.OpExists:       "Exists",
		encoding.OpGetData:      "GetData",
		encoding.OpSetData:      "SetData",
		encoding.OpGetACL:       "GetACL",
		encoding.OpSetACL:       "SetACL",
		encoding.OpGetChildren:  "GetChildren",
		encoding.OpSync:         "Sync",
		encoding.OpGetChildren2: "GetChildren2",
		encoding.OpCreate2:      "Create2",

		encoding.OpSetWatches:           "SetWatches",
		encoding.OpSetWatches2:          "SetWatches2",
		encoding.OpAddWatch:             "AddWatch",
		encoding.OpCheckWatches:         "CheckWatches",
		encoding.OpRemoveWatches:        "RemoveWatches",
		encoding.OpMulti:                "Multi",
		encoding.OpMultiRead:            "MultiRead",
		encoding.OpCreateContainer:      "CreateContainer",
		encoding.OpCreateTTL:            "CreateTTL",
		encoding.OpDeleteContainer:      "DeleteContainer",
		encoding.OpGetEphemerals:        "GetEphemerals",
		encoding.OpGetAllChildrenNumber: "GetAllChildrenNumber",
		encoding.OpWhoAmI:               "WhoAmI",
		encoding.OpReconfig:             "Reconfig",
		encoding.OpSasl:                 "Sasl",
		encoding.OpAuth:                 "Auth",
	}
	for op := range dispatchTable {
		if _, ok := want[op]; !ok {
			t.Errorf("%v is dispatched but not listed here", op)
		}
	}
	var dispatched []string
	for op, method := range want {
		fn, ok := dispatchTable[op]
		if !ok {
			t.Errorf("%v (%d) is not dispatched", op, op)
			continue
		}
		dispatched = append(dispatched, fmt.Sprintf("%v(%d)", op, op))
		req, ok := encoding.NewRequest(op)
		if !ok {
			t.Errorf("%v: encoding has no request record", op)
			continue
		}
		h := &recordingHandler{}
		if _, _, err := fn(context.Background(), h, req); err != nil {
			t.Errorf("%v: dispatch: %v", op, err)
		}
		if h.called != method {
			t.Errorf("%v dispatched to %q, want %q", op, h.called, method)
		}
	}
	slices.Sort(dispatched)
	t.Logf("dispatched opcodes: %s", strings.Join(dispatched, " "))

	for op := encoding.Op(-20); op <= 200; op++ {
		if _, ok := want[op]; ok || op == encoding.OpPing || op == encoding.OpCloseSession {
			continue
		}
		if op == encoding.OpCreateSession {
			// Refused as ZooKeeper refuses it: MarshallingError at a zxid of its own.
			r := &pendingRequest{hdr: encoding.RequestHeader{Op: op}}
			if parseRequestBody(r, nil); r.kind != requestRefusedWrite {
				t.Errorf("%v: kind %d, want refused write", op, r.kind)
			}
			continue
		}
		r := &pendingRequest{hdr: encoding.RequestHeader{Op: op}}
		parseRequestBody(r, nil)
		if r.kind != requestUnimplemented {
			t.Errorf("%v: kind %d, want unimplemented", op, r.kind)
		}
	}
}

// TestParseRequestBodyRefusals: bad bodies ZooKeeper does not answer with MarshallingError.
// A null string (length -1) is whatever ZooKeeper's code makes of a null there: MarshallingError
// in reads and delete, the empty string as setData's and setACL's path, and, in sync, creates and
// setACL's ACL, encoding.NullString for the store to answer; deleteContainer and a createSession
// holding a timeout close the connection.
func TestParseRequestBodyRefusals(t *testing.T) {
	nullPath := []byte{0xff, 0xff, 0xff, 0xff}
	for _, c := range []struct {
		name string
		op   encoding.Op
		body []byte
		want requestKind
		path string // the path the request is dispatched with
	}{
		{name: "createSession, empty", op: encoding.OpCreateSession, want: requestRefusedWrite},
		{"createSession, a timeout", encoding.OpCreateSession, []byte{0, 0, 0x27, 0x10}, requestDrop, ""},
		{"deleteContainer, cut short", encoding.OpDeleteContainer, []byte{0, 0}, requestDrop, ""},
		{"exists, null path", encoding.OpExists, append(nullPath, 0), requestBadBody, ""},
		{"delete, null path", encoding.OpDelete, append(nullPath, 0, 0, 0, 0), requestBadBody, ""},
		{"create, null path", encoding.OpCreate, append(nullPath, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), requestDispatch, encoding.NullString},
		{"sync, null path", encoding.OpSync, nullPath, requestDispatch, encoding.NullString},
		{"setData, null path", encoding.OpSetData, append(nullPath, 0, 0, 0, 0, 0, 0, 0, 0), requestDispatch, ""},
		{"setACL, null path", encoding.OpSetACL, append(nullPath, 0, 0, 0, 0, 0, 0, 0, 0), requestDispatch, ""},
		{"setACL, null ACL id", encoding.OpSetACL, append([]byte{0, 0, 0, 2, '/', 'p', 0, 0, 0, 1, 0, 0, 0, 31, 0, 0, 0, 5, 'w', 'o', 'r', 'l', 'd'}, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), requestDispatch, "/p"},
		{"exists, empty path", encoding.OpExists, []byte{0, 0, 0, 0, 0}, requestDispatch, ""},
	} {
		r := &pendingRequest{hdr: encoding.RequestHeader{Op: c.op}}
		if parseRequestBody(r, c.body); r.kind != c.want {
			t.Errorf("%s: kind %d, want %d (err %v)", c.name, r.kind, c.want, r.err)
		}
		if r.kind != requestDispatch {
			continue
		}
		if path := reflect.ValueOf(r.body).Elem().FieldByName("Path").String(); path != c.path {
			t.Errorf("%s: dispatched with path %q, want %q", c.name, path, c.path)
		}
	}
}

package encoding

import "fmt"

// multiEnd terminates the op list of a multi request and the result list of
// a multi response.
var multiEnd = MultiHeader{Type: OpError, Done: true, Err: -1}

// MultiOp is one operation of a multi (14) or multiRead (22) request.
type MultiOp struct {
	Op     Op
	Record Record
}

// MultiRequest is the body of multi and multiRead: each op as a MultiHeader
// followed by its request record, then a terminating header with Done set.
//
// Decode accepts the op types allowed in either request: create (1),
// create2 (15) and createContainer (19) as *CreateRequest, createTTL (21) as
// *CreateTTLRequest, delete (2) as *DeleteRequest, setData (5) as
// *SetDataRequest, check (13) as *CheckVersionRequest, getChildren (8) as
// *GetChildrenRequest and getData (4) as *GetDataRequest. Whether the mix is
// allowed (reads only in multiRead, writes only in multi) is for the server
// to decide. Any other type fails with ErrBadMultiOp; input that ends before
// the terminator fails with ErrShortBuffer. As in ZooKeeper, decoding stops
// at the first header with Done set, whatever its other fields say.
type MultiRequest struct {
	Ops []MultiOp
}

// Encode writes each op with header {Op, false, -1}, as the Java client
// does, then the terminator. A nil Record writes no body.
func (r *MultiRequest) Encode(e *Encoder) {
	for _, op := range r.Ops {
		h := MultiHeader{Type: op.Op, Done: false, Err: -1}
		h.Encode(e)
		if op.Record != nil {
			op.Record.Encode(e)
		}
	}
	end := multiEnd
	end.Encode(e)
}

func (r *MultiRequest) Decode(d *Decoder) {
	r.Ops = nil
	var ops []MultiOp
	for {
		// Every iteration consumes at least a 9-byte header, so the op
		// count is bounded by the input size.
		var h MultiHeader
		h.Decode(d)
		if d.Err() != nil {
			return
		}
		if h.Done {
			break
		}
		var rec Record
		switch h.Type {
		case OpCreate, OpCreate2, OpCreateContainer:
			rec = &CreateRequest{}
		case OpCreateTTL:
			rec = &CreateTTLRequest{}
		case OpDelete:
			rec = &DeleteRequest{}
		case OpSetData:
			rec = &SetDataRequest{}
		case OpCheck:
			rec = &CheckVersionRequest{}
		case OpGetChildren:
			rec = &GetChildrenRequest{}
		case OpGetData:
			rec = &GetDataRequest{}
		default:
			d.Fail(fmt.Errorf("%w: request op %v", ErrBadMultiOp, h.Type))
			return
		}
		rec.Decode(d)
		if d.Err() != nil {
			return
		}
		ops = append(ops, MultiOp{Op: h.Type, Record: rec})
	}
	r.Ops = ops
}

// MultiResult is one entry of a multi or multiRead response.
//
// Op is the result type, which is not always the request's op: every
// create variant except create (1) answers with type create2 (15), and a
// failed op answers with OpError. Record by Op:
//
//	OpCreate                  *CreateResponse
//	OpCreate2                 *Create2Response
//	OpDelete, OpCheck         no body: nil (Encode also accepts *Empty)
//	OpSetData                 *SetDataResponse
//	OpGetChildren             *GetChildrenResponse
//	OpGetData                 *GetDataResponse
//	OpError                   nil; the code is Err
//
// Err is the header's err field. For OpError results it is the op's code
// (ErrOK for ops before the failing one in a failed multi,
// ErrRuntimeInconsistency for ops after it); Decode takes it from the
// ErrorResponse body, as ZooKeeper's client does. For other types it is
// ErrOK.
type MultiResult struct {
	Op     Op
	Err    ErrCode
	Record Record
}

// MultiResponse is the body of the reply to multi and multiRead. The
// ReplyHeader of a failed multi still carries ErrOK: clients find the failure
// in the results.
type MultiResponse struct {
	Results []MultiResult
}

// Encode writes each result as MultiHeader{Op, false, Err} and its body,
// then the terminator. For OpError results it writes ErrorResponse{Err}
// itself and ignores Record.
func (r *MultiResponse) Encode(e *Encoder) {
	for _, res := range r.Results {
		h := MultiHeader{Type: res.Op, Done: false, Err: res.Err}
		h.Encode(e)
		switch {
		case res.Op == OpError:
			er := ErrorResponse{Err: res.Err}
			er.Encode(e)
		case res.Record != nil:
			res.Record.Encode(e)
		}
	}
	end := multiEnd
	end.Encode(e)
}

// Decode reads results until a header with Done set. A result type not in
// the table on MultiResult fails with ErrBadMultiOp.
func (r *MultiResponse) Decode(d *Decoder) {
	r.Results = nil
	var results []MultiResult
	for {
		var h MultiHeader
		h.Decode(d)
		if d.Err() != nil {
			return
		}
		if h.Done {
			break
		}
		res := MultiResult{Op: h.Type, Err: h.Err}
		switch h.Type {
		case OpCreate:
			res.Record = &CreateResponse{}
		case OpCreate2:
			res.Record = &Create2Response{}
		case OpDelete, OpCheck:
			// no body
		case OpSetData:
			res.Record = &SetDataResponse{}
		case OpGetChildren:
			res.Record = &GetChildrenResponse{}
		case OpGetData:
			res.Record = &GetDataResponse{}
		case OpError:
			var er ErrorResponse
			er.Decode(d)
			res.Err = er.Err
		default:
			d.Fail(fmt.Errorf("%w: result type %v", ErrBadMultiOp, h.Type))
			return
		}
		if res.Record != nil {
			res.Record.Decode(d)
		}
		if d.Err() != nil {
			return
		}
		results = append(results, res)
	}
	r.Results = results
}

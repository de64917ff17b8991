package zetcd

import (
	"context"
	"fmt"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// Invoker serves one request given its opcode: the shape of a dispatchTable row with the
// Handler bound. req is of the type encoding.NewRequest returns for op; the response is the
// reply body the server writes (nil for a header-only reply). The error means what a Handler
// method's error means.
//
// Decorators that treat every request alike (metrics, logging, cross-checking) are an Invoker
// wrapped around Call(inner), turned back into a Session by Forward.
type Invoker func(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error)

// Call returns the Invoker that calls h's method for op through dispatchTable, exactly as the
// executor does: AddWatch answers with its ErrorResponse{0} body, a method that returns
// neither a response nor an error breaks the Handler contract and yields an error, and an op
// without a row yields ErrUnimplemented.
func Call(h Handler) Invoker {
	return func(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
		row, ok := dispatchTable[op]
		if !ok {
			return nil, 0, encoding.ErrUnimplemented
		}
		return row(ctx, h, req)
	}
}

// Forward returns a Session whose Handler methods call inv with their opcode and request, and
// convert its response back to the method's type; its other methods (ID, Password, Timeout,
// AwaitEvents, LastZxid, RefuseWrite, Close, Expire, Done, Err, AfterDone, Detach, AddAuthIDs,
// ReadyToRead) call inner's. For every Session s that keeps the Handler contract,
// Forward(s, Call(s)) behaves exactly like s. A decorator whose Invoker may block on more than
// inner does overrides ReadyToRead.
//
// This is the only hand-written forwarder of the 27 opcodes: a decorator embeds the Session
// Forward returns and overrides only the life-cycle methods it cares about. Adding a Handler
// method breaks the build here until it is forwarded.
//
// The header-only methods (Delete, SetWatches, SetWatches2, AddWatch, CheckWatches,
// RemoveWatches, DeleteContainer, Auth) ignore any body inv returns, so an Invoker may answer
// AddWatch with or without its ErrorResponse{0}. For the others, a body of the wrong type is a
// Go error (the server closes the connection).
func Forward(inner Session, inv Invoker) Session {
	return &forwarded{inner: inner, inv: inv}
}

// forwarded is what Forward returns. It embeds nothing, so that a Handler method it lacks is a
// build error rather than a silent bypass of inv.
type forwarded struct {
	inner Session
	inv   Invoker
}

var _ Session = (*forwarded)(nil)

// withResp calls inv for a method whose success reply has a body of type R.
func withResp[R encoding.Record](ctx context.Context, inv Invoker, op encoding.Op, req encoding.Record) (R, encoding.Zxid, error) {
	var zero R
	resp, zxid, err := inv(ctx, op, req)
	if err != nil || resp == nil {
		return zero, zxid, err
	}
	r, ok := resp.(R)
	if !ok {
		return zero, zxid, fmt.Errorf("forward: %v response is %T, want %T", op, resp, zero)
	}
	return r, zxid, nil
}

// noResp calls inv for a header-only method; the body, if any, is dropped.
func noResp(ctx context.Context, inv Invoker, op encoding.Op, req encoding.Record) (encoding.Zxid, error) {
	_, zxid, err := inv(ctx, op, req)
	return zxid, err
}

// Life cycle: inner's.

func (f *forwarded) ID() encoding.SessionID { return f.inner.ID() }
func (f *forwarded) Password() []byte       { return f.inner.Password() }
func (f *forwarded) Timeout() time.Duration { return f.inner.Timeout() }

func (f *forwarded) AwaitEvents(ctx context.Context, zxid encoding.Zxid) error {
	return f.inner.AwaitEvents(ctx, zxid)
}

func (f *forwarded) LastZxid() encoding.Zxid { return f.inner.LastZxid() }

func (f *forwarded) RefuseWrite(ctx context.Context, op encoding.Op) (encoding.Zxid, error) {
	return f.inner.RefuseWrite(ctx, op)
}

func (f *forwarded) Close(ctx context.Context) (encoding.Zxid, error) { return f.inner.Close(ctx) }
func (f *forwarded) Expire(ctx context.Context) error                 { return f.inner.Expire(ctx) }
func (f *forwarded) Done() <-chan struct{}                            { return f.inner.Done() }
func (f *forwarded) Err() error                                       { return f.inner.Err() }
func (f *forwarded) Detach()                                          { f.inner.Detach() }
func (f *forwarded) AddAuthIDs(ids []encoding.ID)                     { f.inner.AddAuthIDs(ids) }
func (f *forwarded) ReadyToRead() bool                                { return f.inner.ReadyToRead() }

func (f *forwarded) AfterDone(fn func()) (stop func() bool) { return f.inner.AfterDone(fn) }

// The Handler: one line per opcode.

func (f *forwarded) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	return withResp[*encoding.CreateResponse](ctx, f.inv, encoding.OpCreate, req)
}

func (f *forwarded) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return withResp[*encoding.Create2Response](ctx, f.inv, encoding.OpCreate2, req)
}

func (f *forwarded) Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpDelete, req)
}

func (f *forwarded) Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	return withResp[*encoding.ExistsResponse](ctx, f.inv, encoding.OpExists, req)
}

func (f *forwarded) GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	return withResp[*encoding.GetDataResponse](ctx, f.inv, encoding.OpGetData, req)
}

func (f *forwarded) SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
	return withResp[*encoding.SetDataResponse](ctx, f.inv, encoding.OpSetData, req)
}

func (f *forwarded) GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	return withResp[*encoding.GetACLResponse](ctx, f.inv, encoding.OpGetACL, req)
}

func (f *forwarded) SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	return withResp[*encoding.SetACLResponse](ctx, f.inv, encoding.OpSetACL, req)
}

func (f *forwarded) GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	return withResp[*encoding.GetChildrenResponse](ctx, f.inv, encoding.OpGetChildren, req)
}

func (f *forwarded) GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	return withResp[*encoding.GetChildren2Response](ctx, f.inv, encoding.OpGetChildren2, req)
}

func (f *forwarded) Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	return withResp[*encoding.SyncResponse](ctx, f.inv, encoding.OpSync, req)
}

func (f *forwarded) SetWatches(ctx context.Context, req *encoding.SetWatches) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpSetWatches, req)
}

func (f *forwarded) SetWatches2(ctx context.Context, req *encoding.SetWatches2) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpSetWatches2, req)
}

func (f *forwarded) AddWatch(ctx context.Context, req *encoding.AddWatchRequest) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpAddWatch, req)
}

func (f *forwarded) CheckWatches(ctx context.Context, req *encoding.CheckWatchesRequest) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpCheckWatches, req)
}

func (f *forwarded) RemoveWatches(ctx context.Context, req *encoding.RemoveWatchesRequest) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpRemoveWatches, req)
}

func (f *forwarded) Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	return withResp[*encoding.MultiResponse](ctx, f.inv, encoding.OpMulti, req)
}

func (f *forwarded) MultiRead(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	return withResp[*encoding.MultiResponse](ctx, f.inv, encoding.OpMultiRead, req)
}

func (f *forwarded) CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return withResp[*encoding.Create2Response](ctx, f.inv, encoding.OpCreateContainer, req)
}

func (f *forwarded) CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return withResp[*encoding.Create2Response](ctx, f.inv, encoding.OpCreateTTL, req)
}

func (f *forwarded) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpDeleteContainer, req)
}

func (f *forwarded) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	return withResp[*encoding.GetEphemeralsResponse](ctx, f.inv, encoding.OpGetEphemerals, req)
}

func (f *forwarded) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	return withResp[*encoding.GetAllChildrenNumberResponse](ctx, f.inv, encoding.OpGetAllChildrenNumber, req)
}

func (f *forwarded) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	return withResp[*encoding.WhoAmIResponse](ctx, f.inv, encoding.OpWhoAmI, req)
}

func (f *forwarded) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	return withResp[*encoding.GetDataResponse](ctx, f.inv, encoding.OpReconfig, req)
}

func (f *forwarded) Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	return withResp[*encoding.SetSASLResponse](ctx, f.inv, encoding.OpSasl, req)
}

func (f *forwarded) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	return noResp(ctx, f.inv, encoding.OpAuth, req)
}

package zetcd

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// WrapBackend decorates b so that every request its sessions serve is counted by opcode and
// outcome and timed, every etcd round trip it makes is attributed to its opcode (through the
// context, for a WrapKV decorator to count), and the sessions it serves are counted. Pings,
// which the Server answers itself, are not requests here.
//
// The decorator forwards Unwrap, so a Server still finds a StatsSource beneath it.
func (m *Metrics) WrapBackend(b Backend) Backend {
	return &metricsBackend{inner: b, m: m}
}

type metricsBackend struct {
	inner Backend
	m     *Metrics
}

var _ Backend = (*metricsBackend)(nil)

// Unwrap returns the decorated Backend.
func (b *metricsBackend) Unwrap() Backend { return b.inner }

func (b *metricsBackend) Connect(ctx context.Context, p ConnectParams) (Session, error) {
	s, err := b.inner.Connect(WithOpLabel(ctx, OpLabelConnect), p)
	if err != nil {
		return nil, err
	}
	b.m.sessions.Inc()
	return &metricsSession{inner: s, m: b.m}, nil
}

// metricsSession decorates one Session. Every Handler method is spelled out (no embedding), so
// that a new opcode breaks the build here too until it is counted.
type metricsSession struct {
	inner Session
	m     *Metrics
	ended atomic.Bool // the sessions gauge has been decremented for this Session value
}

var _ Session = (*metricsSession)(nil)

// observed calls f for op with the op label on ctx and records the outcome.
func observed[Req, Resp any](s *metricsSession, ctx context.Context, op encoding.Op, req Req,
	f func(context.Context, Req) (Resp, encoding.Zxid, error)) (Resp, encoding.Zxid, error) {
	name := op.String()
	start := time.Now()
	resp, zxid, err := f(WithOpLabel(ctx, name), req)
	s.m.observe(name, start, err)
	return resp, zxid, err
}

// observedHdr is observed for the methods whose success reply is the header alone.
func observedHdr[Req any](s *metricsSession, ctx context.Context, op encoding.Op, req Req,
	f func(context.Context, Req) (encoding.Zxid, error)) (encoding.Zxid, error) {
	name := op.String()
	start := time.Now()
	zxid, err := f(WithOpLabel(ctx, name), req)
	s.m.observe(name, start, err)
	return zxid, err
}

// leave decrements the sessions gauge once per Session value, whichever life-cycle call comes
// first (Detach then a later Expire of the same value is one session leaving).
func (s *metricsSession) leave() {
	if s.ended.CompareAndSwap(false, true) {
		s.m.sessions.Dec()
	}
}

func (s *metricsSession) ID() encoding.SessionID { return s.inner.ID() }
func (s *metricsSession) Password() []byte       { return s.inner.Password() }
func (s *metricsSession) Timeout() time.Duration { return s.inner.Timeout() }

func (s *metricsSession) AwaitEvents(ctx context.Context, zxid encoding.Zxid) error {
	return s.inner.AwaitEvents(ctx, zxid)
}

func (s *metricsSession) Close(ctx context.Context) (encoding.Zxid, error) {
	name := encoding.OpCloseSession.String()
	start := time.Now()
	zxid, err := s.inner.Close(WithOpLabel(ctx, name))
	s.m.observe(name, start, err)
	s.leave()
	return zxid, err
}

func (s *metricsSession) Expire(ctx context.Context) error {
	err := s.inner.Expire(WithOpLabel(ctx, OpLabelExpire))
	s.leave()
	return err
}

func (s *metricsSession) Done() <-chan struct{} { return s.inner.Done() }

func (s *metricsSession) Detach() {
	s.inner.Detach()
	s.leave()
}

func (s *metricsSession) Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpCreate, req, s.inner.Create)
}

func (s *metricsSession) Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpCreate2, req, s.inner.Create2)
}

func (s *metricsSession) Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpDelete, req, s.inner.Delete)
}

func (s *metricsSession) Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpExists, req, s.inner.Exists)
}

func (s *metricsSession) GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpGetData, req, s.inner.GetData)
}

func (s *metricsSession) SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpSetData, req, s.inner.SetData)
}

func (s *metricsSession) GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpGetACL, req, s.inner.GetACL)
}

func (s *metricsSession) SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpSetACL, req, s.inner.SetACL)
}

func (s *metricsSession) GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpGetChildren, req, s.inner.GetChildren)
}

func (s *metricsSession) GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpGetChildren2, req, s.inner.GetChildren2)
}

func (s *metricsSession) Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpSync, req, s.inner.Sync)
}

func (s *metricsSession) SetWatches(ctx context.Context, req *encoding.SetWatches) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpSetWatches, req, s.inner.SetWatches)
}

func (s *metricsSession) SetWatches2(ctx context.Context, req *encoding.SetWatches2) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpSetWatches2, req, s.inner.SetWatches2)
}

func (s *metricsSession) AddWatch(ctx context.Context, req *encoding.AddWatchRequest) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpAddWatch, req, s.inner.AddWatch)
}

func (s *metricsSession) CheckWatches(ctx context.Context, req *encoding.CheckWatchesRequest) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpCheckWatches, req, s.inner.CheckWatches)
}

func (s *metricsSession) RemoveWatches(ctx context.Context, req *encoding.RemoveWatchesRequest) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpRemoveWatches, req, s.inner.RemoveWatches)
}

func (s *metricsSession) Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpMulti, req, s.inner.Multi)
}

func (s *metricsSession) MultiRead(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpMultiRead, req, s.inner.MultiRead)
}

func (s *metricsSession) CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpCreateContainer, req, s.inner.CreateContainer)
}

func (s *metricsSession) CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpCreateTTL, req, s.inner.CreateTTL)
}

func (s *metricsSession) DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpDeleteContainer, req, s.inner.DeleteContainer)
}

func (s *metricsSession) GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpGetEphemerals, req, s.inner.GetEphemerals)
}

func (s *metricsSession) GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpGetAllChildrenNumber, req, s.inner.GetAllChildrenNumber)
}

func (s *metricsSession) WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpWhoAmI, req, s.inner.WhoAmI)
}

func (s *metricsSession) Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpReconfig, req, s.inner.Reconfig)
}

func (s *metricsSession) Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error) {
	return observed(s, ctx, encoding.OpSasl, req, s.inner.Sasl)
}

func (s *metricsSession) Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error) {
	return observedHdr(s, ctx, encoding.OpAuth, req, s.inner.Auth)
}

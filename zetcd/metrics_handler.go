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
	return newMetricsSession(s, b.m), nil
}

// CutOff and ConnectReadOnly make the decorator a ReadOnlyBackend over the decorated one's
// (readOnlyBackendOf), so that read-only sessions are counted too; over a Backend without one,
// it is never cut off.
func (b *metricsBackend) CutOff() bool { return cutOff(b.inner) }

func (b *metricsBackend) ReadOnlyStats() BackendStats { return readOnlyStats(b.inner) }

func (b *metricsBackend) ConnectReadOnly(ctx context.Context, p ConnectParams) (Session, error) {
	s, err := connectReadOnly(WithOpLabel(ctx, OpLabelConnect), b.inner, p)
	if err != nil {
		return nil, err
	}
	b.m.sessions.Inc()
	return newMetricsSession(s, b.m), nil
}

// metricsSession decorates one Session: its Handler methods are Forward's over observe, so a
// new opcode is counted without a change here; it overrides the life-cycle calls that change
// the sessions gauge (Close is also a request: closeSession).
type metricsSession struct {
	Session // Forward(inner, s.observe)
	inner   Session
	call    Invoker // Call(inner)
	m       *Metrics
	ended   atomic.Bool // the sessions gauge has been decremented for this Session value
	// label is the op of the request running; labeled is labeledFrom, the context the requests
	// come with (their connection's), carrying label. Only observe uses them, one request at a
	// time.
	label                requestLabel
	labeledFrom, labeled context.Context
}

var _ Session = (*metricsSession)(nil)

func newMetricsSession(inner Session, m *Metrics) *metricsSession {
	s := &metricsSession{inner: inner, call: Call(inner), m: m}
	s.Session = Forward(inner, s.observe)
	return s
}

// observe calls op's Handler method with the op label on ctx and records the outcome.
func (s *metricsSession) observe(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
	start := time.Now()
	resp, zxid, err := s.call(s.withLabel(ctx, op), op, req)
	s.m.observe(op.String(), start, err)
	return resp, zxid, err
}

// withLabel returns ctx labeled with op (requestLabel), made once per context the requests come
// with.
func (s *metricsSession) withLabel(ctx context.Context, op encoding.Op) context.Context {
	if s.labeled == nil || ctx != s.labeledFrom {
		s.labeledFrom, s.labeled = ctx, context.WithValue(ctx, opLabelKey{}, &s.label)
	}
	s.label.op.Store(int32(op))
	return s.labeled
}

// leave decrements the sessions gauge once per Session value, whichever life-cycle call comes
// first (Detach then a later Expire of the same value is one session leaving).
func (s *metricsSession) leave() {
	if s.ended.CompareAndSwap(false, true) {
		s.m.sessions.Dec()
	}
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

func (s *metricsSession) Detach() {
	s.inner.Detach()
	s.leave()
}

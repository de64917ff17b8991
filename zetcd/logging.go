package zetcd

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zetcd/zetcd/encoding"
)

// WithLogging decorates b so that every request its sessions serve (closeSession included) is
// logged on log:
//
//   - at Debug, every request: session, op, path (when the request names one; a multi's paths
//     comma-separated), zxid, ZooKeeper code and latency. A ZooKeeper error (NoNode,
//     NodeExists, ...) is a client's ordinary business and never logged above Debug;
//   - at Warn, a request that failed with a Go error, not a ZooKeeper code: the server closes
//     the connection without answering (the session survives). A cancelled context is the
//     connection closing, not a failure, and stays at Debug.
//
// Pings, which the Server answers itself, are not requests here. The decorator forwards
// Unwrap, so a Server still finds a StatsSource beneath it.
func WithLogging(b Backend, log *zap.Logger) Backend {
	return &loggingBackend{inner: b, log: log}
}

type loggingBackend struct {
	inner Backend
	log   *zap.Logger
}

var _ Backend = (*loggingBackend)(nil)

// Unwrap returns the decorated Backend.
func (b *loggingBackend) Unwrap() Backend { return b.inner }

func (b *loggingBackend) Connect(ctx context.Context, p ConnectParams) (Session, error) {
	s, err := b.inner.Connect(ctx, p)
	if err != nil {
		return nil, err
	}
	return b.decorate(s), nil
}

// CutOff and ConnectReadOnly make the decorator a ReadOnlyBackend over the decorated one's
// (readOnlyBackendOf), so that read-only sessions are logged too; over a Backend without one,
// it is never cut off.
func (b *loggingBackend) CutOff() bool { return cutOff(b.inner) }

func (b *loggingBackend) ReadOnlyStats() BackendStats { return readOnlyStats(b.inner) }

func (b *loggingBackend) ConnectReadOnly(ctx context.Context, p ConnectParams) (Session, error) {
	s, err := connectReadOnly(ctx, b.inner, p)
	if err != nil {
		return nil, err
	}
	return b.decorate(s), nil
}

func (b *loggingBackend) decorate(s Session) Session {
	ls := &loggingSession{inner: s, call: Call(s), log: b.log.With(zap.Stringer("session", s.ID()))}
	ls.Session = Forward(s, ls.invoke)
	return ls
}

// loggingSession logs the requests of one Session: its Handler methods are Forward's over
// invoke; Close is overridden because closeSession is a request too.
type loggingSession struct {
	Session // Forward(inner, s.invoke)
	inner   Session
	call    Invoker     // Call(inner)
	log     *zap.Logger // with the session field; read-only
}

var _ Session = (*loggingSession)(nil)

func (s *loggingSession) invoke(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
	start := time.Now()
	resp, zxid, err := s.call(ctx, op, req)
	s.logRequest(op, req, zxid, err, time.Since(start))
	return resp, zxid, err
}

func (s *loggingSession) Close(ctx context.Context) (encoding.Zxid, error) {
	start := time.Now()
	zxid, err := s.inner.Close(ctx)
	s.logRequest(encoding.OpCloseSession, nil, zxid, err, time.Since(start))
	return zxid, err
}

// logRequest logs one request's outcome at the level WithLogging documents. The fields are
// only built when the entry will be written.
func (s *loggingSession) logRequest(op encoding.Op, req encoding.Record, zxid encoding.Zxid, err error, took time.Duration) {
	code, isCode := errCode(err)
	level := zapcore.DebugLevel
	if err != nil && !isCode && !errors.Is(err, context.Canceled) {
		level = zapcore.WarnLevel
	}
	ce := s.log.Check(level, "request")
	if ce == nil {
		return
	}
	fields := []zap.Field{zap.Stringer("op", op)}
	if path := RequestPath(req); path != "" {
		fields = append(fields, zap.String("path", path))
	}
	fields = append(fields, zap.Stringer("zxid", zxid), zap.Duration("latency", took))
	switch {
	case err == nil:
		fields = append(fields, zap.Stringer("code", encoding.ErrOK))
	case isCode:
		fields = append(fields, zap.Stringer("code", code))
	default:
		fields = append(fields, zap.Error(err))
	}
	ce.Write(fields...)
}

// RequestPath is the path a request names, or "", for log lines; a multi names the paths of
// its ops, comma-separated. Every request record spells its path Path, or PrefixPath
// (getEphemerals).
func RequestPath(req encoding.Record) string {
	if m, ok := req.(*encoding.MultiRequest); ok {
		paths := make([]string, len(m.Ops))
		for i, op := range m.Ops {
			paths[i] = RequestPath(op.Record)
		}
		return strings.Join(paths, ",")
	}
	v := reflect.ValueOf(req)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	for _, name := range []string{"Path", "PrefixPath"} {
		if f := v.Elem().FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
			return f.String()
		}
	}
	return ""
}

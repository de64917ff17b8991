package zetcd

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
)

// pathBackend serves sessions (ID 0x42, see lifecycleSession) whose every request answers by
// path: "/missing" NoNode, "/broken" a Go error, "/cancelled" context.Canceled, else success
// at zxid 7.
type pathBackend struct{}

func (pathBackend) Connect(ctx context.Context, p ConnectParams) (Session, error) {
	s := &lifecycleSession{done: make(chan struct{})}
	s.Session = Forward(s, func(_ context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
		switch RequestPath(req) {
		case "/missing":
			return nil, 7, encoding.ErrNoNode
		case "/broken":
			return nil, 0, errors.New("etcd unreachable")
		case "/cancelled":
			return nil, 0, context.Canceled
		}
		resp, _ := encoding.NewResponse(op)
		return resp, 7, nil
	})
	return s, nil
}

// loggedSession connects through WithLogging on an observer at level.
func loggedSession(t *testing.T, level zapcore.Level) (Session, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(level)
	b := WithLogging(pathBackend{}, zap.New(core))
	if u, ok := b.(unwrapper); !ok || u.Unwrap() != (pathBackend{}) {
		t.Fatal("WithLogging does not Unwrap to the decorated Backend")
	}
	s, err := b.Connect(context.Background(), ConnectParams{})
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// TestLoggingDebug: every request is one Debug entry with session, op, path, zxid, code and
// latency; ZooKeeper errors stay at Debug, a Go error is a Warn with the error.
func TestLoggingDebug(t *testing.T) {
	ctx := context.Background()
	s, logs := loggedSession(t, zapcore.DebugLevel)
	s.Create(ctx, &encoding.CreateRequest{Path: "/a"})
	s.GetData(ctx, &encoding.GetDataRequest{Path: "/missing"})
	s.Delete(ctx, &encoding.DeleteRequest{Path: "/broken"})
	s.Exists(ctx, &encoding.ExistsRequest{Path: "/cancelled"})
	s.Multi(ctx, &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/m1"}},
		{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: "/m2"}},
	}})
	s.WhoAmI(ctx, &encoding.Empty{})
	s.Close(ctx)

	want := []struct {
		level zapcore.Level
		op    string
		path  string
		code  string // "" when the entry carries an error instead
	}{
		{zapcore.DebugLevel, "create", "/a", "OK"},
		{zapcore.DebugLevel, "getData", "/missing", "NoNode"},
		{zapcore.WarnLevel, "delete", "/broken", ""},
		{zapcore.DebugLevel, "exists", "/cancelled", ""},
		{zapcore.DebugLevel, "multi", "/m1,/m2", "OK"},
		{zapcore.DebugLevel, "whoAmI", "", "OK"},
		{zapcore.DebugLevel, "closeSession", "", "OK"},
	}
	entries := logs.All()
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e, f := entries[i], entries[i].ContextMap()
		if e.Level != w.level || f["op"] != w.op || f["session"] != encoding.SessionID(0x42).String() {
			t.Errorf("entry %d: %v %v (session %v), want %v %v", i, e.Level, f["op"], f["session"], w.level, w.op)
		}
		if p, ok := f["path"]; (w.path == "" && ok) || (w.path != "" && p != w.path) {
			t.Errorf("entry %d (%v): path %v, want %q", i, w.op, p, w.path)
		}
		if _, ok := f["latency"]; !ok {
			t.Errorf("entry %d (%v): no latency", i, w.op)
		}
		if _, ok := f["zxid"]; !ok {
			t.Errorf("entry %d (%v): no zxid", i, w.op)
		}
		if w.code != "" && f["code"] != w.code {
			t.Errorf("entry %d (%v): code %v, want %v", i, w.op, f["code"], w.code)
		}
		if _, hasErr := f["error"]; w.code == "" && !hasErr {
			t.Errorf("entry %d (%v): no error field", i, w.op)
		}
	}
}

// TestLoggingQuietAtInfo: above Debug only Go errors are logged; a client's ZooKeeper errors
// and cancellations are not.
func TestLoggingQuietAtInfo(t *testing.T) {
	ctx := context.Background()
	s, logs := loggedSession(t, zapcore.InfoLevel)
	s.Create(ctx, &encoding.CreateRequest{Path: "/a"})
	s.GetData(ctx, &encoding.GetDataRequest{Path: "/missing"})
	s.Exists(ctx, &encoding.ExistsRequest{Path: "/cancelled"})
	s.SetData(ctx, &encoding.SetDataRequest{Path: "/broken"})
	entries := logs.All()
	if len(entries) != 1 || entries[0].Level != zapcore.WarnLevel || entries[0].ContextMap()["op"] != "setData" {
		t.Fatalf("entries %+v, want one Warn for setData", entries)
	}
	if got := entries[0].ContextMap()["error"]; got != "etcd unreachable" {
		t.Errorf("error field %v", got)
	}
}

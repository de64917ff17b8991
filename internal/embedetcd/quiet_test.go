package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestQuiet: Quiet brings cancellations and the etcd client's per-call retry report down to
// debug, without their stack traces, and leaves every other entry as it was.
func TestQuiet(t *testing.T) {
	for _, min := range []zapcore.Level{zapcore.DebugLevel, zapcore.WarnLevel} {
		core, logs := observer.New(min)
		l := Quiet(zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel)))
		cancelled := fmt.Errorf("applyTxn: failed Range: %w", context.Canceled)
		l.Error("unexpected error during readonly txn", zap.Error(cancelled))
		l.With(zap.String("k", "v")).Warn("retrying of unary invoker failed", zap.Error(errors.New("etcdserver: request is too large")))
		l.Error("a real failure", zap.Error(errors.New("disk full")))
		l.Warn("slow", zap.Duration("took", 1))
		l.Info("started")

		type entry struct {
			level zapcore.Level
			msg   string
			stack bool
		}
		var got []entry
		for _, e := range logs.All() {
			got = append(got, entry{e.Level, e.Message, e.Stack != ""})
		}
		want := []entry{
			{zapcore.DebugLevel, "unexpected error during readonly txn", false},
			{zapcore.DebugLevel, "retrying of unary invoker failed", false},
			{zapcore.ErrorLevel, "a real failure", true},
			{zapcore.WarnLevel, "slow", false},
			{zapcore.InfoLevel, "started", false},
		}
		if min == zapcore.WarnLevel {
			want = []entry{want[2], want[3]}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("level %v: logged %v, want %v", min, got, want)
		}
		if min == zapcore.DebugLevel && logs.All()[1].ContextMap()["k"] != "v" {
			t.Errorf("fields added by With lost: %v", logs.All()[1].ContextMap())
		}
	}
}

// stringerFunc is a fmt.Stringer that records being called.
type stringerFunc func() string

func (f stringerFunc) String() string { return f() }

// TestQuietSlowApply: etcd's slow-apply warning keeps its level and figures, and its request is
// neither written nor turned into text.
func TestQuietSlowApply(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	called := false
	Quiet(zap.New(core)).Warn(slowApplyMessage, zap.Duration("took", 2), zap.String("response", "size:1"),
		zap.Stringer("request", stringerFunc(func() string { called = true; return "txn:<...>" })))
	all := logs.All()
	if len(all) != 1 || all[0].Level != zapcore.WarnLevel {
		t.Fatalf("logged %v", all)
	}
	m := all[0].ContextMap()
	if _, ok := m["request"]; ok || called || m["response"] != "size:1" || m["took"] == nil {
		t.Errorf("fields %v (request's String called: %v)", m, called)
	}
}

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

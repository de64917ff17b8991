package embedetcd

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Quiet returns l for etcd's own logs (the embedded server's and zetcd's etcd client's) with
// the entries that describe zetcd's ordinary work brought down to debug, without stack traces:
//
//   - any entry whose error is a cancelled context: zetcd cancels the etcd requests of a
//     connection its client closed or reset, and etcd logs a cancelled read as an error with a
//     stack trace ("unexpected error during readonly txn"). A cancelled request is the caller
//     giving up, not etcd failing.
//   - the client's "retrying of unary invoker failed", written for every etcd call that fails,
//     whatever zetcd makes of the error (a cancelled request, an expired session's lease, a
//     request over etcd's limits): zetcd reports the failures that matter itself.
//
// It also drops the request from etcd's "apply request took too long": etcd writes the whole
// request there, every key of a transaction, and a large group commit or an import's
// transaction of tens of thousands of keys made each such line megabytes long. The line stays,
// with how long the apply took and the response's size.
//
// etcd has no setting for any of these. Start applies it to Config.Logger.
func Quiet(l *zap.Logger) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &quietCore{Core: c} }))
}

// quietMessages are logged by etcd's client for outcomes zetcd handles itself.
var quietMessages = map[string]bool{
	"retrying of unary invoker failed": true,
}

// quietCore is the core of Quiet. Which entries it demotes depends on their fields, which Check
// does not see: Check takes every entry above debug that the core would write, and Write
// decides.
type quietCore struct{ zapcore.Core }

func (c *quietCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Level > zapcore.DebugLevel && c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return c.Core.Check(ent, ce)
}

func (c *quietCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Level < zapcore.DPanicLevel && (quietMessages[ent.Message] || cancelled(fields)) {
		ent.Level, ent.Stack = zapcore.DebugLevel, ""
	}
	if ent.Message == slowApplyMessage {
		fields = withoutField(fields, "request")
	}
	// Through the wrapped core's Check: its own level and filters decide, as for any entry.
	if ce := c.Core.Check(ent, nil); ce != nil {
		ce.Write(fields...)
	}
	return nil
}

// slowApplyMessage is etcd's warning of a request that took long to apply (etcdserver/txn).
const slowApplyMessage = "apply request took too long"

// withoutField returns fields less the one named key.
func withoutField(fields []zapcore.Field, key string) []zapcore.Field {
	out := make([]zapcore.Field, 0, len(fields))
	for _, f := range fields {
		if f.Key != key {
			out = append(out, f)
		}
	}
	return out
}

func (c *quietCore) With(fields []zapcore.Field) zapcore.Core {
	return &quietCore{Core: c.Core.With(fields)}
}

// cancelled reports whether an error field of an entry is a cancelled context.
func cancelled(fields []zapcore.Field) bool {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && errors.Is(err, context.Canceled) {
			return true
		}
	}
	return false
}

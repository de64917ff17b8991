package main

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger is zetcd's JSON logger at level. Debug and info entries (the request log among
// them) are all written. Warnings and errors are sampled per message: each second, the first
// warnSampleFirst of a message, then every warnSampleThereafter-th. An outage of etcd fails
// every client's attempt to resume its session, each logged as an error, and clients retry
// every second or so: without sampling, ten thousand sessions would write ten thousand lines
// a second for as long as the outage lasts.
func newLogger(level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, err
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	return cfg.Build(zap.WrapCore(sampleWarnings))
}

const (
	warnSampleFirst      = 100
	warnSampleThereafter = 100
)

// sampleWarnings wraps core so that its warnings and errors are sampled (see newLogger), and
// nothing below.
func sampleWarnings(core zapcore.Core) zapcore.Core {
	return splitCore{low: core, high: zapcore.NewSamplerWithOptions(core, time.Second, warnSampleFirst, warnSampleThereafter)}
}

// splitCore sends entries below warn level to low and the rest to high; both write to the same
// place.
type splitCore struct{ low, high zapcore.Core }

func (c splitCore) Enabled(l zapcore.Level) bool { return c.low.Enabled(l) }

func (c splitCore) With(fields []zapcore.Field) zapcore.Core {
	return splitCore{low: c.low.With(fields), high: c.high.With(fields)}
}

func (c splitCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level >= zapcore.WarnLevel {
		return c.high.Check(e, ce)
	}
	return c.low.Check(e, ce)
}

// Write is only called through Check, which hands the entry to low or high.
func (c splitCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if e.Level >= zapcore.WarnLevel {
		return c.high.Write(e, fields)
	}
	return c.low.Write(e, fields)
}

func (c splitCore) Sync() error { return c.low.Sync() }

package main

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLogSamplesWarnings: a burst of one error message is cut to the sample, another message
// is not held back by it, and debug entries (the request log) are all written.
func TestLogSamplesWarnings(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(sampleWarnings(core)).With(zap.String("component", "test"))
	const n = 1000
	for range n {
		log.Error("open session failed; closing the connection")
		log.Debug("request")
	}
	log.Warn("another message")
	errs := logs.FilterMessage("open session failed; closing the connection").Len()
	if want := warnSampleFirst + (n-warnSampleFirst)/warnSampleThereafter; errs != want {
		t.Errorf("%d of %d identical errors written within a second; want %d", errs, n, want)
	}
	if got := logs.FilterMessage("request").Len(); got != n {
		t.Errorf("%d of %d debug entries written; want all", got, n)
	}
	if logs.FilterMessage("another message").Len() != 1 {
		t.Error("a different warning was held back by the sampled error")
	}
	if e := logs.All()[0]; e.ContextMap()["component"] != "test" {
		t.Errorf("fields given With are lost: %v", e.ContextMap())
	}
}

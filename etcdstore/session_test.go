package etcdstore

import (
	"testing"
	"time"
)

// TestGoneLatch: Done and AfterDone of a session's end. A registered function runs once the
// latch closes, unless stopped first; one registered after the close runs at once; Done's
// channel is closed whether it was asked for before or after.
func TestGoneLatch(t *testing.T) {
	var l goneLatch
	before := l.done()
	ran := make(chan string, 3)
	l.after(func() { ran <- "a" })
	stopB := l.after(func() { ran <- "b" })
	if !stopB() {
		t.Error("stop before the close: want true")
	}
	if stopB() {
		t.Error("second stop: want false")
	}
	select {
	case <-before:
		t.Fatal("Done closed before the latch")
	default:
	}
	l.close(nil)
	l.close(nil) // idempotent
	<-before
	<-l.done()
	stopC := l.after(func() { ran <- "c" })
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case f := <-ran:
			got[f] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("ran %v, want a and c", got)
		}
	}
	if !got["a"] || !got["c"] || got["b"] {
		t.Errorf("ran %v, want a and c", got)
	}
	if stopC() {
		t.Error("stop of a function already started: want false")
	}

	var fresh goneLatch
	fresh.close(nil)
	select {
	case <-fresh.done():
	default:
		t.Error("Done of a latch closed before it was asked for is not closed")
	}
}

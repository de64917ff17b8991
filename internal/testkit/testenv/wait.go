package testenv

import (
	"testing"
	"time"
)

// pollInterval is how often Eventually checks its condition.
const pollInterval = 20 * time.Millisecond

// Eventually calls cond every pollInterval until it returns nil, and fails the test with what,
// timeout and cond's last error if timeout passes first. cond runs on the calling goroutine, so
// it may itself fail the test (a process that exited, a read that errs). Timeouts are generous:
// they catch a hang, not a slow machine.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

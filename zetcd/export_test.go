package zetcd

import "time"

// SetIdleAfter sets how long a reader waits for a request before its wait moves to a new
// goroutine (runReader), until the returned function restores it.
func SetIdleAfter(d time.Duration) (restore func()) {
	old := idleAfter
	idleAfter = d
	return func() { idleAfter = old }
}

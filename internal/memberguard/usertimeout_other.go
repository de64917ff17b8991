//go:build !linux

package memberguard

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist (it is Linux's).
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }

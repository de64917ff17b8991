package memberguard

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets c's TCP_USER_TIMEOUT: how long sent data may go unacknowledged before
// the kernel drops the connection.
func setUserTimeout(c *net.TCPConn, timeout time.Duration) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout/time.Millisecond))
	})
	if err != nil {
		return err
	}
	return serr
}

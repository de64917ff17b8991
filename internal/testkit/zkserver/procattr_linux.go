package zkserver

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the JVM if the test binary dies without running its
// cleanups (a panic, a -timeout), so no ZooKeeper outlives the tests that started it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

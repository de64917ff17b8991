//go:build !linux

package zkserver

import "os/exec"

// setProcAttr does nothing where there is no parent-death signal; Stop still kills the JVM.
func setProcAttr(*exec.Cmd) {}

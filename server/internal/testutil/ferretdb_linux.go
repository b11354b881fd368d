package testutil

import (
	"os/exec"
	"syscall"
)

// ferretDieWithParent makes the kernel kill FerretDB when the test binary
// dies without running its cleanups (a timeout or a kill).
func ferretDieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

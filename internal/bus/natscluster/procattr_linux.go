package natscluster

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL a node when the test binary dies:
// a test that panics or times out never runs its cleanup, and its nodes
// would otherwise keep running, holding ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

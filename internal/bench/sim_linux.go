package bench

import "syscall"

// childAttr kills the simulator with the bench, even a bench that is
// killed itself.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

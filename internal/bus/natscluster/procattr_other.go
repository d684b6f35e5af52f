//go:build !linux

package natscluster

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; elsewhere a test
// that dies without its cleanup leaves its nodes running.
func dieWithParent(*exec.Cmd) {}

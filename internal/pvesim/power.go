package pvesim

import (
	"fmt"
	"strings"
	"time"
)

// ---- power ------------------------------------------------------------------

func (s *Sim) power(q *req, g *guest) (any, error) {
	action := q.path("action")
	skiplock, err := q.boolParam("skiplock")
	if err != nil {
		return nil, err
	}
	forceStop, err := q.boolParam("forceStop")
	if err != nil {
		return nil, err
	}
	todisk, err := q.boolParam("todisk")
	if err != nil {
		return nil, err
	}
	word, prefix := "VM", "qm"
	if g.kind == LXC {
		word, prefix = "CT", "vz"
	}
	notRunning := func() error { return fail500("%s %d not running", word, g.vmid) }
	checkLock := func(allow ...string) error {
		l := g.lock()
		if l == "" || skiplock {
			return nil
		}
		for _, a := range allow {
			if l == a {
				return nil
			}
		}
		return taskError(lockedErr(g))
	}
	// ready is what every worker checks first, as Proxmox's do under the
	// config lock: the guest still exists, and no lock forbids the call.
	ready := func(allow ...string) error {
		if err := s.gone(g); err != nil {
			return err
		}
		return checkLock(allow...)
	}
	start := func() { s.powerOn(g, true) }
	stop := func() { g.status, g.paused, g.pid = "stopped", false, 0 }

	var typ string
	var work func() ([]string, error)
	switch action {
	case "start":
		typ = prefix + "start"
		if g.template() {
			return nil, fail500("you can't start a %s if it's a template", map[Kind]string{QEMU: "vm", LXC: "CT"}[g.kind])
		}
		if g.kind == LXC && g.running() {
			return nil, fail500("CT %d already running", g.vmid)
		}
		work = func() ([]string, error) {
			if err := ready("suspended"); err != nil {
				return nil, err
			}
			if g.running() {
				return nil, taskFail("VM %d already running", g.vmid)
			}
			if g.lock() == "suspended" {
				delete(g.conf, "lock")
				g.touch()
			}
			start()
			return nil, nil
		}
	case "stop":
		typ = prefix + "stop"
		if g.kind == LXC && !g.running() {
			return nil, fail500("CT %d not running", g.vmid)
		}
		work = func() ([]string, error) {
			if err := ready(); err != nil {
				return nil, err
			}
			stop() // stopping a stopped VM is a successful no-op
			return nil, nil
		}
	case "shutdown":
		typ = prefix + "shutdown"
		if g.kind == LXC && !g.running() {
			return nil, fail500("CT %d not running", g.vmid)
		}
		if g.kind == QEMU && g.running() && g.paused && !forceStop {
			return nil, fail500("VM is paused - cannot shutdown")
		}
		work = func() ([]string, error) {
			if err := ready(); err != nil {
				return nil, err
			}
			if g.running() && s.noACPI[g.vmid] && !forceStop {
				if g.kind == LXC {
					return nil, taskFail("container did not stop")
				}
				return nil, taskFail("VM quit/powerdown failed - got timeout")
			}
			stop()
			return nil, nil
		}
	case "reboot":
		typ = prefix + "reboot"
		if !g.running() {
			return nil, fail500("VM %d not running", g.vmid) // "VM" for containers too (sic)
		}
		work = func() ([]string, error) {
			// A container's reboot checks no config lock: pve-container's
			// reboot endpoint (src/PVE/API2/LXC/Status.pm, vm_reboot) and
			// PVE::LXC::vm_reboot take only the container's file lock and
			// stop and start it, where start, stop, shutdown and suspend
			// call check_lock. A VM's does (qemu-server vm_reboot →
			// _do_vm_stop → check_lock).
			if g.kind == LXC {
				if err := s.gone(g); err != nil {
					return nil, err
				}
			} else if err := ready(); err != nil {
				return nil, err
			}
			if !g.running() {
				return nil, taskFail("VM %d not running", g.vmid)
			}
			// A VM's reboot is an ACPI powerdown that is never forced
			// (qemu-server vm_reboot: _do_vm_stop without force); a
			// container's is killed after the timeout (pve-container
			// vm_reboot: lxc-stop --timeout, killing).
			if s.noACPI[g.vmid] && g.kind == QEMU {
				return nil, taskFail("VM quit/powerdown failed - got timeout")
			}
			start() // a reboot is a stop and start: pending changes apply
			return nil, nil
		}
	case "reset":
		if g.kind == LXC {
			return nil, &apiError{status: 501, msg: fmt.Sprintf("Method 'POST %s' not implemented", strings.TrimPrefix(q.r.URL.Path, "/api2/json"))}
		}
		typ = "qmreset"
		if !g.running() {
			return nil, notRunning()
		}
		work = func() ([]string, error) {
			if err := ready(); err != nil {
				return nil, err
			}
			g.startedAt, g.paused = time.Now(), false
			return nil, nil
		}
	case "suspend":
		typ = prefix + "suspend"
		if !g.running() {
			return nil, notRunning()
		}
		work = func() ([]string, error) {
			if err := ready(); err != nil {
				return nil, err
			}
			if todisk && g.kind == QEMU {
				s.hibernated(g) // the state keys (pve9.go)
				stop()          // hibernate: state saved to disk, guest stopped and locked
				g.conf["lock"] = "suspended"
				g.touch()
				return nil, nil
			}
			g.paused = true
			return nil, nil
		}
	case "resume":
		typ = prefix + "resume"
		hibernated := g.kind == QEMU && g.lock() == "suspended"
		if !g.running() && !hibernated {
			return nil, notRunning()
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if g.lock() == "suspended" {
				delete(g.conf, "lock")
				g.touch()
				start()
				return nil, nil
			}
			g.paused = false
			return nil, nil
		}
	default:
		return nil, &apiError{status: 501, msg: fmt.Sprintf("Method 'POST %s' not implemented", strings.TrimPrefix(q.r.URL.Path, "/api2/json"))}
	}
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, work, nil)
	return t.upid, nil
}

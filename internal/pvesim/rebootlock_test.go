package pvesim_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestRebootLockedGuest: a VM's reboot fails on a config lock
// (qemu-server PVE/QemuServer.pm vm_reboot → _do_vm_stop → check_lock), a
// container's does not check one: pve-container's reboot endpoint
// (src/PVE/API2/LXC/Status.pm vm_reboot) checks only that it runs, and
// PVE::LXC::vm_reboot stops and starts it under its file lock alone, where
// start, stop, shutdown and suspend call check_lock. A backup in progress
// does not keep a container from being rebooted.
func TestRebootLockedGuest(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 101, Name: "vm", Running: true},
		{VMID: 102, Kind: pvesim.LXC, Name: "ct", Running: true},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
		if err := s.LockGuest(g.VMID, "backup", 0); err != nil {
			t.Fatal(err)
		}
	}
	u := s.URL() + "/nodes/pve1"
	for _, tc := range []struct{ path, exit string }{
		{"/qemu/101/status/reboot", "VM is locked (backup)"},
		{"/lxc/102/status/reboot", "OK"},
	} {
		_, body := raw(t, "POST", u+tc.path, tokenHdr(), "")
		ti, err := s.WaitTask(ctxT(t), body["data"].(string))
		if err != nil || ti.ExitStatus != tc.exit {
			t.Errorf("%s: %+v %v, want exit status %q", tc.path, ti, err, tc.exit)
		}
	}
}

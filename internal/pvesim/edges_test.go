package pvesim_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestEdgeCaseOutcomes pins Proxmox's immediate answers (status line) for
// the edge cases in docs/simulator.md that the lifecycle tests do not reach.
func TestEdgeCaseOutcomes(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Name: "stopped-vm"},
		{VMID: 101, Name: "running-vm", Running: true},
		{VMID: 102, Kind: pvesim.LXC, Name: "running-ct", Running: true},
		{VMID: 103, Name: "protected", Config: map[string]string{"protection": "1"}},
		{VMID: 104, Kind: pvesim.LXC, Name: "stopped-ct"},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	u := s.URL() + "/nodes/pve1"
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/qemu/100/status/reboot", "", "500 VM 100 not running"},
		{"POST", "/qemu/100/status/reset", "", "500 VM 100 not running"},
		{"POST", "/qemu/100/status/suspend", "", "500 VM 100 not running"},
		{"POST", "/qemu/100/status/resume", "", "500 VM 100 not running"},
		{"POST", "/lxc/102/status/reset", "", "501 Method 'POST /nodes/pve1/lxc/102/status/reset' not implemented"},
		{"POST", "/lxc/104/status/shutdown", "", "500 CT 104 not running"},
		{"POST", "/qemu/101/template", "", "500 you can't convert a VM to template if VM is running"},
		{"POST", "/lxc/102/template", "", "500 you can't convert a CT to template if the CT is running"},
		{"DELETE", "/qemu/103", "", "500 can't remove VM 103 - protection mode enabled"},
		{"POST", "/qemu/100/clone", "newid=101", "500 unable to create VM 101: config file already exists"},
		{"POST", "/qemu/100/clone", "newid=150&full=0", "500 Linked clone feature is not supported for 'local-lvm:vm-100-disk-0' (scsi0)"},
		{"POST", "/qemu/100/clone", "", "400 Parameter verification failed."},
		{"POST", "/qemu", "vmid=100", "500 VM 100 already exists on node 'pve1'"},
		{"POST", "/lxc", "vmid=300&ostemplate=local:vztmpl/nope.tar.zst", "500 unable to create CT 300 - volume 'local:vztmpl/nope.tar.zst' does not exist"},
		{"POST", "/qemu/101/status/frobnicate", "", "501 Method 'POST /nodes/pve1/qemu/101/status/frobnicate' not implemented"},
		{"GET", "/qemu/abc/config", "", "400 Parameter verification failed."},
		{"GET", "/lxc/100/config", "", "500 Configuration file 'nodes/pve1/lxc/100.conf' does not exist"},
		{"PUT", "/qemu/100/config", "name=not_a_dns_name", "400 Parameter verification failed."},
		{"PUT", "/qemu/100/config", "memory=8", "400 Parameter verification failed."},
		{"PUT", "/qemu/100/config", "", "500 no options specified"},
	} {
		res, _ := raw(t, tc.method, u+tc.path, tokenHdr(), tc.body)
		if res.Status != tc.want {
			t.Errorf("%s %s %q: %q, want %q", tc.method, tc.path, tc.body, res.Status, tc.want)
		}
	}

	// pause, shutdown refused while paused, resume; hibernate and resume
	for _, step := range []struct{ path, body, want string }{
		{"/qemu/101/status/suspend", "", "200 OK"},
		{"/qemu/101/status/shutdown", "", "500 VM is paused - cannot shutdown"},
		{"/qemu/101/status/resume", "", "200 OK"},
		{"/qemu/101/status/suspend", "todisk=1", "200 OK"},
	} {
		res, _ := raw(t, "POST", u+step.path, tokenHdr(), step.body)
		if res.Status != step.want {
			t.Fatalf("%s %s: %q, want %q", step.path, step.body, res.Status, step.want)
		}
	}
	if g, _ := s.Guest(101); g.Status != "stopped" || g.Lock != "suspended" {
		t.Fatalf("hibernated: %+v", g)
	}
	if res, _ := raw(t, "POST", u+"/qemu/101/status/resume", tokenHdr(), ""); res.StatusCode != 200 {
		t.Fatal(res.Status)
	}
	if g, _ := s.Guest(101); g.Status != "running" || g.Lock != "" {
		t.Fatalf("resumed from hibernation: %+v", g)
	}
	// a locked guest's delete fails in the task unless skiplock
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, body := raw(t, "DELETE", u+"/qemu/100", tokenHdr(), "")
	ti, err := s.WaitTask(ctxT(t), body["data"].(string))
	if err != nil || ti.ExitStatus != "VM is locked (backup)" {
		t.Fatalf("delete locked: %+v %v", ti, err)
	}
	_, body = raw(t, "DELETE", u+"/qemu/100?skiplock=1&purge=1", tokenHdr(), "")
	if ti, err := s.WaitTask(ctxT(t), body["data"].(string)); err != nil || ti.ExitStatus != "OK" {
		t.Fatalf("delete with skiplock: %+v %v", ti, err)
	}
}

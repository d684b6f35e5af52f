package pvesim_test

import (
	"net/url"
	"slices"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestHAResources drives /cluster/ha/resources as pve-ha-manager serves it:
// create (also by bare vmid), list, read, update with digest, delete, and
// Proxmox's refusals; HA-managed guests show hastate in /cluster/resources
// and ha.managed in status/current.
func TestHAResources(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100}, {VMID: 101, Kind: pvesim.LXC}, {VMID: 102}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	u := s.URL() + "/cluster/ha/resources"
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "", "sid=vm:100&state=stopped&comment=web", "200 OK"},
		{"POST", "", "sid=101", "200 OK"}, // a bare vmid: ct:101
		{"POST", "", "sid=vm:100", "500 create resource failed: resource ID 'vm:100' already defined"},
		{"POST", "", "sid=vm:999", "500 resource 'vm:999' does not exist in cluster"},
		{"POST", "", "sid=ct:100", "500 resource 'ct:100' - guest with ID 100 is not a container"},
		{"POST", "", "sid=vm:101", "500 resource 'vm:101' - guest with ID 101 is not a VM"},
		{"POST", "", "sid=999", "500 unable to detect SID from VMID - VM/CT 999 does not exist"},
		{"POST", "", "sid=vm:102&type=ct", "500 types does not match"},
		{"POST", "", "sid=foo:102", "500 unknown section type 'foo'"},
		{"POST", "", "sid=vm:abc", "500 invalid VMID"},
		{"POST", "", "sid=VM:102", "400 Parameter verification failed."},
		{"POST", "", "sid=vm:102&state=running", "400 Parameter verification failed."},
		{"POST", "", "state=started", "400 Parameter verification failed."},
		{"GET", "/vm:102", "", "500 no such resource 'vm:102'"},
		{"PUT", "/vm:102", "state=started", "500 update resources config failed: no such resource 'vm:102'"},
		{"PUT", "/vm:100", "delete=bogus", "500 update resources config failed: no such option 'bogus'"},
		{"PUT", "/vm:100", "digest=0000", "500 update resources config failed: detected modified configuration - file changed by other user? Try again."},
		{"DELETE", "/vm:102", "", "500 cannot delete service 'vm:102', not HA managed!"},
	} {
		res, _ := raw(t, tc.method, u+tc.path, tokenHdr(), tc.body)
		if res.Status != tc.want {
			t.Errorf("%s %s %q: %q, want %q", tc.method, tc.path, tc.body, res.Status, tc.want)
		}
	}

	c := tokenClient(s)
	ctx := ctxT(t)
	var list []map[string]any
	if err := c.Get(ctx, "/cluster/ha/resources", &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0]["sid"] != "ct:101" || list[0]["type"] != "ct" || list[0]["state"] != nil ||
		list[1]["sid"] != "vm:100" || list[1]["type"] != "vm" || list[1]["state"] != "stopped" ||
		list[1]["comment"] != "web" || list[0]["digest"] == "" || list[0]["digest"] != list[1]["digest"] {
		t.Fatalf("list: %v", list)
	}
	if err := c.Get(ctx, "/cluster/ha/resources?type=ct", &list); err != nil || len(list) != 1 || list[0]["sid"] != "ct:101" {
		t.Fatalf("type=ct: %v %v", list, err)
	}
	// read by sid and by bare vmid; update with the current digest
	var one map[string]any
	if err := c.Get(ctx, "/cluster/ha/resources/100", &one); err != nil || one["sid"] != "vm:100" || one["state"] != "stopped" {
		t.Fatalf("read 100: %v %v", one, err)
	}
	if err := c.Put(ctx, "/cluster/ha/resources/vm:100", map[string]any{"state": "started", "digest": one["digest"]}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "/cluster/ha/resources/vm:100", map[string]any{"delete": "comment"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.HAResources(); !slices.Equal(got, []pvesim.HAResource{
		{SID: "ct:101", Type: "ct", VMID: 101}, {SID: "vm:100", Type: "vm", VMID: 100, State: "started"}}) {
		t.Fatalf("HAResources: %+v", got)
	}

	// hastate: the requested state (unset means started); none when unmanaged
	if err := s.AddHAResource(102, "disabled"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHAResource(102, "started"); err == nil {
		t.Fatal("AddHAResource accepted a resource already defined")
	}
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	hastate := map[uint64]string{}
	for _, r := range rs {
		hastate[r.VMID] = r.HAstate
	}
	if hastate[100] != "started" || hastate[101] != "started" || hastate[102] != "disabled" {
		t.Fatalf("hastate: %v", hastate)
	}
	st := rawData(t, c, "/nodes/pve1/qemu/100/status/current").(map[string]any)
	if ha := st["ha"].(map[string]any); ha["managed"] != float64(1) || ha["state"] != "started" {
		t.Fatalf("status/current ha: %v", ha)
	}

	// delete, through go-proxmox's raw DELETE
	if err := c.Delete(ctx, "/cluster/ha/resources/"+url.PathEscape("ct:101"), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/cluster/ha/resources/102", nil); err != nil {
		t.Fatal(err)
	}
	if got := s.HAResources(); len(got) != 1 || got[0].SID != "vm:100" {
		t.Fatalf("after delete: %+v", got)
	}
	rs, _ = cl.Resources(ctx, "vm")
	for _, r := range rs {
		if r.VMID != 100 && r.HAstate != "" {
			t.Fatalf("unmanaged guest with hastate: %+v", r)
		}
	}
	// an injected failure is the HA domain lock's timeout
	if err := s.SetFaults(pvesim.Faults{FailRate: 1}); err != nil {
		t.Fatal(err)
	}
	if res, _ := raw(t, "POST", u, tokenHdr(), "sid=vm:102"); res.Status != "500 create resource failed: cfs-lock 'domain-ha' error: got lock request timeout" {
		t.Fatalf("injected HA failure: %q", res.Status)
	}
	if len(s.HAResources()) != 1 {
		t.Fatal("a failed HA write took effect")
	}
}

// TestDestroyChecks pins destroy_vm's early checks and their order
// (protection, for LXC the lock, HA without purge, a running VM), answered
// at the call, and purge removing the guest's HA resource, noted in the
// task log as Proxmox does.
func TestDestroyChecks(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Config: map[string]string{"protection": "1"}},
		{VMID: 101, Running: true},
		{VMID: 102},
		{VMID: 103, Kind: pvesim.LXC},
		{VMID: 104, Kind: pvesim.LXC},
		{VMID: 105, Kind: pvesim.LXC, Config: map[string]string{"protection": "1"}},
		{VMID: 106, Kind: pvesim.LXC, Running: true},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int{100, 101, 102, 103, 104, 105, 106} {
		if err := s.AddHAResource(id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.LockGuest(104, "backup", 0); err != nil {
		t.Fatal(err)
	}
	u := s.URL() + "/nodes/pve1"
	for _, tc := range []struct{ path, want string }{
		{"/qemu/100", "500 can't remove VM 100 - protection mode enabled"},
		{"/qemu/100?purge=1", "500 can't remove VM 100 - protection mode enabled"},
		{"/qemu/101", "500 unable to remove VM 101 - used in HA resources and purge parameter not set."},
		{"/qemu/101?purge=1", "500 VM 101 is running - destroy failed"},
		{"/qemu/102", "500 unable to remove VM 102 - used in HA resources and purge parameter not set."},
		{"/lxc/103", "500 unable to remove CT 103 - used in HA resources and purge parameter not set."},
		{"/lxc/104?purge=1", "500 CT is locked (backup)"},
		{"/lxc/105?purge=1", "500 can't remove CT 105 - protection mode enabled"},
		{"/lxc/106", "500 unable to remove CT 106 - used in HA resources and purge parameter not set."},
		{"/lxc/106?purge=1", "500 unable to destroy CT 106 - container is running"},
	} {
		if res, _ := raw(t, "DELETE", u+tc.path, tokenHdr(), ""); res.Status != tc.want {
			t.Errorf("DELETE %s: %q, want %q", tc.path, res.Status, tc.want)
		}
	}
	if len(s.HAResources()) != 7 {
		t.Fatal("a refused destroy touched the HA resources")
	}

	// purge: the guest goes, and so does its HA resource
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, err := n.VirtualMachine(ctx, 102)
	if err != nil {
		t.Fatal(err)
	}
	task, err := vm.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true})
	mustOK(t, s, task, err)
	ti, _ := s.WaitTask(ctx, string(task.UPID))
	if want := []string{"purging VM 102 from related configurations..", "NOTE: removed VM 102 from HA resource configuration.", "TASK OK"}; !slices.Equal(ti.Log, want) {
		t.Fatalf("destroy log %q, want %q", ti.Log, want)
	}
	_, body := raw(t, "DELETE", u+"/lxc/103?purge=1&destroy-unreferenced-disks=1", tokenHdr(), "")
	ti, err = s.WaitTask(ctx, body["data"].(string))
	if err != nil || ti.ExitStatus != "OK" || ti.Log[1] != "NOTE: removed CT 103 from HA resource configuration." {
		t.Fatalf("CT destroy: %+v %v", ti, err)
	}
	for _, id := range []int{102, 103} {
		if _, ok := s.Guest(id); ok {
			t.Fatalf("guest %d survived its destroy", id)
		}
	}
	for _, r := range s.HAResources() {
		if r.VMID == 102 || r.VMID == 103 {
			t.Fatalf("HA resource %s survived a purge", r.SID)
		}
	}
	// a force-destroyed running container is stopped first
	_, body = raw(t, "DELETE", u+"/lxc/106?purge=1&force=1", tokenHdr(), "")
	ti, err = s.WaitTask(ctx, body["data"].(string))
	if err != nil || ti.ExitStatus != "OK" || ti.Log[0] != "forced to stop CT 106 before destroying!" {
		t.Fatalf("forced CT destroy: %+v %v", ti, err)
	}
}

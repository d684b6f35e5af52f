package pvesim_test

import (
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// cloneGuests are templates on local and on shared storage, and a running
// container, on pve1 of a two-node cluster.
var cloneGuests = []pvesim.GuestSpec{
	{VMID: 9000, Name: "tpl-local", Template: true},
	{VMID: 9001, Kind: pvesim.LXC, Name: "ct-local", Template: true},
	{VMID: 9002, Name: "tpl-ceph", Template: true, Config: map[string]string{"scsi0": "ceph:base-9002-disk-0,iothread=1,size=32G"}},
	{VMID: 9003, Kind: pvesim.LXC, Name: "ct-ceph", Template: true, Config: map[string]string{"rootfs": "ceph:base-9003-disk-0,size=8G"}},
	{VMID: 310, Kind: pvesim.LXC, Name: "ct-running", Running: true},
}

func addGuests(t *testing.T, s *pvesim.Sim, gs []pvesim.GuestSpec) {
	t.Helper()
	for _, g := range gs {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloneChecks pins clone_vm's refusals (qemu-server load_and_check,
// pve-container clone_vm) and clones to another node.
func TestCloneChecks(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	addGuests(t, s, cloneGuests)
	u := s.URL() + "/nodes/pve1"
	for _, tc := range []struct{ path, body, want string }{
		{"/qemu/9000/clone", "newid=120&storage=local-lvm", "500 parameter 'storage' not allowed for linked clones"},
		{"/qemu/9000/clone", "newid=120&full=1&storage=local-lvm&target=pve2", "500 can't clone to non-shared storage 'local-lvm'"},
		{"/qemu/9000/clone", "newid=120&full=1&storage=ceph&target=pve2", "500 can't clone VM to node 'pve2' (VM uses local storage)"},
		{"/qemu/9000/clone", "newid=120&target=pve2", "500 can't clone VM to node 'pve2' (VM uses local storage)"},
		{"/qemu/9000/clone", "newid=120&target=pve9", "500 no such cluster node 'pve9'"},
		{"/qemu/9000/clone", "newid=120&full=1&storage=nope", "500 storage 'nope' does not exist"},
		{"/qemu/9000/clone", "newid=120&full=1&storage=local", "400 Parameter verification failed."},
		{"/qemu/9000/clone", "newid=120&format=qcow2", "500 parameter 'format' not allowed for linked clones"},
		{"/qemu/9000/clone", "newid=9001", "500 unable to create VM 9001: config file already exists"},
		{"/lxc/9001/clone", "newid=121&target=pve2", "500 can't clone CT to node 'pve2' (CT uses local storage)"},
		{"/lxc/9001/clone", "newid=121&storage=ceph", "500 parameter 'storage' not allowed for linked clones"},
		{"/lxc/9001/clone", "newid=121&full=1&storage=local-lvm&target=pve2", "500 can't clone to non-shared storage 'local-lvm'"},
		{"/lxc/310/clone", "newid=121", "500 Full clone of a running container is only possible from a snapshot"},
		{"/lxc/310/clone", "newid=121&full=0", "500 Linked clone feature for 'local-lvm:vm-310-disk-0' is not available"},
	} {
		if res, _ := raw(t, "POST", u+tc.path, tokenHdr(), tc.body); res.Status != tc.want {
			t.Errorf("POST %s %q: %q, want %q", tc.path, tc.body, res.Status, tc.want)
		}
	}
	if gs := s.Guests(); len(gs) != len(cloneGuests) {
		t.Fatalf("refused clones left guests behind: %d guests", len(gs))
	}
	for _, g := range s.Guests() {
		if g.Lock != "" {
			t.Fatalf("a refused clone left guest %d locked (%s)", g.VMID, g.Lock)
		}
	}

	// Shared storage may go to another node: the new guest ends up there.
	c := tokenClient(s)
	ctx := ctxT(t)
	n1, _ := c.Node(ctx, "pve1")
	n2, _ := c.Node(ctx, "pve2")
	tpl, err := n1.VirtualMachine(ctx, 9002)
	if err != nil {
		t.Fatal(err)
	}
	_, task, err := tpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 130, Target: "pve2"})
	mustOK(t, s, task, err)
	if vm, err := n2.VirtualMachine(ctx, 130); err != nil || vm.Name != "Copy-of-VM-tpl-ceph" {
		t.Fatalf("clone on pve2: %+v %v", vm, err)
	}
	_, err = n1.VirtualMachine(ctx, 130)
	errContains(t, err, "500 Configuration file 'nodes/pve1/qemu-server/130.conf' does not exist")
	ct, err := n1.Container(ctx, 9003)
	if err != nil {
		t.Fatal(err)
	}
	_, task, err = ct.Clone(ctx, &proxmox.ContainerCloneOptions{NewID: 131, Target: "pve2"})
	mustOK(t, s, task, err)
	if g, ok := s.Guest(131); !ok || g.Node != "pve2" || !strings.HasPrefix(g.Config["rootfs"], "ceph:base-9003-disk-0/vm-131-disk-0") {
		t.Fatalf("CT clone on pve2: %+v", g)
	}
	// pve-container judges sharing by the target storage: a full clone of
	// a local container onto shared storage may go to another node.
	res, body := raw(t, "POST", u+"/lxc/9001/clone", tokenHdr(), "newid=132&full=1&storage=ceph&target=pve2")
	if res.StatusCode != 200 {
		t.Fatal(res.Status)
	}
	if ti, err := s.WaitTask(ctx, body["data"].(string)); err != nil || ti.ExitStatus != "OK" {
		t.Fatalf("CT full clone to pve2: %+v %v", ti, err)
	}
	if g, _ := s.Guest(132); g.Node != "pve2" || !strings.HasPrefix(g.Config["rootfs"], "ceph:vm-132-disk-0") {
		t.Fatalf("CT full clone on pve2: %+v", g)
	}
}

// TestCloneLocks pins the locks clones hold while their task runs: a QEMU
// target is locked "clone" and its source is not locked; an LXC target is
// locked "create" and its source "disk", which refuses a second clone of
// it; the locks go when the task ends, also when it is stopped. A clone
// onto a taken id is refused as each kind refuses it. The task log starts
// with Proxmox's "creating a clone of …" line, while the task runs too.
func TestCloneLocks(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	addGuests(t, s, cloneGuests[:2])
	addGuests(t, s, []pvesim.GuestSpec{{VMID: 100}, {VMID: 101, Kind: pvesim.LXC, Node: "pve2"}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 9000)
	ct, _ := n.Container(ctx, 9001)
	u := s.URL() + "/nodes/pve1"

	_, vt1, err := vm.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 200})
	if err != nil {
		t.Fatal(err)
	}
	_, vt2, err := vm.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 201}) // QEMU sources stay unlocked
	if err != nil {
		t.Fatal(err)
	}
	_, ct1, err := ct.Clone(ctx, &proxmox.ContainerCloneOptions{NewID: 300})
	if err != nil {
		t.Fatal(err)
	}
	locks := map[int]string{}
	for _, g := range s.Guests() {
		locks[g.VMID] = g.Lock
	}
	if locks[9000] != "" || locks[200] != "clone" || locks[201] != "clone" || locks[9001] != "disk" || locks[300] != "create" {
		t.Fatalf("locks while clones run: %v", locks)
	}
	for _, tc := range []struct{ method, path, body, want string }{
		// pve-container clone_vm (src/PVE/API2/LXC.pm) locks its source
		// with set_lock 'disk' for the whole copy; a second clone's
		// set_lock (pve-guest-common PVE::AbstractConfig::set_lock) gets
		// the config flock at once (held only while the lock is written)
		// and check_lock dies in the API call, before any task.
		{"POST", "/lxc/9001/clone", "newid=301", "500 CT is locked (disk)"},
		{"PUT", "/lxc/9001/config", "cores=2", "500 CT is locked (disk)"},
		{"POST", "/qemu/9000/clone", "newid=200", "500 unable to create VM 200: config file already exists"},
	} {
		if res, _ := raw(t, tc.method, u+tc.path, tokenHdr(), tc.body); res.Status != tc.want {
			t.Errorf("%s %s %q: %q, want %q", tc.method, tc.path, tc.body, res.Status, tc.want)
		}
	}
	// qemu-server's temporary config until the disks are copied: nothing
	// in it says whose clone it is
	if res, body := raw(t, "GET", u+"/qemu/200/config", tokenHdr(), ""); res.StatusCode != 200 {
		t.Errorf("config of a running clone: %s", res.Status)
	} else if cfg, _ := body["data"].(map[string]any); cfg["description"] != "qmclone temporary file" || cfg["lock"] != "clone" || cfg["name"] != nil {
		t.Errorf("config of a running clone: %v", cfg)
	}
	// the log is readable while the task runs, through go-proxmox too
	for task, want := range map[*proxmox.Task]string{
		vt1: "creating a clone of VM 9000 with ID 200",
		ct1: "creating a clone of container 9001 with ID 300",
	} {
		l, err := task.Log(ctx, 0, 50)
		if err != nil || l[0] != want {
			t.Fatalf("running clone log %v (%v), want first line %q", l, err, want)
		}
	}
	if err := vt2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s.CompleteRunningTasks() != 2 {
		t.Fatal("want the two remaining clones still running")
	}
	locks = map[int]string{}
	for _, g := range s.Guests() {
		locks[g.VMID] = g.Lock
	}
	if _, ok := locks[201]; ok || locks[200] != "" || locks[9001] != "" || locks[300] != "" {
		t.Fatalf("locks after the clones: %v", locks)
	}
	for task, want := range map[*proxmox.Task][]string{
		vt1: {"creating a clone of VM 9000 with ID 200", "create linked clone of drive scsi0 (local-lvm:base-9000-disk-0)", "TASK OK"},
		ct1: {"creating a clone of container 9001 with ID 300", "create linked clone of mount point rootfs (local-lvm:base-9001-disk-0)", "TASK OK"},
	} {
		l, err := task.Log(ctx, 0, 50)
		if err != nil || len(l) != len(want) {
			t.Fatalf("clone log %v %v", l, err)
		}
		for i, line := range want {
			if l[i] != line {
				t.Fatalf("clone log line %d %q, want %q", i, l[i], line)
			}
		}
	}

	// a taken id: LXC answers with check_vmid_unused's text, by the
	// existing guest's type and node
	for body, want := range map[string]string{
		"newid=300": "500 CT 300 already exists on node 'pve1'",
		"newid=101": "500 CT 101 already exists on node 'pve2'",
		"newid=100": "500 VM 100 already exists on node 'pve1'",
	} {
		if res, _ := raw(t, "POST", u+"/lxc/9001/clone", tokenHdr(), body); res.Status != want {
			t.Errorf("LXC clone %s: %q, want %q", body, res.Status, want)
		}
	}
	if g, _ := s.Guest(9001); g.Lock != "" {
		t.Fatalf("a refused LXC clone left its source locked (%s)", g.Lock)
	}
	// an interrupted LXC clone unlocks its source and leaves no target
	_, ct2, err := ct.Clone(ctx, &proxmox.ContainerCloneOptions{NewID: 302})
	if err != nil {
		t.Fatal(err)
	}
	if err := ct2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(9001); g.Lock != "" {
		t.Fatalf("stopped clone left its source locked (%s)", g.Lock)
	}
	if _, ok := s.Guest(302); ok {
		t.Fatal("stopped clone left its target")
	}
}

// TestClonePool pins a clone's pool: it must exist (check_pool_exist's
// permission exception, 403), and the new guest joins it once the task
// ends, shown in /cluster/resources.
func TestClonePool(t *testing.T) {
	s := startSim(t, pvesim.Options{Pools: []string{"prod"}, DemoTemplates: true})
	if err := s.AddPool("dev"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPool("dev"); err == nil {
		t.Fatal("AddPool accepted an existing pool")
	}
	u := s.URL() + "/nodes/pve1"
	for _, tc := range []struct{ path, body, want string }{
		{"/qemu/9000/clone", "newid=120&pool=nope", "403 Permission check failed (pool 'nope' does not exist)"},
		{"/lxc/9001/clone", "newid=120&pool=nope", "403 Permission check failed (pool 'nope' does not exist)"},
		{"/qemu/9000/clone", "newid=120&pool=a%20b", "400 Parameter verification failed."},
	} {
		if res, _ := raw(t, "POST", u+tc.path, tokenHdr(), tc.body); res.Status != tc.want {
			t.Errorf("POST %s %q: %q, want %q", tc.path, tc.body, res.Status, tc.want)
		}
	}
	c := tokenClient(s)
	ctx := ctxT(t)
	for path, body := range map[string]string{"/qemu/9000/clone": "newid=120&pool=prod", "/lxc/9001/clone": "newid=121&pool=dev"} {
		res, b := raw(t, "POST", u+path, tokenHdr(), body)
		if res.StatusCode != 200 {
			t.Fatal(res.Status)
		}
		if ti, err := s.WaitTask(ctx, b["data"].(string)); err != nil || ti.ExitStatus != "OK" {
			t.Fatalf("clone into a pool: %+v %v", ti, err)
		}
	}
	cl, _ := c.Cluster(ctx)
	rs, err := cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	pools := map[uint64]string{}
	for _, r := range rs {
		pools[r.VMID] = r.Pool
	}
	if pools[120] != "prod" || pools[121] != "dev" || pools[9000] != "" {
		t.Fatalf("pools in /cluster/resources: %v", pools)
	}
	if g, _ := s.Guest(120); g.Pool != "prod" {
		t.Fatalf("GuestInfo.Pool %q", g.Pool)
	}
}

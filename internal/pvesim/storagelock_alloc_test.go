package pvesim_test

import (
	"maps"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// Errors of a storage lock waited for in vain (pve-storage
// PVE::Storage::Plugin::cluster_lock_storage: PVE::Tools::lock_file for a
// local storage, PVE::Cluster::cfs_lock_storage for a shared one).
const (
	lvmLockErr  = "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
	zfsLockErr  = "can't lock file '/var/lock/pve-manager/pve-storage-local-zfs' - got timeout"
	cephLockErr = "cfs-lock 'storage-ceph' error: got lock request timeout"
)

// lockTask calls path and returns the UPID of the task it starts.
func lockTask(t *testing.T, s *pvesim.Sim, method, path, body string) string {
	t.Helper()
	hdr := tokenHdr()
	hdr["Content-Type"] = "application/x-www-form-urlencoded"
	res, m := raw(t, method, s.URL()+path, hdr, body)
	upid, _ := m["data"].(string)
	if res.StatusCode != 200 || upid == "" {
		t.Fatalf("%s %s %s: %s %v", method, path, body, res.Status, m)
	}
	return upid
}

// lockWait waits for a task's end.
func lockWait(t *testing.T, s *pvesim.Sim, upid string) pvesim.TaskInfo {
	t.Helper()
	ti, err := s.WaitTask(ctxT(t), upid)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

// lockFinish ends a task that still holds or waits for its locks now.
func lockFinish(t *testing.T, s *pvesim.Sim, upid string) pvesim.TaskInfo {
	t.Helper()
	for _, ti := range s.Tasks() {
		if ti.UPID == upid && !ti.Running {
			t.Fatalf("a task holding its locks for an hour ended: %+v", ti)
		}
	}
	if err := s.FinishTask(upid); err != nil {
		t.Fatal(err)
	}
	return lockWait(t, s, upid)
}

// blockStorages (each hold an hour, a waiter gives up after 1 ms) holds
// pve1's local-lvm for the first hour and the cluster's ceph for two:
// full clones of template 9000, and a linked clone of 9004, whose ceph
// disk follows its local-zfs one (pve1's local-zfs is held for the first
// hour too).
func blockStorages(t *testing.T) *pvesim.Sim {
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(time.Hour), StorageLockTimeout: pvesim.Duration(time.Millisecond)})
	cloneTask(t, s, "/nodes/pve1/qemu/9000/clone", "newid=900&full=1")
	cloneTask(t, s, "/nodes/pve1/qemu/9000/clone", "newid=901&full=1&storage=ceph")
	cloneTask(t, s, "/nodes/pve1/qemu/9004/clone", "newid=902")
	return s
}

const ctTemplate = "ostemplate=" + "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"

// TestStorageLockCreate pins the lock of a create's allocations: each new
// volume is vdisk_alloc'd under its storage's lock (pve-storage
// src/PVE/Storage.pm vdisk_alloc: cluster_lock_storage) inside the task
// (qemu-server src/PVE/API2/Qemu.pm create_vm → create_disks; pve-container
// src/PVE/API2/LXC.pm create_vm → PVE::LXC::create_disks → alloc_disk),
// and an allocation that cannot get it fails the task "unable to create
// VM|CT <vmid> - <error>" ($emsg) and removes the config. A create that
// allocates nothing takes no lock.
func TestStorageLockCreate(t *testing.T) {
	s := blockStorages(t)
	for _, tc := range []struct {
		path, body, want string
		vmid             int
	}{
		{"/nodes/pve1/qemu", "vmid=100&scsi0=local-lvm:8", "unable to create VM 100 - " + lvmLockErr, 100},
		{"/nodes/pve1/qemu", "vmid=101&efidisk0=ceph:1", "unable to create VM 101 - " + cephLockErr, 101},
		{"/nodes/pve1/qemu", "vmid=102&ide2=" + url.QueryEscape("ceph:cloudinit"), "unable to create VM 102 - " + cephLockErr, 102},
		{"/nodes/pve1/lxc", "vmid=103&" + ctTemplate, "unable to create CT 103 - " + lvmLockErr, 103}, // rootfs local-lvm:4
		{"/nodes/pve2/lxc", "vmid=104&" + ctTemplate + "&rootfs=ceph:4", "unable to create CT 104 - " + cephLockErr, 104},
	} {
		ti := lockWait(t, s, lockTask(t, s, "POST", tc.path, tc.body))
		if ti.ExitStatus != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.path, tc.body, ti.ExitStatus, tc.want)
		}
		if _, ok := s.Guest(tc.vmid); ok {
			t.Errorf("%s %s: guest %d left behind", tc.path, tc.body, tc.vmid)
		}
	}
	// No volume to allocate: no lock, the task ends at once.
	if ti := lockWait(t, s, lockTask(t, s, "POST", "/nodes/pve1/qemu", "vmid=110&memory=1024")); ti.ExitStatus != "OK" {
		t.Fatalf("create without disks: %+v", ti)
	}
	// pve2's local-lvm is another flock: the create holds it, and succeeds.
	if ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/qemu", "vmid=111&scsi0=local-lvm:8")); ti.ExitStatus != "OK" {
		t.Fatalf("create on pve2: %+v", ti)
	}
	if g, ok := s.Guest(111); !ok || g.Lock != "" {
		t.Fatalf("guest 111 after its create: %+v", g)
	}
}

// TestStorageLockCreateCleanup: a create whose second allocation times
// out frees the first volume again under its storage's lock, and only
// prints that free's failure (qemu-server create_disks: "free allocated
// images on error", `eval { PVE::Storage::vdisk_free(...) }; warn $@ if
// $@;`). The volumes are allocated in sorted key order (create_disks:
// `for my $opt (sort keys $param->%*)`): ide0 before scsi0.
func TestStorageLockCreateCleanup(t *testing.T) {
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(time.Hour), StorageLockTimeout: pvesim.Duration(time.Millisecond)})
	// A linked clone of 9004 holds ceph from +1h to +2h.
	cloneTask(t, s, "/nodes/pve1/qemu/9004/clone", "newid=900")
	// The create holds local-lvm for ide0 (+0..1h); ceph is not free for
	// scsi0 at +1h: it gives up, and frees ide0's volume: its lock, its
	// own until +1h, is free then.
	upid := lockTask(t, s, "POST", "/nodes/pve1/qemu", "vmid=100&scsi0=ceph:8&ide0=local-lvm:4")
	ti := lockFinish(t, s, upid)
	if want := "unable to create VM 100 - " + cephLockErr; ti.ExitStatus != want {
		t.Fatalf("create: %q, want %q", ti.ExitStatus, want)
	}
	if slices.Contains(ti.Log, lvmLockErr) {
		t.Fatalf("the free of ide0's volume found its lock free, yet failed: %q", ti.Log)
	}
	// That free holds local-lvm from +1h to +2h: a create that may wait
	// 90 minutes for it gives up. (Had the create not allocated ide0
	// first, or not freed it, local-lvm would be free by +1h.)
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.StorageLockTimeout = pvesim.Duration(90 * time.Minute) }); err != nil {
		t.Fatal(err)
	}
	ti = lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve1/qemu", "vmid=101&ide0=local-lvm:4"))
	if want := "unable to create VM 101 - " + lvmLockErr; ti.ExitStatus != want {
		t.Fatalf("second create: %q, want %q", ti.ExitStatus, want)
	}
}

// TestStorageLockConfigWrite pins the locks of a config write (qemu-server
// src/PVE/API2/Qemu.pm update_vm_api: each deleted unusedN the VM owns is
// freed, try_deallocate_drive → vdisk_free, then each new disk allocated,
// create_disks → vdisk_alloc, each under its storage's lock; the first
// failure dies, in the call for PUT, in the qmconfig task for POST).
// The deletions before the failure are written: a deleted key other than
// unusedN becomes a pending deletion (add_to_pending_delete, applied
// only at the end). pve-container (src/PVE/LXC/Config.pm
// vmconfig_apply_pending / vmconfig_hotplug_pending) collects a failure
// per key, "unable to apply pending change <key> : <error>" (stopped) or
// "unable to hotplug <key>: <error>" (running), and its update_vm
// (src/PVE/API2/LXC/Config.pm) raises them as a 400 before writing.
func TestStorageLockConfigWrite(t *testing.T) {
	s := blockStorages(t)
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Config: map[string]string{"unused0": "ceph:vm-100-disk-1"}},
		{VMID: 102, Kind: pvesim.LXC, Config: map[string]string{"unused0": "local-lvm:vm-102-disk-3"}},
		{VMID: 103, Kind: pvesim.LXC, Running: true},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.Guest(100)
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/nodes/pve1/qemu/100/config", "scsi1=local-lvm:8"},
		{"PUT", "/nodes/pve1/qemu/100/config", "delete=unused0"},
		{"PUT", "/nodes/pve1/qemu/100/config", "ide2=" + url.QueryEscape("ceph:cloudinit")},
	} {
		want := lvmLockErr
		if tc.body != "scsi1=local-lvm:8" {
			want = cephLockErr
		}
		if res, m := form(t, s, tc.method, tc.path, tc.body); res.StatusCode != 500 || m["message"] != want+"\n" {
			t.Errorf("%s %s %s: %s %v, want 500 %q", tc.method, tc.path, tc.body, res.Status, m, want)
		}
	}
	if ti := lockWait(t, s, lockTask(t, s, "POST", "/nodes/pve1/qemu/100/config", "scsi1=ceph:8")); ti.ExitStatus != cephLockErr {
		t.Errorf("POST config: %+v", ti)
	}
	if g, _ := s.Guest(100); g.Digest != before.Digest {
		t.Fatalf("100 changed: %+v", g)
	}
	// The deletion of memory comes before unused0's free, and stays
	// written as a pending deletion.
	if res, _ := form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "delete=memory,unused0"); res.StatusCode != 500 {
		t.Fatalf("PUT delete=memory,unused0: %s", res.Status)
	}
	if g, _ := s.Guest(100); g.Config["memory"] != "512" || g.Config["unused0"] == "" || !slices.Equal(g.PendingDelete, []string{"memory"}) {
		t.Fatalf("100 after the failed deletion: %+v", g)
	}

	for _, tc := range []struct {
		path, body string
		errs       map[string]any
	}{
		{"/nodes/pve1/lxc/102/config", "mp0=" + url.QueryEscape("local-lvm:8,mp=/srv"),
			map[string]any{"mp0": "unable to apply pending change mp0 : " + lvmLockErr + "\n"}},
		{"/nodes/pve1/lxc/102/config", "memory=1024&delete=unused0&mp0=" + url.QueryEscape("ceph:8,mp=/a") + "&mp1=" + url.QueryEscape("local-zfs:2,mp=/b"),
			map[string]any{
				"unused0": "unable to apply pending change unused0 : " + lvmLockErr + "\n",
				"mp0":     "unable to apply pending change mp0 : " + cephLockErr + "\n",
				"mp1":     "unable to apply pending change mp1 : " + zfsLockErr + "\n",
			}},
		{"/nodes/pve1/lxc/103/config", "mp0=" + url.QueryEscape("ceph:8,mp=/srv"),
			map[string]any{"mp0": "unable to hotplug mp0: " + cephLockErr + "\n"}},
	} {
		res, m := form(t, s, "PUT", tc.path, tc.body)
		errs, _ := m["errors"].(map[string]any)
		if res.StatusCode != 400 || !maps.Equal(errs, tc.errs) {
			t.Errorf("PUT %s %s: %s %v, want 400 %v", tc.path, tc.body, res.Status, m, tc.errs)
		}
	}
	if g, _ := s.Guest(102); g.Config["memory"] != "512" || g.Config["mp0"] != "" || g.Config["unused0"] == "" || len(g.Pending) > 0 {
		t.Fatalf("102 after its failed writes: %+v", g)
	}
}

// TestStorageLockConfigWritePartial: update_vm_api writes the config after
// each option, so a failure leaves the options before it written, and
// pending (it applies pending changes at its end): here the deletion of
// another VM's volume (no free, no lock) and the allocation of scsi1 on
// pve2's local-lvm, before scsi2's on ceph times out. (It sets options in
// Perl's hash order; the simulator takes the allocations first, sorted.)
func TestStorageLockConfigWritePartial(t *testing.T) {
	s := blockStorages(t)
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 101, Node: "pve2", Config: map[string]string{"unused0": "ceph:vm-555-disk-0"}}); err != nil {
		t.Fatal(err)
	}
	body := "delete=unused0&scsi1=local-lvm:8&scsi2=ceph:8&memory=1024"
	if ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/qemu/101/config", body)); ti.ExitStatus != cephLockErr {
		t.Fatalf("POST config: %+v", ti)
	}
	g, _ := s.Guest(101)
	if _, ok := g.Config["unused0"]; ok || g.Config["memory"] != "512" || !maps.Equal(g.Pending, map[string]string{"scsi1": "local-lvm:vm-101-disk-1,size=8G"}) {
		t.Fatalf("101 after the failed write: %+v", g)
	}
}

// TestStorageLockConfigWriteTemplate: a disk added to a template is made a
// base volume at once (qemu-server create_disks: `$volid =
// PVE::Storage::vdisk_create_base($storecfg, $volid) if is_template`), a
// second hold of its storage's lock after the allocation's.
func TestStorageLockConfigWriteTemplate(t *testing.T) {
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(time.Hour), StorageLockTimeout: pvesim.Duration(90 * time.Minute)})
	lockTask(t, s, "POST", "/nodes/pve2/qemu/9002/config", "scsi1=local-zfs:1")
	// pve2's local-zfs is held two hours: a create waiting 90 minutes
	// for it gives up.
	ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/qemu", "vmid=100&scsi0=local-zfs:1"))
	if want := "unable to create VM 100 - " + zfsLockErr; ti.ExitStatus != want {
		t.Fatalf("create behind the write: %q, want %q", ti.ExitStatus, want)
	}
}

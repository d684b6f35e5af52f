package pvesim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// cloneTask posts a clone and returns its task's UPID.
func cloneTask(t *testing.T, s *pvesim.Sim, path, body string) string {
	t.Helper()
	res, m := raw(t, "POST", s.URL()+path, tokenHdr(), body)
	upid, _ := m["data"].(string)
	if res.StatusCode != 200 || upid == "" {
		t.Fatalf("POST %s %s: %s %v", path, body, res.Status, m)
	}
	return upid
}

// lockSim is a two-node simulator with templates 9000 (pve1, local-lvm),
// 9002 (pve2, local-lvm), 9001 (a container, pve1, local-lvm) and 9004
// (pve1, a disk on local-zfs and one on ceph).
func lockSim(t *testing.T, f pvesim.Faults) *pvesim.Sim {
	s := startSim(t, pvesim.Options{Nodes: 2, Faults: f})
	for _, g := range []pvesim.GuestSpec{{VMID: 9000, Template: true}, {VMID: 9002, Node: "pve2", Template: true}, {VMID: 9001, Kind: pvesim.LXC, Template: true},
		{VMID: 9004, Template: true, Config: map[string]string{"scsi0": "local-zfs:base-9004-disk-0,size=8G", "scsi1": "ceph:base-9004-disk-1,size=8G"}}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestStorageLockTimeout pins the storage lock of pve-storage
// (PVE::Storage::vdisk_alloc and vdisk_clone run under
// PVE::Storage::Plugin::cluster_lock_storage): a local storage's lock is
// the node's flock (PVE::Tools::lock_file: "can't lock file '…' - got
// timeout"), a shared storage's the cluster's pmxcfs lock
// (PVE::Cluster::cfs_lock_storage: "cfs-lock 'storage-<id>' error: got
// lock request timeout"); a clone whose allocation (full) or vdisk_clone
// (linked) cannot get it in time fails "clone failed: …" (qemu-server
// and pve-container clone_vm) and leaves no guest.
func TestStorageLockTimeout(t *testing.T) {
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(time.Hour), StorageLockTimeout: pvesim.Duration(time.Millisecond)})
	ctx := ctxT(t)
	holds := []string{
		cloneTask(t, s, "/nodes/pve1/qemu/9000/clone", "newid=200&full=1"),              // pve1's local-lvm
		cloneTask(t, s, "/nodes/pve2/qemu/9002/clone", "newid=202"),                     // pve2's local-lvm: another flock
		cloneTask(t, s, "/nodes/pve1/qemu/9000/clone", "newid=203&full=1&storage=ceph"), // the cluster's ceph
	}
	local := "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
	for _, tc := range []struct{ path, body, want string }{
		{"/nodes/pve1/qemu/9000/clone", "newid=201", local},       // linked: vdisk_clone on the base's storage
		{"/nodes/pve1/lxc/9001/clone", "newid=300&full=1", local}, // copy_volume's vdisk_alloc
		{"/nodes/pve2/qemu/9002/clone", "newid=204&full=1&storage=ceph", "clone failed: cfs-lock 'storage-ceph' error: got lock request timeout"},
	} {
		ti, err := s.WaitTask(ctx, cloneTask(t, s, tc.path, tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if ti.ExitStatus != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.path, tc.body, ti.ExitStatus, tc.want)
		}
	}
	ids := map[int]bool{}
	for _, g := range s.Guests() {
		ids[g.VMID] = true
	}
	if ids[201] || ids[300] || ids[204] || !ids[200] || !ids[202] || !ids[203] {
		t.Fatalf("guests after the timeouts: %v", ids)
	}
	for _, ti := range s.Tasks() {
		for _, u := range holds {
			if ti.UPID == u && !ti.Running {
				t.Fatalf("a clone holding its lock ended: %+v", ti)
			}
		}
	}
}

// TestStorageLockQueue: clones on one storage wait their turn for its
// lock (cluster_lock_storage's flock or cfs lock waits up to 10 s) and
// all succeed; each linked clone holds it StorageLockHold.
func TestStorageLockQueue(t *testing.T) {
	const hold = 50 * time.Millisecond
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(hold)})
	ctx := ctxT(t)
	var infos []pvesim.TaskInfo
	var upids []string
	for id := 200; id < 203; id++ {
		upids = append(upids, cloneTask(t, s, "/nodes/pve1/qemu/9000/clone", fmt.Sprintf("newid=%d", id)))
	}
	for _, u := range upids {
		ti, err := s.WaitTask(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if ti.ExitStatus != "OK" {
			t.Fatalf("clone: %+v", ti)
		}
		infos = append(infos, ti)
	}
	// The third waited for two holds before its own: a lower bound, set
	// by timers, not a speed.
	if d := infos[2].End.Sub(infos[0].Start); d < 3*hold-10*time.Millisecond {
		t.Fatalf("three clones on one lock ended %v after the first began, want >= %v", d, 3*hold)
	}
}

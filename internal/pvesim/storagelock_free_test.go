package pvesim_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestStorageLockTemplate pins the lock of a template conversion: each
// volume becomes a base volume through vdisk_create_base, under its
// storage's lock (pve-storage src/PVE/Storage.pm vdisk_create_base:
// cluster_lock_storage), in the task. qemu-server (src/PVE/API2/Qemu.pm
// template: `$conf->{template} = 1; write_config`, then
// PVE::QemuServer::template_create, which writes the config after each
// volume) leaves a VM whose lock timed out a template with the volumes
// before converted; pve-container (src/PVE/API2/LXC.pm template →
// PVE::LXC::template_create, the config written after all volumes) leaves
// the config as it was. Both fail with the lock's error alone.
func TestStorageLockTemplate(t *testing.T) {
	s := blockStorages(t)
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100},                   // scsi0 on pve1's local-lvm
		{VMID: 101, Kind: pvesim.LXC}, // rootfs on pve1's local-lvm
		{VMID: 102, Node: "pve2", Config: map[string]string{"scsi1": "ceph:vm-102-disk-1,size=8G"}},
		{VMID: 103, Node: "pve2", Kind: pvesim.LXC, Config: map[string]string{"rootfs": "local-zfs:subvol-103-disk-0,size=8G", "mp0": "ceph:vm-103-disk-1,mp=/srv,size=8G"}},
		{VMID: 104, Config: map[string]string{"scsi0": "none,media=cdrom", "ide2": "ceph:vm-104-cloudinit,media=cdrom"}},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path, want string
	}{
		{"/nodes/pve1/qemu/100/template", lvmLockErr},
		{"/nodes/pve1/lxc/101/template", lvmLockErr},
	} {
		if ti := lockWait(t, s, lockTask(t, s, "POST", tc.path, "")); ti.ExitStatus != tc.want {
			t.Errorf("%s: %q, want %q", tc.path, ti.ExitStatus, tc.want)
		}
	}
	// pve2's local-lvm (scsi0) is free for the first hour; ceph (scsi1)
	// is not free at +1h.
	if ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/qemu/102/template", "")); ti.ExitStatus != cephLockErr {
		t.Errorf("template of 102: %q, want %q", ti.ExitStatus, cephLockErr)
	}
	// pve2's local-zfs (rootfs) likewise, ceph (mp0) not.
	if ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/lxc/103/template", "")); ti.ExitStatus != cephLockErr {
		t.Errorf("template of 103: %q, want %q", ti.ExitStatus, cephLockErr)
	}
	// CD-ROMs and a cloud-init drive are no volumes to convert: 104's
	// conversion takes no lock.
	if ti := lockWait(t, s, lockTask(t, s, "POST", "/nodes/pve1/qemu/104/template", "")); ti.ExitStatus != "OK" {
		t.Errorf("template of 104: %+v", ti)
	}
	for _, tc := range []struct {
		vmid     int
		template bool
		key, vol string
	}{
		{100, true, "scsi0", "local-lvm:vm-100-disk-0,iothread=1,size=32G"},
		{101, false, "rootfs", "local-lvm:vm-101-disk-0,size=8G"},
		{102, true, "scsi0", "local-lvm:base-102-disk-0,iothread=1,size=32G"},
		{102, true, "scsi1", "ceph:vm-102-disk-1,size=8G"},
		{103, false, "rootfs", "local-zfs:subvol-103-disk-0,size=8G"},
		{104, true, "ide2", "ceph:vm-104-cloudinit,media=cdrom"},
	} {
		g, _ := s.Guest(tc.vmid)
		if g.Template != tc.template || g.Config[tc.key] != tc.vol {
			t.Errorf("%d: template %v, %s %q; want %v, %q", tc.vmid, g.Template, tc.key, g.Config[tc.key], tc.template, tc.vol)
		}
	}
}

// TestStorageLockMoveDisk pins the locks of a disk move (qemu-server
// src/PVE/API2/Qemu.pm move_vm_disk, a "qmmove" task): clone_disk
// allocates the new volume on the target under its lock (vdisk_alloc);
// if it cannot, the task fails "storage migration failed: <error>" and the
// config stays. With delete the source is freed after the copy under its
// storage's lock (vdisk_free in an eval, `warn $@ if $@`): a timeout there
// is printed and the move succeeds.
func TestStorageLockMoveDisk(t *testing.T) {
	s := blockStorages(t)
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Node: "pve2"}, // scsi0 on pve2's local-lvm
		{VMID: 101, Config: map[string]string{"scsi0": "ceph:vm-101-disk-0,size=8G"}},
		{VMID: 102, Node: "pve2", Config: map[string]string{"scsi0": "ceph:vm-102-disk-0,size=8G"}},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/nodes/pve2/qemu/100/move_disk", "disk=scsi0&storage=ceph", "storage migration failed: " + cephLockErr},
		{"/nodes/pve1/qemu/101/move_disk", "disk=scsi0&storage=local-zfs", "storage migration failed: " + zfsLockErr},
	} {
		ti := lockWait(t, s, lockTask(t, s, "POST", tc.path, tc.body))
		if ti.ExitStatus != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.path, tc.body, ti.ExitStatus, tc.want)
		}
	}
	if g, _ := s.Guest(100); g.Config["scsi0"] != "local-lvm:vm-100-disk-0,iothread=1,size=32G" || g.Config["unused0"] != "" {
		t.Fatalf("100 after its failed move: %v", g.Config)
	}
	// 102: pve2's local-zfs is free (+0..1h); ceph, to free the source
	// at +1h, is not.
	ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/qemu/102/move_disk", "disk=scsi0&storage=local-zfs&delete=1"))
	if ti.ExitStatus != "OK" || !slices.Contains(ti.Log, cephLockErr) {
		t.Fatalf("move with delete: %+v", ti)
	}
	if g, _ := s.Guest(102); g.Config["scsi0"] != "local-zfs:vm-102-disk-0,size=8G" || g.Config["unused0"] != "" {
		t.Fatalf("102 after its move: %v", g.Config)
	}
}

// TestStorageLockMoveTemplateDisk: a template's moved disk is made a base
// volume on the target (move_vm_disk: `template_create($vmid, $conf,
// $disk) if is_template`, vdisk_create_base under the target's lock), a
// second hold of the target's lock after the allocation's.
func TestStorageLockMoveTemplateDisk(t *testing.T) {
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(time.Hour), StorageLockTimeout: pvesim.Duration(90 * time.Minute)})
	lockTask(t, s, "POST", "/nodes/pve2/qemu/9002/move_disk", "disk=scsi0&storage=local-zfs")
	// pve2's local-zfs is held two hours: a create waiting 90 minutes
	// for it gives up.
	ti := lockFinish(t, s, lockTask(t, s, "POST", "/nodes/pve2/qemu", "vmid=100&scsi0=local-zfs:1"))
	if want := "unable to create VM 100 - " + zfsLockErr; ti.ExitStatus != want {
		t.Fatalf("create behind the move: %q, want %q", ti.ExitStatus, want)
	}
}

// TestStorageLockDestroy pins the locks of a destroy: each volume the
// guest owns is freed under its storage's lock (pve-storage
// src/PVE/Storage.pm vdisk_free: cluster_lock_storage; the simulated
// storages' free_image return no cleanup worker, so the whole free runs
// under it). qemu-server (src/PVE/QemuServer.pm destroy_vm: the drives in
// valid_drive_names order, a cloud-init drive too but not a CD-ROM, then
// unusedN; `eval { vdisk_free }; log_warn("Could not remove disk
// '$volid', check manually: $@")`) warns of a timeout and destroys the
// VM; pve-container (src/PVE/LXC.pm destroy_lxc_container →
// delete_mountpoint_volume: vdisk_free bare) fails the task with it and
// keeps the config, the volumes freed before it gone.
func TestStorageLockDestroy(t *testing.T) {
	s := blockStorages(t)
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Config: map[string]string{ // scsi0 on pve1's local-lvm
			"ide2":    "ceph:vm-100-cloudinit,media=cdrom",
			"ide0":    "ceph:vm-100-disk-5,media=cdrom",  // a CD-ROM: not freed
			"scsi2":   "local-zfs:vm-999-disk-0,size=8G", // another VM's: not freed
			"unused0": "ceph:vm-100-disk-1",
		}},
		{VMID: 101, Node: "pve2", Kind: pvesim.LXC, Config: map[string]string{ // rootfs on pve2's local-lvm
			"mp0": "ceph:vm-101-disk-1,mp=/srv,size=8G",
			"mp1": "local-zfs:subvol-555-disk-0,mp=/x,size=8G",
		}},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	ti := lockWait(t, s, lockTask(t, s, "DELETE", "/nodes/pve1/qemu/100", ""))
	want := []string{
		"WARN: Could not remove disk 'ceph:vm-100-cloudinit', check manually: " + cephLockErr,
		"WARN: Could not remove disk 'local-lvm:vm-100-disk-0', check manually: " + lvmLockErr,
		"WARN: Could not remove disk 'ceph:vm-100-disk-1', check manually: " + cephLockErr,
		"TASK WARNINGS: 3",
	}
	if ti.ExitStatus != "WARNINGS: 3" || !slices.Equal(ti.Log, want) {
		t.Fatalf("destroy of 100: %s %q, want %q", ti.ExitStatus, ti.Log, want)
	}
	if _, ok := s.Guest(100); ok {
		t.Fatal("100 is still there")
	}
	// 101: its rootfs is freed (pve2's local-lvm, +0..1h), ceph is not
	// free for mp0 at +1h.
	ti = lockFinish(t, s, lockTask(t, s, "DELETE", "/nodes/pve2/lxc/101", ""))
	if ti.ExitStatus != cephLockErr || slices.Contains(ti.Log, "ignore deletion of 'local-zfs:subvol-555-disk-0', CT 101 isn't the owner!") {
		t.Fatalf("destroy of 101: %+v", ti)
	}
	if g, ok := s.Guest(101); !ok || g.Config["rootfs"] != "local-lvm:vm-101-disk-0,size=8G" {
		t.Fatalf("101 after its failed destroy: %+v", g)
	}
	for vol, code := range map[string]int{"local-lvm:vm-101-disk-0": 500, "ceph:vm-101-disk-1": 200} {
		sid, _, _ := strings.Cut(vol, ":")
		if res, _ := form(t, s, "GET", "/nodes/pve2/storage/"+sid+"/content/"+vol, ""); res.StatusCode != code {
			t.Errorf("%s after the failed destroy: %s, want %d", vol, res.Status, code)
		}
	}
}

// TestStorageLockDeleteVolume: the storage API's volume deletion (pve-storage
// src/PVE/API2/Storage/Content.pm delete: an "imgdel" task running
// vdisk_free) takes the storage's lock; a timeout fails the task and
// frees nothing.
func TestStorageLockDeleteVolume(t *testing.T) {
	s := blockStorages(t)
	for _, g := range []pvesim.GuestSpec{{VMID: 100}, {VMID: 102, Node: "pve2"}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	path := "/nodes/pve1/storage/local-lvm/content/local-lvm:vm-100-disk-0"
	if ti := lockWait(t, s, lockTask(t, s, "DELETE", path, "")); ti.ExitStatus != lvmLockErr {
		t.Fatalf("imgdel on pve1: %+v", ti)
	}
	if res, _ := form(t, s, "GET", path, ""); res.StatusCode != 200 {
		t.Fatalf("the volume after the failed delete: %s", res.Status)
	}
	// pve2's local-lvm is another flock.
	path = "/nodes/pve2/storage/local-lvm/content/local-lvm:vm-102-disk-0"
	if ti := lockFinish(t, s, lockTask(t, s, "DELETE", path, "")); ti.ExitStatus != "OK" {
		t.Fatalf("imgdel on pve2: %+v", ti)
	}
	if res, _ := form(t, s, "GET", path, ""); res.StatusCode != 500 {
		t.Fatalf("the volume after its delete: %s", res.Status)
	}
}

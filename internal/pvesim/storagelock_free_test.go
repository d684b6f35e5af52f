package pvesim_test

import (
	"testing"

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

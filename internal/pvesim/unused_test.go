package pvesim_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestDetachedDiskKeptUnused follows vmconfig_register_unused_drive: a
// disk deleted from the config (stopped VM at once, a running one at its
// restart when the bus cannot unplug) or replaced by a new volume is kept
// as unusedN when the guest owns it; a CD-ROM or another guest's volume is
// dropped.
func TestDetachedDiskKeptUnused(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Config: map[string]string{
		"scsi1": "local-lvm:vm-100-disk-1,size=2G", "scsi2": "local-lvm:vm-999-disk-0,size=1G",
		"ide2": "local:iso/x.iso,media=cdrom", "sata1": "local-lvm:vm-100-disk-3,size=1G"}}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/qemu/100/config"
	if _, err := callData(t, s, "PUT", path, map[string]any{"delete": "scsi1,scsi2,ide2"}); err != nil {
		t.Fatal(err)
	}
	g, _ := s.Guest(100)
	if g.Config["unused0"] != "local-lvm:vm-100-disk-1" || g.Config["unused1"] != "" {
		t.Fatalf("config %v: want only the owned disk kept as unused0", g.Config)
	}
	// A new volume over sata1: the old one is kept as unused1.
	if _, err := callData(t, s, "PUT", path, map[string]any{"sata1": "local-lvm:1"}); err != nil {
		t.Fatal(err)
	}
	g, _ = s.Guest(100)
	if g.Config["unused1"] != "local-lvm:vm-100-disk-3" || g.Config["sata1"] == "" || g.Config["sata1"] == "local-lvm:vm-100-disk-3,size=1G" {
		t.Fatalf("config %v: want the replaced volume as unused1", g.Config)
	}
	// A running VM keeps an IDE disk's deletion pending; at its restart the
	// volume becomes unused.
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 101, Running: true, Config: map[string]string{"ide1": "local-lvm:vm-101-disk-1,size=1G"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/nodes/pve1/qemu/101/config", map[string]any{"delete": "ide1"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(101); g.Config["ide1"] == "" || g.Config["unused0"] != "" {
		t.Fatalf("running: %v, want the deletion pending", g.Config)
	}
	data, err := callData(t, s, "POST", "/nodes/pve1/qemu/101/status/reboot", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUPID(t, s, data)
	if g, _ := s.Guest(101); g.Config["ide1"] != "" || g.Config["unused0"] != "local-lvm:vm-101-disk-1" {
		t.Fatalf("after the restart: %v", g.Config)
	}
}

// pendingDelete returns GET …/pending's "delete" of key (0 when absent).
func pendingDelete(t *testing.T, s *pvesim.Sim, vmid int, key string) float64 {
	t.Helper()
	data, err := callData(t, s, "GET", fmt.Sprintf("/nodes/pve1/qemu/%d/pending", vmid), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range data.([]any) {
		if m := it.(map[string]any); m["key"] == key {
			d, _ := m["delete"].(float64)
			return d
		}
	}
	return 0
}

// TestConfigDeleteForce follows qemu-server's update_vm_api and
// vmconfig_delete_or_detach_drive (src/PVE/QemuServer.pm): with force a
// deleted disk's volume is freed (try_deallocate_drive), not kept as
// unusedN; on a running VM whose bus cannot unplug the deletion stays
// pending as a force deletion (add_to_pending_delete: "!key" in the file,
// delete=2 in GET pending, the API's "value 2 indicates a force-delete
// request") and frees the volume at the restart; an unusedN is freed at
// once even on a running VM.
func TestConfigDeleteForce(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Config: map[string]string{
		"scsi1": "local-lvm:vm-100-disk-1,size=2G", "scsi2": "local-lvm:vm-100-disk-2,size=1G"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/nodes/pve1/qemu/100/config", map[string]any{"delete": "scsi1", "force": 1}); err != nil {
		t.Fatal(err)
	}
	g, _ := s.Guest(100)
	if g.Config["scsi1"] != "" || g.Config["unused0"] != "" {
		t.Fatalf("config %v: want scsi1 gone and freed, no unused0", g.Config)
	}
	if listsVolume(t, s, "local-lvm:vm-100-disk-1") {
		t.Fatal("the force-deleted volume is still in the storage's content")
	}

	if err := s.AddGuest(pvesim.GuestSpec{VMID: 101, Running: true, Config: map[string]string{
		"ide1": "local-lvm:vm-101-disk-1,size=1G", "unused0": "local-lvm:vm-101-disk-2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/nodes/pve1/qemu/101/config", map[string]any{"delete": "ide1,unused0", "force": 1}); err != nil {
		t.Fatal(err)
	}
	g, _ = s.Guest(101)
	if g.Config["ide1"] == "" || g.Config["unused0"] != "" || !slices.Equal(g.PendingDelete, []string{"ide1"}) {
		t.Fatalf("running: %v pending delete %v, want ide1 pending, unused0 gone", g.Config, g.PendingDelete)
	}
	if d := pendingDelete(t, s, 101, "ide1"); d != 2 {
		t.Fatalf("GET pending delete of ide1 = %v, want 2", d)
	}
	if listsVolume(t, s, "local-lvm:vm-101-disk-2") {
		t.Fatal("the deleted unused0 is still in the storage's content")
	}
	data, err := callData(t, s, "POST", "/nodes/pve1/qemu/101/status/reboot", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUPID(t, s, data)
	if g, _ := s.Guest(101); g.Config["ide1"] != "" || g.Config["unused0"] != "" {
		t.Fatalf("after the restart: %v, want ide1 freed", g.Config)
	}
	if listsVolume(t, s, "local-lvm:vm-101-disk-1") {
		t.Fatal("ide1's volume survived its forced deletion")
	}
}

// listsVolume reports whether node pve1's local-lvm content lists volid.
func listsVolume(t *testing.T, s *pvesim.Sim, volid string) bool {
	t.Helper()
	data, err := callData(t, s, "GET", "/nodes/pve1/storage/local-lvm/content", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range data.([]any) {
		if it.(map[string]any)["volid"] == volid {
			return true
		}
	}
	return false
}

// TestUnlink follows qemu-server's src/PVE/API2/Qemu.pm "unlink": idlist
// becomes the delete of update_vm, so without force a disk is kept as
// unusedN, with force it is freed and a listed unusedN is freed either way;
// a running VM unplugs a SCSI disk (disk hotplug) at once and keeps a SATA
// disk's deletion pending (vmconfig_hotplug_pending skips ide/sata/efidisk/
// tpmstate); a key that is no option is refused (update_vm_api:
// option_exists, "unknown option").
func TestUnlink(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Config: map[string]string{
		"scsi1": "local-lvm:vm-100-disk-1,size=2G", "scsi2": "local-lvm:vm-100-disk-2,size=1G",
		"unused3": "local-lvm:vm-100-disk-3"}}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/qemu/100/unlink"
	if data, err := callData(t, s, "PUT", path, map[string]any{"idlist": "scsi1"}); err != nil || data != nil {
		t.Fatalf("unlink: %v, %v; want null", data, err)
	}
	g, _ := s.Guest(100)
	if g.Config["scsi1"] != "" || g.Config["unused0"] != "local-lvm:vm-100-disk-1" {
		t.Fatalf("without force: %v, want scsi1 kept as unused0", g.Config)
	}
	if _, err := callData(t, s, "PUT", path, map[string]any{"idlist": "scsi2,unused3", "force": 1}); err != nil {
		t.Fatal(err)
	}
	g, _ = s.Guest(100)
	if g.Config["scsi2"] != "" || g.Config["unused3"] != "" || g.Config["unused1"] != "" {
		t.Fatalf("with force: %v, want scsi2 and unused3 freed", g.Config)
	}
	for _, v := range []string{"local-lvm:vm-100-disk-2", "local-lvm:vm-100-disk-3"} {
		if listsVolume(t, s, v) {
			t.Fatalf("%s still listed after a forced unlink", v)
		}
	}
	// An unusedN without force is freed too.
	if _, err := callData(t, s, "PUT", path, map[string]any{"idlist": "unused0"}); err != nil {
		t.Fatal(err)
	}
	if listsVolume(t, s, "local-lvm:vm-100-disk-1") {
		t.Fatal("unlinked unused0 still listed")
	}

	if err := s.AddGuest(pvesim.GuestSpec{VMID: 101, Running: true, Config: map[string]string{
		"scsi1": "local-lvm:vm-101-disk-1,size=1G", "sata1": "local-lvm:vm-101-disk-2,size=1G"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/nodes/pve1/qemu/101/unlink", map[string]any{"idlist": "scsi1,sata1"}); err != nil {
		t.Fatal(err)
	}
	g, _ = s.Guest(101)
	if g.Config["scsi1"] != "" || g.Config["unused0"] != "local-lvm:vm-101-disk-1" ||
		g.Config["sata1"] == "" || !slices.Equal(g.PendingDelete, []string{"sata1"}) {
		t.Fatalf("running: %v pending delete %v: want scsi1 unplugged as unused0, sata1 pending", g.Config, g.PendingDelete)
	}
	if d := pendingDelete(t, s, 101, "sata1"); d != 1 {
		t.Fatalf("GET pending delete of sata1 = %v, want 1", d)
	}

	_, err := callData(t, s, "PUT", path, map[string]any{"idlist": "nosuchkey"})
	errContains(t, err, "unknown option 'nosuchkey'")
	_, err = callData(t, s, "PUT", path, map[string]any{"force": 1})
	errContains(t, err, "idlist")
}

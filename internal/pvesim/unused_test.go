package pvesim_test

import (
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

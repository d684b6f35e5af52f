package pvesim_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestHotplugRules follows qemu-server's vmconfig_hotplug_pending for a
// running VM: cores and sockets never apply live; vcpus with cpu hotplug;
// memory with memory hotplug and NUMA; NICs and new disks with network /
// disk hotplug (default network,disk,usb; "1" is that default, "0" none);
// new IDE/SATA disks, EFI and TPM state never; a cdrom's medium always;
// cloud-init keys always.
func TestHotplugRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conf    map[string]string
		key     string
		value   string
		applied bool
	}{
		{"cores", nil, "cores", "4", false},
		{"sockets with cpu hotplug", map[string]string{"hotplug": "cpu,memory", "numa": "1"}, "sockets", "2", false},
		{"vcpus default", nil, "vcpus", "1", false},
		{"vcpus cpu hotplug", map[string]string{"hotplug": "cpu"}, "vcpus", "1", true},
		{"memory default", nil, "memory", "2048", false},
		{"memory hotplug no numa", map[string]string{"hotplug": "memory"}, "memory", "2048", false},
		{"memory hotplug numa", map[string]string{"hotplug": "network,memory", "numa": "1"}, "memory", "2048", true},
		{"net default", nil, "net1", "virtio=BC:24:11:00:00:01,bridge=vmbr0", true},
		{"net hotplug 0", map[string]string{"hotplug": "0"}, "net1", "virtio=BC:24:11:00:00:01,bridge=vmbr0", false},
		{"net hotplug 1", map[string]string{"hotplug": "1"}, "net1", "virtio=BC:24:11:00:00:01,bridge=vmbr0", true},
		{"new scsi disk", nil, "scsi1", "local-lvm:vm-100-disk-1,size=4G", true},
		{"new scsi disk without disk hotplug", map[string]string{"hotplug": "network"}, "scsi1", "local-lvm:vm-100-disk-1,size=4G", false},
		{"new sata disk", nil, "sata1", "local-lvm:vm-100-disk-1,size=4G", false},
		{"efidisk", nil, "efidisk0", "local-lvm:vm-100-disk-2,size=4M", false},
		{"disk cache change", nil, "scsi0", "local-lvm:vm-100-disk-0,cache=writeback,iothread=1,size=32G", false},
		{"disk throttle change", nil, "scsi0", "local-lvm:vm-100-disk-0,iothread=1,mbps=100,size=32G", true},
		{"cdrom medium", map[string]string{"ide2": "none,media=cdrom"}, "ide2", "local:iso/x.iso,media=cdrom", true},
		{"ciuser", nil, "ciuser", "admin", true},
		{"ipconfig0", nil, "ipconfig0", "ip=dhcp", true},
		{"hotplug gaining cpu", nil, "hotplug", "network,disk,cpu", false},
		{"hotplug dropping usb", nil, "hotplug", "network,disk", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSim(t, pvesim.Options{})
			if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true, Config: tc.conf}); err != nil {
				t.Fatal(err)
			}
			if _, err := callData(t, s, "PUT", "/nodes/pve1/qemu/100/config", map[string]any{tc.key: tc.value}); err != nil {
				t.Fatal(err)
			}
			g, _ := s.Guest(100)
			_, pending := g.Pending[tc.key]
			if applied := !pending && g.Config[tc.key] == tc.value; applied != tc.applied {
				t.Fatalf("applied %v, want %v: config %q pending %q", applied, tc.applied, g.Config[tc.key], g.Pending[tc.key])
			}
		})
	}
}

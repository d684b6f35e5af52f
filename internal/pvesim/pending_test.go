package pvesim_test

import (
	"testing"

	"github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestPendingCleanupAndRevert follows Proxmox: every config write drops
// pending values equal to the applied ones and pending deletions of keys
// that are not set (PVE::AbstractConfig::cleanup_pending, called by
// qemu-server's and pve-container's update); revert may not name a key
// also set or deleted in the same request, nor an unknown one.
func TestPendingCleanupAndRevert(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Name: "app", Cores: 3, Running: true}); err != nil {
		t.Fatal(err)
	}
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 100)
	// Someone sets cores=1: pending on a running VM.
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 1}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Pending["cores"] != "1" {
		t.Fatalf("not pending: %+v", g)
	}
	// Writing the applied value back leaves nothing pending.
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 3}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); len(g.Pending) != 0 || g.Config["cores"] != "3" {
		t.Fatalf("a pending value equal to the applied one stays: %+v", g)
	}
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 1}); err != nil {
		t.Fatal(err)
	}
	errContains(t, vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 2},
		proxmox.VirtualMachineOption{Name: "revert", Value: "cores"}), "at the same time")
	errContains(t, vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "delete", Value: "cores"},
		proxmox.VirtualMachineOption{Name: "revert", Value: "cores"}), "at the same time")
	errContains(t, vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "revert", Value: "nosuchkey"}), "unknown option")
	if g, _ := s.Guest(100); g.Pending["cores"] != "1" {
		t.Fatalf("a refused request changed the guest: %+v", g)
	}
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "revert", Value: "cores"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); len(g.Pending) != 0 || g.Config["cores"] != "3" {
		t.Fatalf("after revert: %+v", g)
	}
}

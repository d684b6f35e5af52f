package pve_test

import (
	"slices"
	"testing"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSimHAAndDestroy drives HAResources, RemoveHA, Destroy and the
// HA/protection fields of the inventory and the config against the
// simulator.
func TestSimHAAndDestroy(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Config: map[string]string{"protection": "1"}},
		{VMID: 101, Running: true},
		{VMID: 102},
		{VMID: 103, Kind: pvesim.LXC},
		{VMID: 104, Kind: pvesim.LXC},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	for id, st := range map[int]string{101: "", 102: "started", 103: "stopped"} {
		if err := s.AddHAResource(id, st); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	vm := func(id int) pve.GuestRef { return pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: id} }
	ct := func(id int) pve.GuestRef { return pve.GuestRef{Kind: pve.KindLXC, Node: "pve1", VMID: id} }

	ha, err := c.HAResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []pve.HAResource{
		{SID: "vm:101", Type: "vm", VMID: 101, State: "started"},
		{SID: "vm:102", Type: "vm", VMID: 102, State: "started"},
		{SID: "ct:103", Type: "ct", VMID: 103, State: "stopped"},
	}; !slices.Equal(ha, want) {
		t.Fatalf("HAResources %+v, want %+v", ha, want)
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hastate := map[int]string{}
	for _, r := range inv {
		hastate[r.VMID] = r.HAState
	}
	if hastate[100] != "" || hastate[101] != "started" || hastate[103] != "stopped" {
		t.Fatalf("inventory HAState: %v", hastate)
	}
	for id, want := range map[int]bool{100: true, 102: false} {
		gc, err := c.GuestConfig(ctx, vm(id))
		if err != nil || gc.Protected != want {
			t.Fatalf("GuestConfig(%d).Protected: %+v %v", id, gc, err)
		}
	}

	// Destroy: refused for a protected or running guest, a locked
	// container; gone for a missing one; purges HA otherwise.
	_, err = c.Destroy(ctx, vm(100))
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Destroy(ctx, vm(101))
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Destroy(ctx, vm(999))
	wantClass(t, err, pve.ClassGone)
	if err := s.LockGuest(104, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.Destroy(ctx, ct(104))
	wantClass(t, err, pve.ClassLocked)
	// without purge (Delete), an HA-managed guest is refused for good
	_, err = c.Delete(ctx, ct(103), false, false)
	wantClass(t, err, pve.ClassTerminal)
	tr, err := c.Destroy(ctx, vm(102))
	res := mustWait(t, c, tr, err)
	if !res.OK {
		t.Fatalf("destroy: %+v", res)
	}
	if _, ok := s.Guest(102); ok {
		t.Fatal("destroyed guest still exists")
	}
	ha, _ = c.HAResources(ctx)
	if len(ha) != 2 || ha[0].VMID != 101 || ha[1].VMID != 103 {
		t.Fatalf("HA after destroy: %+v", ha)
	}

	// RemoveHA: a guest HA does not manage is already done
	if err := c.RemoveHA(ctx, ct(103)); err != nil {
		t.Fatal(err)
	}
	wantClass(t, c.RemoveHA(ctx, ct(103)), pve.ClassAlreadyDone)
	wantClass(t, c.RemoveHA(ctx, vm(100)), pve.ClassAlreadyDone)
	if ha := s.HAResources(); len(ha) != 1 || ha[0].SID != "vm:101" {
		t.Fatalf("HA after RemoveHA: %+v", ha)
	}
}

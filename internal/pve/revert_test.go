package pve_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSimRevertDropsPendingValue: a pending value (someone set cores=1 on a
// running VM: Proxmox keeps it until restart) is dropped by the revert
// parameter; the applied value stays, nothing else is written, and a
// reboot no longer changes the guest.
func TestSimRevertDropsPendingValue(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Cores: 3, Running: true}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}
	if _, err := c.UpdateConfig(tctx(t), ref, pve.ConfigChange{Set: map[string]string{"cores": "1"}}); err != nil {
		t.Fatal(err)
	}
	gc, err := c.GuestConfig(tctx(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	if gc.Cores != 3 || gc.ManagedPending()["cores"] != "1" {
		t.Fatalf("before revert: cores %d, pending %v", gc.Cores, gc.ManagedPending())
	}
	tr, err := c.UpdateConfig(tctx(t), ref, pve.ConfigChange{Revert: []string{"cores"}, Digest: gc.Digest})
	if err != nil || !tr.IsZero() {
		t.Fatalf("revert: %+v, %v", tr, err)
	}
	gc2, err := c.GuestConfig(tctx(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	if gc2.Cores != 3 || gc2.HasPending() {
		t.Fatalf("after revert: cores %d, pending %v %v", gc2.Cores, gc2.Pending, gc2.PendingDelete)
	}
	tr, err = c.Reboot(tctx(t), ref, 0)
	mustWait(t, c, tr, err)
	if gc3, _ := c.GuestConfig(tctx(t), ref); gc3.Cores != 3 {
		t.Fatalf("after reboot: cores %d", gc3.Cores)
	}
}

// TestConfigChangeRevertValidation: revert names config keys (LXC's name as
// hostname), never a key also set or deleted in the same change (Proxmox
// refuses both), and a revert alone is a change.
func TestConfigChangeRevertValidation(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Cores: 3, Running: true}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}
	for _, ch := range []pve.ConfigChange{
		{Revert: []string{"Bad Key"}},
		{Revert: []string{"digest"}},
		{Set: map[string]string{"cores": "2"}, Revert: []string{"cores"}},
		{Delete: []string{"description"}, Revert: []string{"description"}},
	} {
		if _, err := c.UpdateConfig(tctx(t), ref, ch); pve.Classify(err) != pve.ClassTerminal {
			t.Errorf("UpdateConfig(%+v) class = %v (%v), want terminal", ch, pve.Classify(err), err)
		}
	}
	before := s.Mutations()
	if _, err := c.UpdateConfig(tctx(t), ref, pve.ConfigChange{Revert: []string{"cores"}}); err != nil {
		t.Fatalf("revert alone: %v", err)
	}
	if s.Mutations() == before {
		t.Fatal("a revert alone sent nothing")
	}
}

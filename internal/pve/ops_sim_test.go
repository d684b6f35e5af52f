package pve_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

func vmRef(node string, id int) pve.GuestRef {
	return pve.GuestRef{Kind: pve.KindQEMU, Node: node, VMID: id}
}

func ctRef(node string, id int) pve.GuestRef {
	return pve.GuestRef{Kind: pve.KindLXC, Node: node, VMID: id}
}

// TestSimResize drives Resize: a QEMU resize task, shrinking refused in
// the task (ClassTerminal), a container already at the size
// (ClassAlreadyDone) and a locked one (ClassLocked).
func TestSimResize(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Running: true}, {VMID: 101, Kind: pvesim.LXC}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	tr, err := c.Resize(ctx, vmRef("pve1", 100), "scsi0", "+8G")
	if res := mustWait(t, c, tr, err); !res.OK {
		t.Fatalf("resize %+v", res)
	}
	if g, _ := s.Guest(100); g.Config["scsi0"] != "local-lvm:vm-100-disk-0,iothread=1,size=40G" {
		t.Fatalf("scsi0 %s", g.Config["scsi0"])
	}
	tr, err = c.Resize(ctx, vmRef("pve1", 100), "scsi0", "16G")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Resize(ctx, ctRef("pve1", 101), "rootfs", "8G")
	wantClass(t, err, pve.ClassAlreadyDone)
	_, err = c.Resize(ctx, ctRef("pve1", 101), "rootfs", "-1G")
	wantClass(t, err, pve.ClassTerminal)
	if err := s.LockGuest(101, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.Resize(ctx, ctRef("pve1", 101), "rootfs", "+1G")
	wantClass(t, err, pve.ClassLocked)
}

// TestSimMigrate drives Migrate: a live migration with local disks moves
// the VM, a running VM without Online is ClassTerminal, a container in
// restart mode runs on the target afterwards.
func TestSimMigrate(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Running: true}, {VMID: 101, Kind: pvesim.LXC, Running: true}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	_, err := c.Migrate(ctx, vmRef("pve1", 100), pve.MigrateSpec{Target: "pve2"})
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Migrate(ctx, vmRef("pve1", 100), pve.MigrateSpec{Target: "pve1", Online: true})
	wantClass(t, err, pve.ClassTerminal)
	tr, err := c.Migrate(ctx, vmRef("pve1", 100), pve.MigrateSpec{Target: "pve2", Online: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
	wantClass(t, err, pve.ClassTerminal) // local disks without WithLocalDisks
	tr, err = c.Migrate(ctx, vmRef("pve1", 100), pve.MigrateSpec{Target: "pve2", Online: true, WithLocalDisks: true})
	mustWait(t, c, tr, err)
	tr, err = c.Migrate(ctx, ctRef("pve1", 101), pve.MigrateSpec{Target: "pve2", Restart: true, Timeout: 30 * time.Second})
	mustWait(t, c, tr, err)
	for _, id := range []int{100, 101} {
		if g, _ := s.Guest(id); g.Node != "pve2" || g.Status != "running" {
			t.Fatalf("after migration: %+v", g)
		}
	}
}

// TestSimHAOps drives HASetState and HAMigrate: both return before the HA
// stack acts.
func TestSimHAOps(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, HADelay: time.Hour})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHAResource(100, ""); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ctx := tctx(t)
	if err := c.HAMigrate(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}, "pve2"); err != nil {
		t.Fatal(err)
	}
	if err := c.HASetState(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}, "stopped"); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Node != "pve1" || g.Status != "running" {
		t.Fatalf("acted before the HA round: %+v", g)
	}
	s.RunHA()
	if err := s.WaitHA(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Node != "pve2" {
		t.Fatalf("after the HA round: %+v", g)
	}
	wantClass(t, c.HAMigrate(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 999}, "pve2"), pve.ClassTerminal)
}

package pve_test

import (
	"testing"

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

package pve_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSimSnapshots drives Snapshot, Snapshots and DeleteSnapshot over
// HTTP: tasks found by their types, a reused name ClassConflict, a locked
// guest ClassLocked, deleting a missing snapshot ClassAlreadyDone.
func TestSimSnapshots(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Running: true}, {VMID: 101, Kind: pvesim.LXC}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	since := time.Now()
	for _, ref := range []pve.GuestRef{vmRef("pve1", 100), ctRef("pve1", 101)} {
		tr, err := c.Snapshot(ctx, ref, "before-upgrade", "pre")
		if res := mustWait(t, c, tr, err); !res.OK {
			t.Fatalf("snapshot %+v", res)
		}
		tr, err = c.Snapshot(ctx, ref, "after", "")
		mustWait(t, c, tr, err)
		snaps, err := c.Snapshots(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if len(snaps) != 2 || snaps[0].Name != "before-upgrade" || snaps[1].Parent != "before-upgrade" ||
			snaps[0].VMState || snaps[0].State != "" || snaps[0].Time.Before(since.Truncate(time.Second)) {
			t.Fatalf("%v: snapshots %+v", ref, snaps)
		}
		found, ok, err := c.FindTask(ctx, ref, pve.OpSnapshot, since)
		if err != nil || !ok || pve.TaskTypes(ref.Kind, pve.OpSnapshot)[0] != mustUPID(t, found.UPID).Type {
			t.Fatalf("%v: find snapshot task %+v %v %v", ref, found, ok, err)
		}
		tr, err = c.Snapshot(ctx, ref, "after", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
		wantClass(t, err, pve.ClassConflict)
		tr, err = c.DeleteSnapshot(ctx, ref, "before-upgrade")
		mustWait(t, c, tr, err)
		if snaps, _ := c.Snapshots(ctx, ref); len(snaps) != 1 || snaps[0].Parent != "" {
			t.Fatalf("%v: after delete %+v", ref, snaps)
		}
		if _, ok, err := c.FindTask(ctx, ref, pve.OpDeleteSnapshot, since); !ok || err != nil {
			t.Fatalf("%v: find delete task %v %v", ref, ok, err)
		}
		tr, err = c.DeleteSnapshot(ctx, ref, "before-upgrade")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
		wantClass(t, err, pve.ClassAlreadyDone)
	}
	_, err := c.Snapshot(ctx, vmRef("pve1", 100), "current", "")
	wantClass(t, err, pve.ClassTerminal)
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Snapshot(ctx, vmRef("pve1", 100), "locked", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
	wantClass(t, err, pve.ClassLocked)
}

func mustUPID(t *testing.T, s string) pve.UPID {
	t.Helper()
	u, err := pve.ParseUPID(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSimRegenerateCloudInit drives RegenerateCloudInit: the simulator
// counts the drive's generations; a VM without a drive succeeds without
// one, a locked VM is ClassLocked, a container ClassTerminal.
func TestSimRegenerateCloudInit(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Config: map[string]string{
		"ide2": "local-lvm:vm-100-cloudinit,media=cdrom", "ciuser": "alice"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 101}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ctx := tctx(t)
	if err := c.RegenerateCloudInit(ctx, vmRef("pve1", 100)); err != nil {
		t.Fatal(err)
	}
	if ci, _ := s.CloudInit(100); ci.Generations != 1 || ci.Values["ciuser"] != "alice" {
		t.Fatalf("cloud-init %+v", ci)
	}
	if err := c.RegenerateCloudInit(ctx, vmRef("pve1", 101)); err != nil {
		t.Fatal(err)
	}
	wantClass(t, c.RegenerateCloudInit(ctx, ctRef("pve1", 101)), pve.ClassTerminal)
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	wantClass(t, c.RegenerateCloudInit(ctx, vmRef("pve1", 100)), pve.ClassLocked)
}

// TestSimPools drives CreatePool, Pools and SetPool: membership shows in
// the simulator's /cluster/resources pool field, a second add or remove
// is ClassAlreadyDone, a guest moves between pools.
func TestSimPools(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ctx := tctx(t)
	if err := c.CreatePool(ctx, "web", "Web tier"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePool(ctx, "db", ""); err != nil {
		t.Fatal(err)
	}
	wantClass(t, c.CreatePool(ctx, "web", ""), pve.ClassAlreadyDone)
	wantClass(t, c.CreatePool(ctx, "bad pool", ""), pve.ClassTerminal)
	pools, err := c.Pools(ctx)
	if err != nil || len(pools) != 2 || pools[1] != (pve.Pool{ID: "web", Comment: "Web tier"}) {
		t.Fatalf("pools %+v %v", pools, err)
	}
	poolOf := func() string {
		g, _ := s.Guest(100)
		return g.Pool
	}
	if err := c.SetPool(ctx, "web", 100, false); err != nil || poolOf() != "web" {
		t.Fatalf("add: %v, pool %q", err, poolOf())
	}
	wantClass(t, c.SetPool(ctx, "web", 100, false), pve.ClassAlreadyDone)
	if err := c.SetPool(ctx, "db", 100, false); err != nil || poolOf() != "db" {
		t.Fatalf("move: %v, pool %q", err, poolOf())
	}
	if err := c.SetPool(ctx, "db", 100, true); err != nil || poolOf() != "" {
		t.Fatalf("remove: %v, pool %q", err, poolOf())
	}
	wantClass(t, c.SetPool(ctx, "db", 100, true), pve.ClassAlreadyDone)
	wantClass(t, c.SetPool(ctx, "nope", 100, false), pve.ClassTerminal)
}

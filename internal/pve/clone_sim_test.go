package pve_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSimClonePoolAndChecks covers CloneSpec.Pool and how clone refusals
// and the storage lock fault classify.
func TestSimClonePoolAndChecks(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, DemoTemplates: true, Pools: []string{"prod"}})
	c := newClient(t, s)
	ctx := tctx(t)
	tpl := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 9000}
	full := true

	_, err := c.Clone(ctx, tpl, pve.CloneSpec{NewID: 120, Pool: "nope"})
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Clone(ctx, tpl, pve.CloneSpec{NewID: 120, Storage: "local-lvm"}) // linked, with storage
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Clone(ctx, tpl, pve.CloneSpec{NewID: 120, TargetNode: "pve2"}) // from local storage
	wantClass(t, err, pve.ClassTerminal)
	_, err = c.Clone(ctx, tpl, pve.CloneSpec{NewID: 120, TargetNode: "pve2", Full: &full, Storage: "local-lvm"})
	wantClass(t, err, pve.ClassTerminal)

	tr, err := c.Clone(ctx, tpl, pve.CloneSpec{NewID: 120, Pool: "prod"})
	mustWait(t, c, tr, err)
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range inv {
		if r.VMID == 120 && r.Pool != "prod" {
			t.Fatalf("clone's pool: %+v", r)
		}
	}

	// storage lock contention fails the task; it is a lock to wait out
	_ = s.SetFaults(pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour), StorageCloneLimit: 1})
	first, err := c.Clone(ctx, tpl, pve.CloneSpec{NewID: 121, Full: &full})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Clone(ctx, tpl, pve.CloneSpec{NewID: 122, Full: &full})
	if err != nil {
		t.Fatal(err)
	}
	s.CompleteRunningTasks()
	mustWait(t, c, first, nil)
	_, err = c.WaitTask(ctx, second, pve.WaitOptions{})
	wantClass(t, err, pve.ClassLocked)

	// a second clone of a container source while one runs: its "disk" lock
	ctpl := pve.GuestRef{Kind: pve.KindLXC, Node: "pve1", VMID: 9001}
	if _, err := c.Clone(ctx, ctpl, pve.CloneSpec{NewID: 130}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Clone(ctx, ctpl, pve.CloneSpec{NewID: 131})
	wantClass(t, err, pve.ClassLocked)
	s.CompleteRunningTasks()
	// a taken id, either kind
	_, err = c.Clone(ctx, ctpl, pve.CloneSpec{NewID: 120})
	wantClass(t, err, pve.ClassConflict)
}

// TestSimFindClone finds the clone task into one vmid among clones of the
// same template into others, running or finished, and nothing for a vmid
// no clone targets or before since.
func TestSimFindClone(t *testing.T) {
	s := startSim(t, pvesim.Options{DemoTemplates: true})
	c := newClient(t, s)
	ctx := tctx(t)
	tpl := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 9000}
	ctpl := pve.GuestRef{Kind: pve.KindLXC, Node: "pve1", VMID: 9001}
	find := func(src pve.GuestRef, newid int, since time.Time) (pve.TaskRef, bool) {
		t.Helper()
		tr, found, err := c.FindClone(ctx, src, newid, since)
		if err != nil {
			t.Fatalf("FindClone(%v, %d): %v", src, newid, err)
		}
		return tr, found
	}

	planned := time.Now()
	var issued []pve.TaskRef
	for _, id := range []int{120, 121, 122} { // 122 is the newest
		tr, err := c.Clone(ctx, tpl, pve.CloneSpec{NewID: id})
		mustWait(t, c, tr, err)
		issued = append(issued, tr)
	}
	for i, id := range []int{120, 121, 122} {
		if tr, found := find(tpl, id, planned); !found || tr != issued[i] {
			t.Fatalf("FindClone(%d) = %+v %v, want %+v", id, tr, found, issued[i])
		}
	}
	if tr, found := find(tpl, 130, planned); found {
		t.Fatalf("a clone into 130 found: %+v", tr)
	}
	u, err := pve.ParseUPID(issued[0].UPID)
	if err != nil {
		t.Fatal(err)
	}
	if tr, found := find(tpl, 120, u.StartTime.Add(time.Second)); found {
		t.Fatalf("a clone found before since: %+v", tr)
	}
	// another source's clones are not this one's
	if tr, found := find(pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 9001}, 120, planned); found {
		t.Fatalf("clone found for the wrong source: %+v", tr)
	}

	// running: found while the task runs
	_ = s.SetFaults(pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)})
	running, err := c.Clone(ctx, ctpl, pve.CloneSpec{NewID: 140})
	if err != nil {
		t.Fatal(err)
	}
	if tr, found := find(ctpl, 140, planned); !found || tr != running {
		t.Fatalf("running clone: %+v %v, want %+v", tr, found, running)
	}
	s.CompleteRunningTasks()
	if tr, found := find(ctpl, 140, planned); !found || tr != running {
		t.Fatalf("finished clone: %+v %v, want %+v", tr, found, running)
	}
	_, _, err = c.FindClone(ctx, tpl, 5, planned)
	wantClass(t, err, pve.ClassTerminal)
}

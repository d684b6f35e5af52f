package pve_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// TestSimFindTask runs FindTask against the simulator's task list: the task
// a mutation started is found (finished or still running), by operation,
// guest and start second; nothing else is.
func TestSimFindTask(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100}, {VMID: 101}, {VMID: 102}, {VMID: 103}, {VMID: 200, Kind: pvesim.LXC}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	vm := func(id int) pve.GuestRef { return pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: id} }
	ct := pve.GuestRef{Kind: pve.KindLXC, Node: "pve1", VMID: 200}
	find := func(ref pve.GuestRef, op pve.Op, since time.Time) (pve.TaskRef, bool) {
		t.Helper()
		tr, found, err := c.FindTask(ctx, ref, op, since)
		if err != nil {
			t.Fatalf("FindTask(%v, %s): %v", ref, op, err)
		}
		return tr, found
	}

	planned := time.Now() // the action's time, before Proxmox saw anything
	start100, err := c.Start(ctx, vm(100))
	mustWait(t, c, start100, err)
	start101, err := c.Start(ctx, vm(101)) // newer, same type, another guest
	mustWait(t, c, start101, err)

	if tr, found := find(vm(100), pve.OpStart, planned); !found || tr != start100 {
		t.Fatalf("found %+v (%v), want the issued task %+v", tr, found, start100)
	}
	if tr, found := find(vm(101), pve.OpStart, planned); !found || tr != start101 {
		t.Fatalf("found %+v (%v), want %+v", tr, found, start101)
	}
	// Another operation of the guest: nothing.
	if tr, found := find(vm(100), pve.OpStop, planned); found {
		t.Fatalf("a stop task found for a guest only started: %+v", tr)
	}
	// A guest without tasks: nothing, and no error.
	if tr, found := find(vm(102), pve.OpStart, planned); found || !tr.IsZero() {
		t.Fatalf("a task found for a guest without any: %+v", tr)
	}
	// since is compared in whole seconds: a since within the task's start
	// second still finds it; the next second does not.
	u, err := pve.ParseUPID(start100.UPID)
	if err != nil {
		t.Fatal(err)
	}
	if _, found := find(vm(100), pve.OpStart, u.StartTime.Add(999*time.Millisecond)); !found {
		t.Fatal("a since within the task's start second must find it")
	}
	if tr, found := find(vm(100), pve.OpStart, u.StartTime.Add(time.Second)); found {
		t.Fatalf("a task started before since found: %+v", tr)
	}

	// A task still running is found too (source=all): the killed executor's
	// task may not have ended.
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.CompleteRunningTasks() })
	shut, err := c.Shutdown(ctx, vm(100), time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	if tr, found := find(vm(100), pve.OpShutdown, planned); !found || tr != shut {
		t.Fatalf("running shutdown: found %+v (%v), want %+v", tr, found, shut)
	}
	if tr, found := find(vm(100), pve.OpStart, planned); !found || tr != start100 {
		t.Fatalf("the start task after a shutdown: %+v (%v)", tr, found)
	}
	s.CompleteRunningTasks()
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = 0 }); err != nil {
		t.Fatal(err)
	}

	// LXC: vz* types; a config write is synchronous, so there is no task.
	ctStart, err := c.Start(ctx, ct)
	mustWait(t, c, ctStart, err)
	if tr, found := find(ct, pve.OpStart, planned); !found || tr != ctStart {
		t.Fatalf("lxc start: found %+v (%v), want %+v", tr, found, ctStart)
	}
	tr, err := c.UpdateConfig(ctx, ct, pve.ConfigChange{Set: map[string]string{"cores": "2"}})
	if err != nil || !tr.IsZero() {
		t.Fatalf("lxc config: %+v, %v", tr, err)
	}
	if tr, found := find(ct, pve.OpUpdateConfig, planned); found {
		t.Fatalf("an LXC config task found: %+v", tr)
	}
	// QEMU config writes are tasks. Without background_delay the write
	// answers with it.
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.ConfigTaskWait = s.URL(), pvesimtest.TokenID, pvesimtest.TokenSecret, 0
	async, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	cfgTask, err := async.UpdateConfig(ctx, vm(102), pve.ConfigChange{Set: map[string]string{"cores": "2"}})
	mustWait(t, c, cfgTask, err)
	if cfgTask.IsZero() {
		t.Fatal("a QEMU config write without background_delay must start a task")
	}
	if tr, found := find(vm(102), pve.OpUpdateConfig, planned); !found || tr != cfgTask {
		t.Fatalf("qemu config: found %+v (%v), want %+v", tr, found, cfgTask)
	}
	// With it (the default), a drive change is a POST, and a task that
	// finished within the wait is not named in the answer, but is found: a
	// redelivery adopts it. A change without drives is the synchronous
	// PUT: no task, as for a container.
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 190, Node: "pve1"}); err != nil {
		t.Fatal(err)
	}
	tr, err = c.UpdateConfig(ctx, vm(190), pve.ConfigChange{Set: map[string]string{"cores": "2"}})
	if err != nil || !tr.IsZero() {
		t.Fatalf("qemu config PUT: %+v, %v", tr, err)
	}
	if tr, found := find(vm(190), pve.OpUpdateConfig, planned); found {
		t.Fatalf("a task found for a synchronous PUT: %+v", tr)
	}
	tr, err = c.UpdateConfig(ctx, vm(103), pve.ConfigChange{Set: map[string]string{"scsi1": "local-lvm:1"}})
	if err != nil || !tr.IsZero() {
		t.Fatalf("qemu config within background_delay: %+v, %v", tr, err)
	}
	if tr, found := find(vm(103), pve.OpUpdateConfig, planned); !found || tr.IsZero() {
		t.Fatalf("the config task of a write answered without it: %+v (%v)", tr, found)
	}

	// Proxmox unreachable: a transient error, never "not found".
	s.SetUnreachable(time.Hour)
	tr, found, err := c.FindTask(ctx, vm(100), pve.OpStart, planned)
	wantClass(t, err, pve.ClassTransient)
	if found || !tr.IsZero() {
		t.Fatalf("unreachable: found %+v", tr)
	}
	s.SetUnreachable(0)
}

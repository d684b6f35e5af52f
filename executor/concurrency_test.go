package executor_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestGuestsInParallel: a guest whose task runs for an hour does not hold
// up another guest's action (invariant 1, "different guests run in
// parallel"), even one of the same partition (one consumer, one owner).
func TestGuestsInParallel(t *testing.T) {
	v := newEnv(t)
	other := 102
	for events.Partition(cluster, other, v.b.Config().Partitions) != events.Partition(cluster, 101, v.b.Config().Partitions) {
		other++
	}
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	v.addGuest(pvesim.GuestSpec{VMID: other})
	v.run(config(), nil)

	v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Hour) })
	slow := action(101, events.OpStart)
	v.publishAction(slow)
	started := v.waitResult(101, slow.ID, events.ResultStarted)

	v.faults(func(f *pvesim.Faults) { f.TaskLatency = 0 })
	fast := action(other, events.OpStart)
	v.publishAction(fast)
	if r := v.waitResult(other, fast.ID, "final"); r.Status != events.ResultSucceeded {
		t.Fatalf("guest %d: %+v", other, r.Result)
	}
	if rs := finals(of(v.results(101), slow.ID)); len(rs) != 0 {
		t.Fatalf("guest 101 finished: %+v", rs)
	}
	for _, ti := range v.tasks(101, "qmstart") {
		if ti.UPID != started.UPID || !ti.Running {
			t.Fatalf("guest 101's task: %+v", ti)
		}
	}
}

// TestGuestSerial: two actions of one guest never overlap, even when the
// second arrives while the first is in progress (invariant 1, "per guest
// one at a time, in order").
func TestGuestSerial(t *testing.T) {
	v := newEnv(t)
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	v.run(config(), nil)
	v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(300 * time.Millisecond) })

	first := action(101, events.OpStart)
	v.publishAction(first)
	v.waitResult(101, first.ID, events.ResultStarted)
	second := action(101, events.OpSetConfig)
	// A drive: a POST and a qmconfig task (a change without drives is a
	// synchronous PUT, no task to order).
	second.Set = map[string]string{"scsi1": "local-lvm:1"}
	v.publishAction(second)

	f1 := v.waitResult(101, first.ID, "final")
	// The config task ends within background_delay: no "started".
	f2 := v.waitResult(101, second.ID, "final")
	if f1.Status != events.ResultSucceeded || f2.Status != events.ResultSucceeded {
		t.Fatalf("results: %+v / %+v", f1.Result, f2.Result)
	}
	if rs := of(v.results(101), second.ID); len(rs) != 1 || f2.Seq < f1.Seq {
		t.Fatalf("second action's results %+v, the first finished at seq %d", rs, f1.Seq)
	}
	tasks := v.tasks(101, "")
	if len(tasks) != 2 || tasks[0].Type != "qmstart" || tasks[1].Type != "qmconfig" || tasks[1].Start.Before(tasks[0].End) {
		t.Fatalf("tasks overlap or out of order: %+v", tasks)
	}
}

// TestGracefulStop: when Run's context ends, in-flight actions finish
// within the drain bound; past it they are abandoned un-acknowledged, with
// no final result made up.
func TestGracefulStop(t *testing.T) {
	t.Run("drain", func(t *testing.T) {
		v := newEnv(t)
		v.addGuest(pvesim.GuestSpec{VMID: 101})
		v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(200 * time.Millisecond) })
		ex := v.run(config(func(c *executor.Config) { c.DrainTimeout = time.Minute }), nil)
		a := action(101, events.OpStart)
		v.publishAction(a)
		v.waitResult(101, a.ID, events.ResultStarted)
		if err := ex.stop(); err != nil {
			t.Fatal(err)
		}
		rs := of(v.results(101), a.ID)
		checkJournalled(t, rs, events.ResultSucceeded)
		if info := v.consumerInfo(); info.NumAckPending != 0 {
			t.Fatalf("%d unacknowledged after draining", info.NumAckPending)
		}
	})
	t.Run("abandon", func(t *testing.T) {
		v := newEnv(t)
		v.addGuest(pvesim.GuestSpec{VMID: 101})
		v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Hour) })
		ex := v.run(config(func(c *executor.Config) { c.DrainTimeout = 0 }), nil)
		a := action(101, events.OpStart)
		v.publishAction(a)
		v.waitResult(101, a.ID, events.ResultStarted)
		if err := ex.stop(); err != nil {
			t.Fatal(err)
		}
		if rs := of(v.results(101), a.ID); len(rs) != 1 {
			t.Fatalf("want only the started result, got %+v", rs)
		}
		if info := v.consumerInfo(); info.NumAckPending != 1 {
			t.Fatalf("%d unacknowledged, want the abandoned action", info.NumAckPending)
		}
	})
}

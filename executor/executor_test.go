package executor_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// checkJournalled asserts the action's results: one "started" with a UPID,
// journalled before exactly one final result of the given status that
// carries the same task and a fresh observation.
func checkJournalled(t *testing.T, rs []stored, want events.ResultStatus) stored {
	t.Helper()
	if len(rs) != 2 {
		t.Fatalf("want started + final, got %d results: %+v", len(rs), rs)
	}
	started, final := rs[0], rs[1]
	if started.Status != events.ResultStarted || started.UPID == "" || started.Node != node {
		t.Fatalf("first result %+v, want started with a UPID on %s", started.Result, node)
	}
	if final.Status != want || final.UPID != started.UPID {
		t.Fatalf("final result %s (upid %q, error %q), want %s on %s", final.Status, final.UPID, final.Error, want, started.UPID)
	}
	if final.Observed == nil || final.Observed.Source != events.SourceExecutor || final.Observed.ReadAt.IsZero() || !final.Observed.Exists {
		t.Fatalf("final result without a fresh observation: %+v", final.Observed)
	}
	return final
}

func checkMeta(t *testing.T, r stored, a events.Action) {
	t.Helper()
	if r.CorrelationID != a.CorrelationID || r.Publisher != "exec-test" || r.Executor != "exec-test" ||
		r.Op != a.Op || r.VMID != a.VMID || r.Cluster != cluster || r.Schema != events.SchemaVersion {
		t.Fatalf("result meta %+v does not match action %s", r.Result, a.ID)
	}
}

// TestPowerAndConfig drives every operation through the simulator with
// asynchronous tasks: each journals "started" with its UPID before the
// final result, which embeds the guest as read back.
func TestPowerAndConfig(t *testing.T) {
	v := newEnv(t)
	v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(20 * time.Millisecond) })
	v.addGuest(pvesim.GuestSpec{VMID: 101, Name: "web", Tags: []string{"b", "a"}})
	v.addGuest(pvesim.GuestSpec{VMID: 201, Kind: pvesim.LXC, Name: "ct", Running: true})
	v.run(config(), nil)

	do := func(a events.Action, want events.ResultStatus) stored {
		t.Helper()
		v.publishAction(a)
		v.waitResult(a.VMID, a.ID, "final")
		final := checkJournalled(t, of(v.results(a.VMID), a.ID), want)
		checkMeta(t, final, a)
		return final
	}

	start := action(101, events.OpStart)
	r := do(start, events.ResultSucceeded)
	if o := r.Observed; o.Status != "running" || o.Node != node || o.Kind != events.QEMU || o.Digest == "" ||
		o.Config.Name != "web" || !slices.Equal(o.Config.Tags, []string{"a", "b"}) || o.VMID != 101 || o.Cluster != cluster {
		t.Fatalf("observation after start: %+v", o)
	}
	if len(v.tasks(101, "qmstart")) != 1 {
		t.Fatalf("tasks: %+v", v.sim.Tasks())
	}

	// A running QEMU guest takes name and tags at once; cores wait for a
	// restart (pending, not applied). The config task ends within
	// background_delay: Proxmox answers without it, so there is no task
	// to journal, only the final result.
	set := action(101, events.OpSetConfig)
	set.Set = map[string]string{"name": "web2", "tags": "x;y", "cores": "2"}
	set.Digest = v.digest(qemu(101))
	v.publishAction(set)
	v.waitResult(101, set.ID, "final")
	rs := of(v.results(101), set.ID)
	if len(rs) != 1 || rs[0].Status != events.ResultSucceeded || rs[0].UPID != "" || rs[0].Observed == nil {
		t.Fatalf("set_config results: %+v", rs)
	}
	checkMeta(t, rs[0], set)
	o := rs[0].Observed
	if o.Config.Name != "web2" || !slices.Equal(o.Config.Tags, []string{"x", "y"}) || o.Config.Cores != 1 {
		t.Fatalf("applied config after set_config: %+v", o.Config)
	}
	if len(o.Pending) != 1 || o.Pending["cores"] != "2" {
		t.Fatalf("pending after set_config: %v", o.Pending)
	}
	if o.Digest == set.Digest {
		t.Fatal("digest unchanged by a config write")
	}

	shutdown := action(101, events.OpShutdown)
	shutdown.Timeout = 5 * time.Second
	if r := do(shutdown, events.ResultSucceeded); r.Observed.Status != "stopped" {
		t.Fatalf("after shutdown: %+v", r.Observed)
	}
	if r := do(action(101, events.OpStart), events.ResultSucceeded); r.Observed.Status != "running" || r.Observed.Config.Cores != 2 || len(r.Observed.Pending) != 0 {
		t.Fatalf("after restart (pending applied): %+v", r.Observed)
	}
	if r := do(action(101, events.OpReboot), events.ResultSucceeded); r.Observed.Status != "running" {
		t.Fatalf("after reboot: %+v", r.Observed)
	}
	if r := do(action(101, events.OpStop), events.ResultSucceeded); r.Observed.Status != "stopped" {
		t.Fatalf("after stop: %+v", r.Observed)
	}

	// LXC config writes are synchronous: no task, no "started".
	ct := action(201, events.OpSetConfig)
	ct.Kind = events.LXC
	ct.Set = map[string]string{"name": "ct2", "description": "hello\n"}
	v.publishAction(ct)
	fin := v.waitResult(201, ct.ID, "final")
	if rs := of(v.results(201), ct.ID); len(rs) != 1 || fin.Status != events.ResultSucceeded || fin.UPID != "" {
		t.Fatalf("lxc set_config results: %+v", rs)
	}
	if o := fin.Observed; o == nil || o.Config.Name != "ct2" || o.Config.Description != "hello" || o.Kind != events.LXC || o.Status != "running" {
		t.Fatalf("lxc observation: %+v", o)
	}
	if info := v.consumerInfo(); info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Fatalf("consumer: %d pending, %d redelivered", info.NumAckPending, info.NumRedelivered)
	}
}

// TestSlowConfigTask: a QEMU config task that outlasts background_delay is
// answered with its UPID, which is journalled as "started" before the
// final result, as for any other task.
func TestSlowConfigTask(t *testing.T) {
	v := newEnv(t)
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.ConfigTaskWait = v.url, pvesimtest.TokenID, pvesimtest.TokenSecret, time.Second
	px, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	v.px = px
	v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(3 * time.Second) })
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	v.run(config(), nil)
	set := action(101, events.OpSetConfig)
	// A new drive: a POST (a change without drives is a synchronous PUT).
	set.Set = map[string]string{"scsi1": "local-lvm:1"}
	v.publishAction(set)
	v.waitResult(101, set.ID, "final")
	final := checkJournalled(t, of(v.results(101), set.ID), events.ResultSucceeded)
	if _, ok := final.Observed.Config.Disks["scsi1"]; !ok {
		t.Fatalf("observation after the slow task: %+v", final.Observed.Config)
	}
}

// TestStaleActionSkipped: an action planned from a superseded desired
// revision or observation, or followed by a newer action, is journalled as
// skipped and never reaches Proxmox (invariant 2).
func TestStaleActionSkipped(t *testing.T) {
	v := newEnv(t)
	for _, id := range []int{101, 102, 103, 104, 105, 106, 107} {
		v.addGuest(pvesim.GuestSpec{VMID: id})
	}
	desired := func(vmid int, body string) uint64 {
		return v.publish(events.KindDesired, vmid, []byte(body), nil)
	}
	observed := func(vmid int, readAt time.Time) uint64 {
		return v.publish(events.KindObserved, vmid, events.Observed{
			Meta: events.NewMeta("observer", "", readAt), VMID: vmid, Cluster: cluster, Exists: true,
			Node: node, Kind: events.QEMU, Status: "stopped", ReadAt: readAt, Source: events.SourceObserver,
		}, nil)
	}

	// 101: a newer desired revision.
	d1 := desired(101, `{"vmid":101,"power":"running"}`)
	d2 := desired(101, `{"vmid":101,"power":"running","cores":2}`)
	a101 := action(101, events.OpStart)
	a101.DesiredSeq = d1

	// 102: an invalid desired event is rejected by the projector, so it
	// supersedes nothing: the action runs.
	d3 := desired(102, `{"vmid":102,"power":"running"}`)
	desired(102, `{"vmid":102,"power":"sideways"}`)
	a102 := action(102, events.OpStart)
	a102.DesiredSeq = d3

	// 103: a newer observation.
	now := time.Now()
	b1 := observed(103, now)
	b2 := observed(103, now.Add(time.Second))
	a103 := action(103, events.OpStart)
	a103.BasisSeq = b1

	// 104: an observation read before the basis but published after it is
	// ignored by the projector, so it does not fence.
	b3 := observed(104, now)
	observed(104, now.Add(-time.Second))
	a104 := action(104, events.OpStart)
	a104.BasisSeq = b3

	// 106: a newer valid revision followed by an invalid one: the newest
	// event cannot fence, the one before it does.
	d4 := desired(106, `{"vmid":106,"power":"running"}`)
	d5 := desired(106, `{"vmid":106,"power":"running","cores":3}`)
	desired(106, `{"vmid":106,"power":"sideways"}`)
	a106 := action(106, events.OpStart)
	a106.DesiredSeq = d4

	// 107: a newer observation followed by one read before the basis.
	b4 := observed(107, now)
	b5 := observed(107, now.Add(time.Second))
	observed(107, now.Add(-time.Second))
	a107 := action(107, events.OpStart)
	a107.BasisSeq = b4

	// 105: two actions; the older one is superseded by the newer.
	old, newer := action(105, events.OpStart), action(105, events.OpStart)
	v.publishAction(old)
	newerSeq := v.publishAction(newer)

	for _, a := range []events.Action{a101, a102, a103, a104, a106, a107} {
		v.publishAction(a)
	}
	v.run(config(), nil)

	for _, tc := range []struct {
		a      events.Action
		status events.ResultStatus
		reason string
	}{
		{a101, events.ResultSkipped, "superseded by desired revision " + itoa(d2)},
		{a102, events.ResultSucceeded, ""},
		{a103, events.ResultSkipped, "superseded by observation " + itoa(b2)},
		{a104, events.ResultSucceeded, ""},
		{a106, events.ResultSkipped, "superseded by desired revision " + itoa(d5)},
		{a107, events.ResultSkipped, "superseded by observation " + itoa(b5)},
		{old, events.ResultSkipped, "superseded by action " + itoa(newerSeq)},
		{newer, events.ResultSucceeded, ""},
	} {
		r := v.waitResult(tc.a.VMID, tc.a.ID, "final")
		if r.Status != tc.status || r.Reason != tc.reason {
			t.Errorf("vmid %d: %s %q, want %s %q", tc.a.VMID, r.Status, r.Reason, tc.status, tc.reason)
		}
		if tc.status == events.ResultSkipped {
			if n := len(v.tasks(tc.a.VMID, "")); tc.a.VMID != 105 && n != 0 {
				t.Errorf("vmid %d: skipped action reached Proxmox: %+v", tc.a.VMID, v.tasks(tc.a.VMID, ""))
			}
			if rs := of(v.results(tc.a.VMID), tc.a.ID); len(rs) != 1 {
				t.Errorf("vmid %d: skipped action journalled %d results", tc.a.VMID, len(rs))
			}
		}
	}
	if n := len(v.tasks(105, "qmstart")); n != 1 {
		t.Fatalf("vmid 105: %d start tasks, want 1 (the newer action's)", n)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestAlreadyInState: a start of a running guest, or a stop of a stopped
// one, succeeds without any Proxmox mutation.
func TestAlreadyInState(t *testing.T) {
	v := newEnv(t)
	v.addGuest(pvesim.GuestSpec{VMID: 101, Running: true})
	v.addGuest(pvesim.GuestSpec{VMID: 102})
	v.run(config(), nil)

	start, stop, shut := action(101, events.OpStart), action(102, events.OpStop), action(102, events.OpShutdown)
	for _, a := range []events.Action{start, stop} {
		v.publishAction(a)
	}
	want := map[string]string{start.ID: "already running", stop.ID: "already stopped", shut.ID: "already stopped"}
	for i, a := range []events.Action{start, stop, shut} {
		if i == 2 {
			v.publishAction(shut) // after stop: one action per guest at a time
		}
		r := v.waitResult(a.VMID, a.ID, "final")
		if r.Status != events.ResultSucceeded || r.Reason != want[a.ID] || r.UPID != "" || r.Observed == nil {
			t.Fatalf("%s: %+v", a.Op, r.Result)
		}
		if rs := of(v.results(a.VMID), a.ID); len(rs) != 1 {
			t.Fatalf("%s: %d results, want only the final one", a.Op, len(rs))
		}
	}
	if tasks := v.sim.Tasks(); len(tasks) != 0 {
		t.Fatalf("Proxmox was mutated: %+v", tasks)
	}
}

// TestFailures: a task that met a lock and a locked guest are journalled
// as skipped (waited out), a stale digest and a refused call as failed,
// with internal/pve's error class.
func TestFailures(t *testing.T) {
	v := newEnv(t)
	for _, id := range []int{101, 102, 103, 104} {
		v.addGuest(pvesim.GuestSpec{VMID: id})
	}
	v.run(config(), nil)

	t.Run("task fails", func(t *testing.T) {
		v.faults(func(f *pvesim.Faults) { f.FailRate = 1 })
		defer v.faults(func(f *pvesim.Faults) { f.FailRate = 0 })
		a := action(101, events.OpStart)
		v.publishAction(a)
		r := v.waitResult(101, a.ID, "final")
		// The injected failure is a config-lock timeout: waited out (the
		// planner backs off), never a failure.
		checkJournalled(t, of(v.results(101), a.ID), events.ResultSkipped)
		if r.ErrorClass != pve.ClassLocked.Event() || !strings.Contains(r.Reason, "got timeout") || len(r.TaskLog) == 0 {
			t.Fatalf("failed task result: %+v", r.Result)
		}
		if r.Observed.Status != "stopped" {
			t.Fatalf("observation: %+v", r.Observed)
		}
	})

	t.Run("locked guest", func(t *testing.T) {
		if err := v.sim.LockGuest(102, "backup", 0); err != nil {
			t.Fatal(err)
		}
		a := action(102, events.OpStart)
		v.publishAction(a)
		r := v.waitResult(102, a.ID, "final")
		if r.Status != events.ResultSkipped || r.ErrorClass != "locked" || r.Observed == nil || r.Observed.Lock != "backup" {
			t.Fatalf("locked start: %+v (observed %+v)", r.Result, r.Observed)
		}
		set := action(102, events.OpSetConfig)
		set.Set = map[string]string{"cores": "2"}
		v.publishAction(set)
		r = v.waitResult(102, set.ID, "final")
		if r.Status != events.ResultSkipped || r.ErrorClass != "locked" {
			t.Fatalf("locked set_config: %+v", r.Result)
		}
		if n := len(v.tasks(102, "")); n != 0 {
			t.Fatalf("tasks on a locked guest: %+v", v.tasks(102, ""))
		}
	})

	t.Run("digest conflict", func(t *testing.T) {
		stale := v.digest(qemu(103))
		// Someone else changes the config after the plan read it.
		tr, err := v.px.UpdateConfig(tctx(t), qemu(103), pve.ConfigChange{Set: map[string]string{"description": "by hand"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.px.WaitTask(tctx(t), tr, pve.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
		a := action(103, events.OpSetConfig)
		a.Set, a.Digest = map[string]string{"cores": "4"}, stale
		v.publishAction(a)
		r := v.waitResult(103, a.ID, "final")
		if r.Status != events.ResultFailed || r.ErrorClass != "conflict" || r.Observed == nil || r.Observed.Config.Cores != 1 {
			t.Fatalf("stale digest: %+v", r.Result)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		a := action(104, events.OpReboot) // a stopped guest cannot reboot
		v.publishAction(a)
		r := v.waitResult(104, a.ID, "final")
		if r.Status != events.ResultFailed || r.ErrorClass != "terminal" {
			t.Fatalf("reboot of a stopped guest: %+v", r.Result)
		}
	})
}

// TestUndecodableTerminated: an action nobody can read is terminated, and
// does not hold up the next one.
func TestUndecodableTerminated(t *testing.T) {
	v := newEnv(t)
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	bad := v.publish(events.KindAction, 101, []byte(`{"id": 42`), nil)
	mismatch := action(102, events.OpStart)
	mismatch.VMID = 103 // body disagrees with its subject (102)
	v.publish(events.KindAction, 102, mismatch, nil)
	good := action(101, events.OpStart)
	v.publishAction(good)
	v.run(config(), nil)
	v.waitResult(101, good.ID, events.ResultSucceeded)
	eventually(t, "every action acknowledged or terminated", func() bool {
		info := v.consumerInfo()
		return info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream > bad
	})
	if rs := v.results(102); len(rs) != 0 {
		t.Fatalf("results for a mismatched action: %+v", rs)
	}
}

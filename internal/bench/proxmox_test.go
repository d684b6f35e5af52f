package bench_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/bench"
)

// TestRunProxmoxSmall runs the Proxmox profile tiny: every guest converges
// (the run checks the simulator), the report is consistent, and no node
// ran more tasks at once than the node limit. No figure is asserted
// against a speed.
func TestRunProxmoxSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := bench.DefaultProxmoxOptions()
	o.Guests, o.Nodes, o.NodeConcurrency, o.APILatency = 20, 2, 3, 2*time.Millisecond
	o.PowerTask, o.ConfigTask, o.NodeRate, o.BaselinePoll = 60*time.Millisecond, 20*time.Millisecond, 100, 50*time.Millisecond
	o.Dir = t.TempDir()
	rep, det, err := bench.RunProxmox(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Profile != "proxmox" || rep.Limits != "shipped" || rep.Guests != 20 || rep.Nodes != 2 || rep.NodeConcurrency != 3 || rep.APILatencyMs != 2 ||
		rep.NodeRate != 100 || rep.BaselineParallelism != 10 || rep.BaselinePollS != 0.05 {
		t.Fatalf("report %+v", rep)
	}
	// The ideal is Proxmox's, whatever converge's limits.
	want := bench.IdealMakespan(bench.ProxmoxIdeal([]int{10, 10}, 2*time.Millisecond, 20*time.Millisecond, 60*time.Millisecond, false))
	unbounded := bench.IdealMakespan(bench.ProxmoxIdeal([]int{10, 10}, 2*time.Millisecond, 20*time.Millisecond, 60*time.Millisecond, true))
	if rep.IdealMakespanS != want.Seconds() || rep.IdealUnboundedMakespanS != unbounded.Seconds() || rep.IdealUnboundedMakespanS <= 0 ||
		rep.IdealUnboundedMakespanS > rep.IdealMakespanS {
		t.Fatalf("ideal %v, unbounded %v, want %v, %v", rep.IdealMakespanS, rep.IdealUnboundedMakespanS, want.Seconds(), unbounded.Seconds())
	}
	if rep.MakespanS <= 0 || rep.MakespanRatio != rep.MakespanS/rep.IdealMakespanS {
		t.Errorf("makespan %v, ideal %v, ratio %v", rep.MakespanS, rep.IdealMakespanS, rep.MakespanRatio)
	}
	// The baseline keeps no node limit (10 in flight over 2 nodes here):
	// the ideal does not bound it.
	if rep.BaselineMakespanS <= 0 || rep.BaselineSpeedup != rep.BaselineMakespanS/rep.MakespanS {
		t.Errorf("baseline %v, speedup %v", rep.BaselineMakespanS, rep.BaselineSpeedup)
	}
	// Each guest needs a config write and a start: two actions, two tasks
	// at least (more only if an action was redone), and a few calls each.
	// Each guest: a config write (a QEMU PUT: done within the call, no
	// task) and a start task.
	if rep.Actions < 40 || rep.Tasks < 20 || det.SyncConfigWrites+det.TaskTypes["qmconfig"] < 20 || det.TaskTypes["qmstart"] < 20 || rep.PveCalls < 60 {
		t.Errorf("converge: %d actions, %d tasks %v, %d config writes without a task, %d calls", rep.Actions, rep.Tasks, det.TaskTypes, det.SyncConfigWrites, rep.PveCalls)
	}
	// The baseline: a synchronous config write (no task) and a start each;
	// PUT, POST, at least one poll and two reads.
	if rep.BaselineTasks != 20 || rep.BaselinePveCalls < 100 {
		t.Errorf("baseline: %d tasks, %d calls", rep.BaselineTasks, rep.BaselinePveCalls)
	}
	if det.MaxInFlight < 1 || det.MaxInFlight > 3 {
		t.Errorf("a node ran %d tasks at once; the limit is 3", det.MaxInFlight)
	}
	if det.SlotUse <= 0 || det.SlotUse > 1 || det.Handoff.P50 <= 0 || det.Tail.P50 <= 0 || det.ToStart.P50 <= 0 || det.ConfigWriteRate <= 0 {
		t.Errorf("details %+v", det)
	}
	// -o json carries the fields of docs/benchmarks.md's Proxmox profile.
	b, _ := json.Marshal(rep)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"profile", "limits", "ideal_unbounded_makespan_s", "makespan_s", "ideal_makespan_s", "makespan_ratio", "baseline_makespan_s", "guests", "nodes",
		"node_concurrency", "api_latency_ms", "tasks", "pve_calls", "baseline_pve_calls", "baseline_tasks"} {
		if _, ok := m[k]; !ok {
			t.Errorf("json lacks %s", k)
		}
	}
}

// TestIdealMakespan pins the ideal's four bounds under Proxmox's limits,
// each in a case small enough to check by hand.
func TestIdealMakespan(t *testing.T) {
	const ms = time.Millisecond
	// The estate's node: 100 guests, 15 ms calls, 0.2 s config, 1 s power.
	// a = 215 ms, b = 15 ms, head 230 ms.
	in := bench.ProxmoxIdeal([]int{100, 100}, 15*ms, 200*ms, time.Second, false)
	if in.DaemonWorkers != 3 || in.ProxyWorkers != 3 || in.PowerTasks != 4 {
		t.Fatalf("Proxmox's limits: %+v", in)
	}
	// Power tasks: 25 rounds of 4 after the first write and start POST.
	if got := bench.IdealMakespan(in); got != 230*ms+25*time.Second {
		t.Errorf("power bound: %v", got)
	}
	// An uneven node decides, and a partial round counts whole: 101
	// guests, 26 rounds.
	in.GuestsPerNode = []int{100, 101}
	if got := bench.IdealMakespan(in); got != 230*ms+26*time.Second {
		t.Errorf("uneven nodes: %v", got)
	}
	// Unbounded: the daemon workers, 100 × 230 ms over 3, then the last
	// start's task.
	un := bench.ProxmoxIdeal([]int{100}, 15*ms, 200*ms, time.Second, true)
	if un.PowerTasks != 0 {
		t.Fatalf("unbounded keeps a power limit: %+v", un)
	}
	if got, want := bench.IdealMakespan(un), 100*230*ms/3+time.Second; got != want {
		t.Errorf("daemon bound: %v, want %v", got, want)
	}
	// Chain: one guest, its write, start POST and task.
	if got := bench.IdealMakespan(bench.ProxmoxIdeal([]int{1}, 15*ms, 200*ms, time.Second, false)); got != 1230*ms {
		t.Errorf("chain bound: %v", got)
	}
	// Proxy workers: 1 worker, 10 guests of 100 ms calls and no task work:
	// head 200 ms, then 10 status reads of 100 ms one after the other
	// (daemon: 10 × 200 ms over 3 = 666 ms; power: 3 rounds of 0).
	in = bench.IdealInput{GuestsPerNode: []int{10}, DaemonWorkers: 3, ProxyWorkers: 1, PowerTasks: 4, APILatency: 100 * ms}
	if got := bench.IdealMakespan(in); got != 1200*ms {
		t.Errorf("proxy bound: %v", got)
	}
	// Without latency: 7 guests, 4 power slots of 1 s: 2 rounds.
	if got := bench.IdealMakespan(bench.ProxmoxIdeal([]int{7}, 0, 0, time.Second, false)); got != 2*time.Second {
		t.Errorf("two rounds: %v", got)
	}
	if got := bench.IdealMakespan(bench.ProxmoxIdeal([]int{0}, ms, ms, ms, false)); got != 0 {
		t.Errorf("no guests: %v", got)
	}
}

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
	if rep.Profile != "proxmox" || rep.Guests != 20 || rep.Nodes != 2 || rep.NodeConcurrency != 3 || rep.APILatencyMs != 2 || rep.NodeRate != 100 ||
		rep.BaselineParallelism != 10 || rep.BaselinePollS != 0.05 {
		t.Fatalf("report %+v", rep)
	}
	want := bench.IdealMakespan(bench.IdealInput{GuestsPerNode: []int{10, 10}, Slots: 3, NodeRate: rep.NodeRate,
		APILatency: 2 * time.Millisecond, ConfigTask: 20 * time.Millisecond, PowerTask: 60 * time.Millisecond})
	if rep.IdealMakespanS != want.Seconds() || rep.IdealMakespanS <= 0 {
		t.Fatalf("ideal %v, want %v", rep.IdealMakespanS, want.Seconds())
	}
	// The ideal is a lower bound: nothing beats it.
	if rep.MakespanS < rep.IdealMakespanS || rep.MakespanRatio < 1 || rep.MakespanRatio != rep.MakespanS/rep.IdealMakespanS {
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
	for _, k := range []string{"makespan_s", "ideal_makespan_s", "makespan_ratio", "baseline_makespan_s", "guests", "nodes",
		"node_concurrency", "api_latency_ms", "tasks", "pve_calls", "baseline_pve_calls", "baseline_tasks"} {
		if _, ok := m[k]; !ok {
			t.Errorf("json lacks %s", k)
		}
	}
}

// TestIdealMakespan pins the ideal's three bounds.
func TestIdealMakespan(t *testing.T) {
	const ms = time.Millisecond
	in := bench.IdealInput{GuestsPerNode: []int{100, 100}, Slots: 4, NodeRate: 10, APILatency: 15 * ms,
		ConfigTask: 200 * ms, PowerTask: time.Second}
	// Slots: 25 guests per slot, each 2 × 15 ms + 0.2 s + 1 s.
	if got := bench.IdealMakespan(in); got != 25*1230*ms {
		t.Errorf("slot bound: %v", got)
	}
	// The fullest node decides.
	in.GuestsPerNode = []int{100, 101}
	if got := bench.IdealMakespan(in); got != 101*1230*ms/4 {
		t.Errorf("uneven nodes: %v", got)
	}
	// Order: fewer guests than slots take one chain.
	in.GuestsPerNode, in.NodeRate = []int{2}, 0
	if got := bench.IdealMakespan(in); got != 1230*ms {
		t.Errorf("order bound: %v", got)
	}
	// Rate: 1 call a second, 2 guests: 3 s to the last call, then the start.
	in.NodeRate = 1
	if got := bench.IdealMakespan(in); got != 3*time.Second+1015*ms {
		t.Errorf("rate bound: %v", got)
	}
	if got := bench.IdealMakespan(bench.IdealInput{GuestsPerNode: []int{0}, Slots: 4}); got != 0 {
		t.Errorf("no guests: %v", got)
	}
}

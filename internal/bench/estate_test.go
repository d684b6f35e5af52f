package bench_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/bench"
)

// TestRunEstateSmall runs the estate profile tiny (the simulator in the
// test's process, no latency): every guest converges (checked against the
// simulator), and the report is complete and consistent. No figure is
// asserted against a speed.
func TestRunEstateSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := bench.DefaultEstateOptions()
	o.Guests, o.Nodes, o.APILatency, o.PowerTask, o.ConfigTask, o.ResourcesLag = 30, 3, 0, 0, 0, 0
	// Long enough for the shipped verification budget to come round at
	// 30 guests (about one observer pass and its refresh).
	o.VerifyWait, o.Dir = 2*time.Minute, t.TempDir()
	rep, det, err := bench.RunEstate(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report %+v", rep)
	if rep.Profile != "estate" || rep.Limits != "shipped" || rep.Guests != 30 || rep.Nodes != 3 || rep.SimProcess || rep.APILatencyMs != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.MakespanS <= 0 || rep.IdealMakespanS != 0 || rep.IdealUnboundedMakespanS != 0 || rep.MakespanRatio != 0 {
		t.Errorf("no latency: makespan %v, ideal %v / %v, ratio %v", rep.MakespanS, rep.IdealMakespanS, rep.IdealUnboundedMakespanS, rep.MakespanRatio)
	}
	// Each guest: a config write and a start (two actions at least), a
	// start task, and calls beyond those two.
	if rep.Actions < 60 || rep.Tasks < 30 || rep.PveCalls < 60 || rep.PveCallsPerGuest != float64(rep.PveCalls)/30 {
		t.Errorf("%d actions, %d tasks, %d calls (%v a guest)", rep.Actions, rep.Tasks, rep.PveCalls, rep.PveCallsPerGuest)
	}
	if rep.ConvergeCPUS <= 0 || rep.ConvergeCoresAvg <= 0 || rep.ConvergePeakRSSMB <= 0 || rep.SimCPUS != 0 ||
		(rep.ConvergePeakRSSSince != "run" && rep.ConvergePeakRSSSince != "process") {
		t.Errorf("usage: %v s CPU, %v cores, %v MiB since %q, simulator %v s", rep.ConvergeCPUS, rep.ConvergeCoresAvg,
			rep.ConvergePeakRSSMB, rep.ConvergePeakRSSSince, rep.SimCPUS)
	}
	// Every guest re-read within the wait, each read counted on one node.
	if rep.VerifyWaitS != 120 || rep.VerifyAllS <= 0 || rep.VerifyGuests != 30 || rep.VerifyReads < 30 ||
		rep.VerifyMaxReadsPerNodeS < 1 || rep.VerifyMaxReadsPerNodeS > rep.VerifyReads {
		t.Errorf("verification: %v s, %d guests, %d reads, at most %d a second on a node", rep.VerifyAllS, rep.VerifyGuests,
			rep.VerifyReads, rep.VerifyMaxReadsPerNodeS)
	}
	if det.Elapsed <= 0 || det.Setup <= 0 || det.Observe <= 0 {
		t.Errorf("details %+v", det)
	}
	b, _ := json.Marshal(rep)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"profile", "limits", "guests", "nodes", "node_concurrency", "node_rate", "makespan_s", "ideal_makespan_s",
		"ideal_unbounded_makespan_s", "makespan_ratio", "actions", "tasks", "pve_calls", "pve_calls_per_guest", "converge_cpu_s",
		"converge_cores_avg", "converge_peak_rss_mb", "converge_peak_rss_since", "sim_cpu_s", "verify_wait_s", "verify_all_s",
		"verify_guests", "verify_reads", "verify_max_reads_per_node_s"} {
		if _, ok := m[k]; !ok {
			t.Errorf("json lacks %s", k)
		}
	}
}

package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/bench"
)

// TestRunSmall runs every phase at a tiny scale: the report is complete and
// consistent. No figure is asserted against a speed.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	profiles := t.TempDir()
	o := bench.DefaultOptions()
	o.Guests, o.Rate = 40, 200
	o.FollowGuests()
	o.LatencyN, o.LatencyAt, o.Dir, o.PhaseProfiles = 20, []int{60}, t.TempDir(), profiles
	rep, det, err := bench.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Guests != 40 || rep.Changes != 40 || rep.BurstChanges != 400 || det.RawMessages != 120 || det.LatencyChanges != 20 {
		t.Fatalf("report %+v details %+v", rep, det)
	}
	for name, v := range map[string]float64{"pipeline": rep.PipelineChangesPerS, "raw publish": rep.RawPublishMsgsPerS,
		"raw consume": rep.RawConsumeMsgsPerS, "raw replay": rep.RawReplayMsgsPerS, "replay": rep.ReplayEventsPerS,
		"writes/change": rep.StreamWritesPerChange, "efficiency": rep.Efficiency, "p50": rep.LatencyMs.P50,
		"actions/s": rep.ActionsPerS, "action efficiency": rep.ActionEfficiency, "CPU/action": rep.CPUMsPerAction,
		"calls/action": rep.PveCallsPerAction, "bytes/action": rep.BytesAllocatedPerAction,
		"burst": rep.BurstChangesPerS, "burst efficiency": rep.BurstEfficiency, "burst writes/change": rep.BurstWritesPerChange} {
		if v <= 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	if rep.LatencyMs.P50 > rep.LatencyMs.P90 || rep.LatencyMs.P90 > rep.LatencyMs.P99 {
		t.Errorf("percentiles out of order: %+v", rep.LatencyMs)
	}
	// The latency run again with the simulator grown to 60 guests.
	if l := rep.LatencyMsByGuests; len(l) != 2 || l["40"] != rep.LatencyMs || l["60"].P50 <= 0 || l["60"].P50 > l["60"].P99 {
		t.Errorf("latency by guests %+v", l)
	}
	if rep.PveCallsPerIdlePass != 1 {
		t.Errorf("idle pass made %v Proxmox calls, want 1", rep.PveCallsPerIdlePass)
	}
	// One change per guest: every change is an action.
	if det.Actions != rep.Changes {
		t.Errorf("%d actions for %d changes, one per guest", det.Actions, rep.Changes)
	}
	if det.BurstActions < 1 || det.BurstActions > rep.BurstChanges {
		t.Errorf("%d actions for a burst of %d changes", det.BurstActions, rep.BurstChanges)
	}
	// Every change of the latency run decodes, plans, journals and calls
	// Proxmox: it cannot allocate nothing.
	if det.LatencyAllocPerChange <= 0 {
		t.Errorf("latency run allocated %d B per change", det.LatencyAllocPerChange)
	}
	// Each timed phase's own profiles (gzipped protocol buffers), and each
	// latency run's changes, one a line.
	for _, phase := range []string{"throughput", "burst", "latency-40", "latency-60"} {
		for _, kind := range []string{"cpu", "allocs-before", "allocs-after"} {
			b, err := os.ReadFile(filepath.Join(profiles, phase+"."+kind+".pprof"))
			if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("%s %s profile: %d bytes, %v", phase, kind, len(b), err)
			}
		}
		// Its execution trace (runtime/trace's header).
		if b, err := os.ReadFile(filepath.Join(profiles, phase+".trace")); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
			t.Errorf("%s execution trace: %d bytes, %v", phase, len(b), err)
		}
	}
	for _, phase := range []string{"latency-40", "latency-60"} {
		b, err := os.ReadFile(filepath.Join(profiles, phase+".latency.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 1+det.LatencyChanges || lines[0] != "change\tsent_unix_ns\tlatency_ns\tplanner_ns" {
			t.Fatalf("%s: %d lines, header %q", phase, len(lines), lines[0])
		}
		for i, l := range lines[1:] {
			f := strings.Split(l, "\t")
			if len(f) != 4 || f[0] != strconv.Itoa(i) {
				t.Fatalf("%s line %d: %q", phase, i+1, l)
			}
			for _, v := range f[1:3] {
				if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
					t.Errorf("%s line %d: %q", phase, i+1, l)
				}
			}
		}
	}
	// -o json carries exactly the fields of docs/benchmarks.md.
	b, _ := json.Marshal(rep)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	want := []string{"limits", "guests", "changes", "pipeline_changes_per_s", "raw_publish_msgs_per_s", "raw_consume_msgs_per_s",
		"stream_writes_per_change", "efficiency", "latency_ms", "replay_events_per_s", "raw_replay_msgs_per_s", "pve_calls_per_idle_pass",
		"actions_per_s", "action_efficiency", "cpu_ms_per_action", "pve_calls_per_action", "bytes_allocated_per_action",
		"burst_changes", "burst_changes_per_s", "burst_stream_writes_per_change", "burst_efficiency", "latency_ms_by_guests"}
	if len(m) != len(want) {
		t.Fatalf("json fields %v", m)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("json lacks %s", k)
		}
	}
}

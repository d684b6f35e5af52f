package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchSimInOwnProcess runs `converge bench --sim-process` at a tiny
// scale as a user would: the simulator runs as `converge sim` in a child
// process (this test binary, re-executed), and every phase reports. No figure is asserted
// against a speed.
func TestBenchSimInOwnProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	t.Setenv("CONVERGE_RUN_MAIN", "1") // the child is this binary acting as converge
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetArgs([]string{"bench", "--guests", "30", "--changes", "150", "--rate", "200", "--latency-changes", "20",
		"--data", t.TempDir(), "--log-level", "error", "--sim-process"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{"simulator in its own process", "latency (20 changes at 200/s)", "simulator)", "garbage collections in the run)", "KB allocated"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`(?m)^idle observer pass +1\.0 Proxmox calls$`).MatchString(text) {
		t.Errorf("idle pass not 1 call:\n%s", text)
	}

	// -o json, same scale: the idle pass is counted in the other process.
	out.Reset()
	root = newRoot()
	root.SetArgs([]string{"bench", "--guests", "30", "--changes", "150", "--rate", "200", "--latency-changes", "20",
		"--data", t.TempDir(), "--log-level", "error", "-o", "json", "--sim-process"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, errOut.String())
	}
	var rep struct {
		Guests int     `json:"guests"`
		Idle   float64 `json:"pve_calls_per_idle_pass"`
		Lat    struct {
			P50 float64 `json:"p50"`
		} `json:"latency_ms"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Guests != 30 || rep.Idle != 1 || rep.Lat.P50 <= 0 {
		t.Fatalf("report %+v", rep)
	}
}

// TestBenchProxmoxProfile runs `converge bench --profile proxmox` tiny, as
// text and as JSON, and refuses flags of the other profile. No figure is
// asserted against a speed.
func TestBenchProxmoxProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"bench", "--profile", "proxmox", "--guests", "20", "--nodes", "2", "--node-concurrency", "3", "--node-rate", "100",
		"--api-latency", "2ms", "--power-task", "60ms", "--config-task", "20ms", "--baseline-poll", "50ms", "--log-level", "error"}
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetArgs(append(args, "--data", t.TempDir()))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{"20 guests on 2 nodes, limits shipped: node concurrency 3, node rate 100/s, API calls 2 ms", "ideal", "ratio", "without the power-task limit",
		"20 tasks: 20 qmstart; 20 config writes without a task", "task end → next start task on its slot", "baseline", "10 at once, tasks polled every 0.05 s; 20 tasks"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	out.Reset()
	root = newRoot()
	root.SetArgs(append(args, "--data", t.TempDir(), "-o", "json"))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, errOut.String())
	}
	var rep struct {
		Guests    int     `json:"guests"`
		Nodes     int     `json:"nodes"`
		Makespan  float64 `json:"makespan_s"`
		Ideal     float64 `json:"ideal_makespan_s"`
		Ratio     float64 `json:"makespan_ratio"`
		Baseline  float64 `json:"baseline_makespan_s"`
		Tasks     int     `json:"tasks"`
		BaseTasks int     `json:"baseline_tasks"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Guests != 20 || rep.Nodes != 2 || rep.Ideal <= 0 || rep.Makespan < rep.Ideal || rep.Ratio < 1 || rep.Baseline <= 0 ||
		rep.Tasks < 20 || rep.BaseTasks != 20 {
		t.Fatalf("report %+v", rep)
	}

	for _, bad := range [][]string{
		{"bench", "--profile", "proxmox", "--changes", "10"},
		{"bench", "--nodes", "3"},
		{"bench", "--profile", "terraform"},
		{"bench", "--profile", "proxmox", "--verify-wait", "1s"},
		{"bench", "--profile", "estate", "--baseline-poll", "1s"},
		{"bench", "--profile", "proxmox", "--node-concurrency", "0"},
		{"bench", "--profile", "estate", "--node-rate", "0"},
		{"bench", "--profile", "proxmox", "--phase-profiles", t.TempDir()},
		{"bench", "--phase-profiles", t.TempDir(), "--cpuprofile", filepath.Join(t.TempDir(), "cpu.pprof")},
	} {
		root = newRoot()
		root.SetArgs(bad)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(ctx)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: got %v, want a usage error", bad, err)
		}
	}
}

// TestBenchEstateProfile runs `converge bench --profile estate` tiny, as a
// user would: the simulator is this test binary acting as `converge sim`
// in a process of its own. It checks the JSON report is complete and
// consistent; no figure is asserted against a speed.
func TestBenchEstateProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	t.Setenv("CONVERGE_RUN_MAIN", "1") // the child is this binary acting as converge
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetArgs([]string{"bench", "--profile", "estate", "--guests", "30", "--nodes", "3", "--api-latency", "0", "--power-task", "0",
		"--config-task", "0", "--sim-resources-lag", "0", "--verify-wait", "2m", "--limits-off", "--data", t.TempDir(),
		"--log-level", "error", "-o", "json"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut.String())
	}
	var rep struct {
		Profile      string   `json:"profile"`
		Limits       string   `json:"limits"`
		Lifted       []string `json:"limits_lifted"`
		Guests       int      `json:"guests"`
		Nodes        int      `json:"nodes"`
		Conc         int      `json:"node_concurrency"`
		Rate         float64  `json:"node_rate"`
		SimProcess   bool     `json:"sim_process"`
		Makespan     float64  `json:"makespan_s"`
		Unbounded    *float64 `json:"ideal_unbounded_makespan_s"`
		Calls        float64  `json:"pve_calls_per_guest"`
		CPU          float64  `json:"converge_cpu_s"`
		Cores        float64  `json:"converge_cores_avg"`
		RSS          float64  `json:"converge_peak_rss_mb"`
		SimCPU       float64  `json:"sim_cpu_s"`
		VerifyAll    float64  `json:"verify_all_s"`
		VerifyGuests int      `json:"verify_guests"`
		MaxReads     int      `json:"verify_max_reads_per_node_s"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Profile != "estate" || rep.Limits != "off" || len(rep.Lifted) < 2 || rep.Conc != -1 || rep.Rate != -1 || rep.Guests != 30 ||
		rep.Nodes != 3 || !rep.SimProcess || rep.Makespan <= 0 || rep.Unbounded == nil || rep.Calls < 2 || rep.CPU <= 0 || rep.Cores <= 0 ||
		rep.RSS <= 0 || rep.VerifyAll <= 0 || rep.VerifyGuests != 30 || rep.MaxReads < 1 {
		t.Fatalf("report %+v\n%s", rep, out.String())
	}
}

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
	for _, want := range []string{"20 guests on 2 nodes, node concurrency 3, node rate 100/s, API calls 2 ms", "ideal", "ratio",
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

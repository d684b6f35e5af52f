package main

import (
	"bytes"
	"context"
	"encoding/json"
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

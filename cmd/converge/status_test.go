package main

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/projector"
)

// Status says how long a drift that the inventory does not show may hide:
// the observer's verification period, carried by its heartbeats.
func TestStatusShowsVerificationPeriod(t *testing.T) {
	now := time.Now()
	cd := &views.ClusterDoc{State: projector.ClusterState{Reachable: true, HeartbeatAt: now, VerifyPeriod: 10 * time.Second}}
	var b strings.Builder
	printStatus(&b, nil, cd, now)
	if !strings.Contains(b.String(), "every guest's config is verified within 10s") {
		t.Fatalf("status:\n%s", b.String())
	}
}

// An HA-managed guest shows so, with the state HA keeps it in.
func TestStatusShowsHAManaged(t *testing.T) {
	now := time.Now()
	cd := &views.ClusterDoc{State: projector.ClusterState{Reachable: true, HeartbeatAt: now}}
	sums := []views.Summary{{VMID: 100, State: "converged", Observed: &views.ObservedSummary{Exists: true, Node: "pve1",
		Status: "running", HA: "started", Pool: "prod"}}}
	var b strings.Builder
	printStatus(&b, sums, cd, now)
	if !strings.Contains(b.String(), "ha: managed (started)") || !strings.Contains(b.String(), "pool:prod") {
		t.Fatalf("status:\n%s", b.String())
	}
}

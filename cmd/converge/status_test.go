package main

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
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
		Status: "running", HA: "started", HARule: "converge-100", Pool: "prod"}}}
	cd.State.PVE = &events.PVEFacts{Version: "9.2.6", Release: "9.2", HA: events.HARules}
	var b strings.Builder
	printStatus(&b, sums, cd, now)
	if !strings.Contains(b.String(), "ha: managed (started) rule:converge-100") || !strings.Contains(b.String(), "pool:prod") ||
		!strings.Contains(b.String(), "Proxmox VE 9.2.6: HA rules in force") {
		t.Fatalf("status:\n%s", b.String())
	}
}

// A guest desired with whole-guest fields only is shown managed: its
// DESIRED column names them, not "-" like an unmanaged guest's.
func TestStatusDesiredWholeGuestFields(t *testing.T) {
	node, pool := "pve2", "prod"
	r := events.RestartAllowed
	d := &events.Desired{VMID: 101, Node: &node, Pool: &pool, Restart: &r,
		Disks: map[string]events.DiskWant{"scsi1": {SizeGiB: 8}, "scsi0": {SizeGiB: 32}},
		Net:   map[string]events.NetWant{"net0": {Bridge: "vmbr0"}}, CloudInit: &events.CloudInit{},
		SnapshotBefore: []string{"restart"}}
	want := "node=pve2 disks=scsi0:32G,scsi1:8G pool=prod net=net0 ci snap=restart restart=allowed"
	if got := desiredSummary(d); got != want {
		t.Fatalf("DESIRED %q, want %q", got, want)
	}
	var b strings.Builder
	printStatus(&b, []views.Summary{{VMID: 101, State: "pending", Desired: d}}, nil, time.Now())
	if !strings.Contains(b.String(), want) {
		t.Fatalf("status does not show %q:\n%s", want, b.String())
	}
	cores, power := 2, events.Power("running")
	if got := desiredSummary(&events.Desired{Power: &power, Cores: &cores}); got != "running 2c" {
		t.Fatalf("%q", got)
	}
	if got := desiredSummary(nil); got != "-" {
		t.Fatalf("%q", got)
	}
}

// Issue 35, point 10: status --state that matches no guest says so,
// instead of printing a header alone.
func TestStatusStateNoMatch(t *testing.T) {
	c := startCLIBus(t)
	out, code := c.cli(t, "status")
	if code != 0 || !strings.Contains(out, "no guests in the views yet") || strings.Contains(out, "VMID") {
		t.Fatalf("no documents: exit %d:\n%s", code, out)
	}
	c.put(t, &views.GuestDoc{View: &projector.View{VMID: 101}, Status: planner.Status{Kind: planner.Converged}})
	out, code = c.cli(t, "status", "--state", "error,held")
	if code != 0 || !strings.Contains(out, "no guest matched --state error,held (1 guest(s) in other states)") || strings.Contains(out, "VMID") {
		t.Fatalf("--state error,held: exit %d:\n%s", code, out)
	}
	out, code = c.cli(t, "status", "--state", "converged")
	if code != 0 || !strings.Contains(out, "VMID") || !strings.Contains(out, "101") || strings.Contains(out, "no guest") {
		t.Fatalf("--state converged: exit %d:\n%s", code, out)
	}
}

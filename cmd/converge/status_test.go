package main

import (
	"context"
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
		Status: "running", HA: "started", Pool: "prod"}}}
	var b strings.Builder
	printStatus(&b, sums, cd, now)
	if !strings.Contains(b.String(), "ha: managed (started)") || !strings.Contains(b.String(), "pool:prod") {
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

func waitDoc(id int, kind planner.StatusKind, reason, lastErr string) *views.GuestDoc {
	return &views.GuestDoc{View: &projector.View{VMID: id, DesiredSeq: 5, LastError: lastErr},
		Status: planner.Status{Kind: kind, Reason: reason}}
}

// wait exiting 4 names every guest in error or rejected, each with its
// reason, not only the first; timing out, it gives each guest's last error.
func TestWaitNamesEveryFailure(t *testing.T) {
	ids := []int{108, 109, 110, 111}
	want := map[int]uint64{108: 5, 109: 5, 110: 5, 111: 5}
	ch := make(chan *views.GuestDoc, 4)
	ch <- waitDoc(108, planner.Error, "clone failed: storage full (not retried until the desired state changes)", "storage full")
	ch <- waitDoc(109, planner.Converged, "", "")
	ch <- waitDoc(110, planner.Rejected, "cores: must be >= 1", "")
	ch <- waitDoc(111, planner.Error, "start failed: no quorum", "no quorum")
	_, err := awaitConverged(context.Background(), ids, want, ch, time.Minute)
	if codeOf(err) != exitGuestFailed {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
	for _, w := range []string{"guest 108 is error: clone failed: storage full", "guest 110 is rejected: cores", "guest 111 is error: start failed: no quorum"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "109") {
		t.Errorf("names the converged guest: %v", err)
	}

	// Timing out: what is left, with the last error status shows.
	ctx, cancel := context.WithCancel(context.Background())
	ch = make(chan *views.GuestDoc, 1)
	ch <- waitDoc(108, planner.Pending, "retry 2 after clone failed", "storage full")
	go func() {
		for len(ch) > 0 {
			time.Sleep(time.Millisecond) // until the doc is read
		}
		cancel()
	}()
	_, err = awaitConverged(ctx, []int{108}, map[int]uint64{108: 5}, ch, time.Minute)
	if codeOf(err) != exitNotDone || !strings.Contains(err.Error(), "[last error: storage full]") {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
}

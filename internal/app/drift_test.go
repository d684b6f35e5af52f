package app_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// TestPendingEditCorrected: someone sets cores=1 on a running VM whose
// desired cores are 3; Proxmox keeps it pending, /cluster/resources shows
// nothing, and converge used to report "converged" until the guest came
// back with one core. At 100 guests the verification sees it, and the
// planner reverts the pending value, within two verification periods,
// counted in observer passes on a fake clock: a period is as many passes
// as the observer reports it takes to verify every guest. The test drives
// passes alone (the rounds between them run only under Run), so the
// per-node budget is set to what a pass reads: the budget's own pace is
// internal/observer's TestVerificationBound.
func TestPendingEditCorrected(t *testing.T) {
	const vmid = 900
	clk := clocktest.New(time.Now())
	const interval = 10 * time.Second
	p := startPipeline(t, pvesim.Options{Guests: 99}, func(c *observer.Config) { c.Clock, c.Interval, c.VerifyRate = clk, interval, 100 })
	sim, obs := p.sim, p.obs
	if err := sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Cores: 3, Running: true, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	tctx := pvesimtest.Context(t)
	pass := func() observer.PassStats {
		t.Helper()
		clk.Advance(interval)
		st, err := obs.Pass(tctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	pass()
	cores, running := 3, events.PowerRunning
	seq := p.desire(t, &events.Desired{VMID: vmid, Cores: &cores, Power: &running})
	if doc := p.waitState(t, vmid, seq, planner.Converged, 20*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("guest never converged: %+v", doc)
	}

	// A verification period in passes, from what the observer reports of
	// a pass over the converged estate: the guests it lists over those it
	// verified (the budget goes round the estate in that many passes).
	// Within the period it reports, plus one interval (the passes'
	// granularity), every guest is verified.
	st := pass()
	if st.Verified == 0 || st.Guests < 100 {
		t.Fatalf("a pass over the estate: %+v, want 100 guests listed and some verified", st)
	}
	perPeriod := (st.Guests + st.Verified - 1) / st.Verified
	period := st.VerifyPeriod
	if got := obs.VerifyPeriod(); got != period || period <= 0 || time.Duration(perPeriod)*interval > period+interval {
		t.Fatalf("the observer verifies %d of %d guests a pass (%d passes of %s round them), reports a verification period of %s (%s): want the passes within it plus one interval",
			st.Verified, st.Guests, perPeriod, interval, period, got)
	}
	bound := 2 * perPeriod
	p.caughtUp(t, vmid, nil)

	// The hand edit: pending on a running VM, invisible in the inventory.
	px := pvesimtest.Client(t, sim)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid}
	if g, _ := sim.Guest(vmid); g.Node != "" {
		ref.Node = g.Node
	}
	p.lagReads(t, ref, bound) // under the late fault, seen two periods late
	if _, err := px.UpdateConfig(tctx, ref, pve.ConfigChange{Set: map[string]string{"cores": "1"}}); err != nil {
		t.Fatal(err)
	}
	if g, _ := sim.Guest(vmid); g.Pending["cores"] != "1" {
		t.Fatalf("the edit is not pending: %+v", g)
	}
	before := sim.Mutations()
	corrected := func() bool {
		g, _ := sim.Guest(vmid)
		return len(g.Pending) == 0 && g.Config["cores"] == "3"
	}
	// Pass by pass, each folded by the planner and whatever it called for
	// carried out before the next: corrected after bound passes at most.
	var doc *views.GuestDoc
	passes := 0
	for {
		pass()
		passes++
		doc = p.caughtUp(t, vmid, nil)
		if corrected() {
			break
		}
		if passes == bound {
			g, _ := sim.Guest(vmid)
			t.Fatalf("pending edit not corrected within two verification periods (%s; %d guests, %d verified a pass: %d passes each): %d passes, guest %+v, status %+v",
				period, st.Guests, st.Verified, perPeriod, passes, g, doc.Status)
		}
	}
	if doc.Status.Kind != planner.Converged {
		t.Fatalf("not converged after the revert: %+v", doc.Status)
	}
	t.Logf("100 guests, %d verified a pass (verification period %s, %d passes): a pending edit reverted after %d observer pass(es), %d Proxmox mutation(s)",
		st.Verified, period, perPeriod, passes, sim.Mutations()-before)
}

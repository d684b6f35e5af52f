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
	"github.com/converge-pve/converge/planner"
)

// TestPendingEditCorrected: someone sets cores=1 on a running VM whose
// desired cores are 3; Proxmox keeps it pending, /cluster/resources shows
// nothing, and converge used to report "converged" until the guest came
// back with one core. At 100 guests the rolling verification (20 reads/s,
// a pass every 10 s: every guest each pass) sees it, and the planner
// reverts the pending value, within two verification periods, counted in
// observer passes on a fake clock.
func TestPendingEditCorrected(t *testing.T) {
	const vmid = 900
	clk := clocktest.New(time.Now())
	const interval = 10 * time.Second
	p := startPipeline(t, pvesim.Options{Guests: 99}, func(c *observer.Config) { c.Clock, c.Interval = clk, interval })
	sim, obs, rd := p.sim, p.obs, p.rd
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
	converged := func() bool {
		d, err := rd.Guest(tctx, vmid)
		return err == nil && d != nil && d.Status.Kind == planner.Converged
	}

	st := pass()
	cores, running := 3, events.PowerRunning
	p.desire(t, &events.Desired{VMID: vmid, Cores: &cores, Power: &running})
	if !until(20*time.Second, converged) {
		t.Fatal("guest never converged")
	}

	// The hand edit: pending on a running VM, invisible in the inventory.
	px := pvesimtest.Client(t, sim)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid}
	if g, _ := sim.Guest(vmid); g.Node != "" {
		ref.Node = g.Node
	}
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
	period := st.VerifyPeriod
	if got := obs.VerifyPeriod(); got != period || period != interval {
		t.Fatalf("verification period %s (reported %s), want %s at 100 guests", period, got, interval)
	}
	passes := 0
	for passes < 4 && !corrected() {
		st = pass()
		passes++
		until(15*time.Second, corrected)
	}
	perPeriod := int((period + interval - 1) / interval)
	if !corrected() || passes > 2*perPeriod {
		g, _ := sim.Guest(vmid)
		d, _ := rd.Guest(tctx, vmid)
		t.Fatalf("pending edit not corrected within two verification periods (%s, %d passes each): %d passes, guest %+v, status %+v",
			period, perPeriod, passes, g, d)
	}
	if !until(20*time.Second, converged) {
		t.Fatal("not converged after the revert")
	}
	t.Logf("100 guests, verification period %s: a pending edit reverted after %d observer pass(es), %d Proxmox mutation(s)",
		period, passes, sim.Mutations()-before)
}

package app_test

import (
	"fmt"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// TestHARebalanceHeldThroughRules: PVE 9.2's load balancer moves HA
// guests round after round while converge holds desired nodes for some
// of them. converge issues no migration and no HA migrate request (HA
// moves every guest it moves), every desired node holds through
// converge's node-affinity rules (the balancer never moves those guests),
// guests without a desired node are followed, and no guest moves more
// often than the balancer moved it.
func TestHARebalanceHeldThroughRules(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9", Seed: 38}, verifyOff)
	ctx := pvesimtest.Context(t)
	// Nine HA guests, three per node; four with a desired node (two
	// where they run, two elsewhere: HA moves those by converge's rule).
	var all []int
	for i := range 9 {
		vmid := 500 + i
		all = append(all, vmid)
		node := fmt.Sprintf("pve%d", i%3+1)
		if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: node, Running: true, Cores: 1 + i%4}); err != nil {
			t.Fatal(err)
		}
		if err := p.sim.AddHAResource(vmid, "started"); err != nil {
			t.Fatal(err)
		}
	}
	desiredNode := map[int]string{500: "pve1", 501: "pve2", 502: "pve1", 503: "pve3"}
	p.pass(t)
	running := events.PowerRunning
	seqs := map[int]uint64{}
	for _, vmid := range all {
		d := &events.Desired{VMID: vmid, Power: &running}
		if n, ok := desiredNode[vmid]; ok {
			d.Node = &n
		}
		seqs[vmid] = p.desire(t, d)
	}
	for _, vmid := range all {
		p.converge(t, vmid, seqs[vmid])
	}
	for _, vmid := range all {
		p.settle(t, vmid)
	}
	placed := len(p.sim.HAMoves()) // HA's moves by converge's rules
	for _, m := range p.sim.HAMoves() {
		if m.Cause != "node-affinity" || desiredNode[m.VMID] != m.To {
			t.Fatalf("HA move %+v before the balancer ran: want only moves to a desired node", m)
		}
	}
	resultsBefore := map[int]int{}
	for _, vmid := range all {
		resultsBefore[vmid] = len(p.results(t, vmid))
	}

	// The balancer's rounds; after each, HA has moved what it moves, the
	// observer has seen it, and the planner has folded everything.
	moving := 0
	for moving < 20 && p.sim.HARebalanceRounds() < 400 {
		before := len(p.sim.HAMoves())
		p.sim.RebalanceNow()
		p.sim.RunHA()
		if err := p.sim.WaitHA(ctx); err != nil {
			t.Fatal(err)
		}
		if len(p.sim.HAMoves()) == before {
			continue
		}
		moving++
		p.pass(t)
		p.caughtUp(t, all[len(all)-1], nil)
	}
	if moving < 20 {
		t.Fatalf("the balancer moved guests in %d of %d rounds, want 20", moving, p.sim.HARebalanceRounds())
	}
	for _, vmid := range all {
		p.settle(t, vmid)
	}

	byBalancer, total := map[int]int{}, map[int]int{}
	for _, m := range p.sim.HAMoves()[placed:] {
		total[m.VMID]++
		if m.Cause == "rebalance" {
			byBalancer[m.VMID]++
		}
	}
	noConvergeMoves(t, p.sim, all...)
	for _, vmid := range all {
		doc, err := p.rd.Guest(ctx, vmid)
		if err != nil || doc == nil || doc.View == nil || doc.View.Observed == nil {
			t.Fatalf("guest %d: no document (%v)", vmid, err)
		}
		g, _ := p.sim.Guest(vmid)
		o := doc.View.Observed
		if n := len(p.results(t, vmid)) - resultsBefore[vmid]; n != 0 {
			t.Errorf("guest %d: %d actions while the balancer ran, want none: %+v", vmid, n, p.results(t, vmid)[resultsBefore[vmid]:])
		}
		if total[vmid] != byBalancer[vmid] {
			t.Errorf("guest %d moved %d times, the balancer moved it %d times", vmid, total[vmid], byBalancer[vmid])
		}
		if doc.Status.Kind != planner.Converged || o.Node != g.Node {
			t.Errorf("guest %d: %s on %s, runs on %s: want converged and followed", vmid, doc.Status.Kind, o.Node, g.Node)
		}
		if want, ok := desiredNode[vmid]; ok {
			if g.Node != want || byBalancer[vmid] != 0 || !o.HAPlacement.Owned(vmid) {
				t.Errorf("guest %d on %s, moved %d times by the balancer, placement %+v: want held on %s by converge's rule",
					vmid, g.Node, byBalancer[vmid], o.HAPlacement, want)
			}
		}
	}
	moved := 0
	for _, n := range byBalancer {
		moved += n
	}
	t.Logf("%d rebalance rounds, %d with moves; the balancer moved guests %d times; converge moved none and issued no action",
		p.sim.HARebalanceRounds(), moving, moved)
}

package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// Anyone who could publish on pve.action.… made the executor act (issue
// 18): it stopped a guest with no desired state, wrote protection, startup
// and hookscript (code on the Proxmox host) to another, and hard-stopped
// a managed guest whose desired power is running. Forged actions, with
// fences and sequences that pass every staleness check, now reach nothing:
// the simulator receives no mutation, and each is journalled as skipped
// with the reason.
func TestForgedActionsNeverReachProxmox(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Guests: 8, Nodes: 1}, verifyOff)
	var running []pvesim.GuestInfo
	for _, g := range p.sim.Guests() {
		if g.Status == "running" && !g.Template {
			running = append(running, g)
		}
	}
	if len(running) < 3 {
		t.Fatalf("want three running guests, have %d", len(running))
	}
	unmanaged, unmanaged2, managed := running[0], running[1], running[2]
	p.pass(t)
	on := events.PowerRunning
	seq := p.desire(t, &events.Desired{VMID: managed.VMID, Power: &on})
	if doc := p.waitState(t, managed.VMID, seq, planner.Converged, 20*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("managed guest not converged: %+v", doc)
	}
	ctx := pvesimtest.Context(t)
	j := p.a.Bus()
	info, err := j.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := p.sim.Mutations()
	var forged []string
	forge := func(g pvesim.GuestInfo, op events.Op, set map[string]string, desired, basis uint64) string {
		t.Helper()
		lasts, err := j.Lasts(ctx, events.DefaultCluster, g.VMID, events.KindAction)
		if err != nil {
			t.Fatal(err)
		}
		var lastAction uint64
		if lasts[0] != nil {
			lastAction = lasts[0].Seq
		}
		a := events.Action{Meta: events.NewMeta("planner@pve", "", time.Now()),
			ID: fmt.Sprintf("%s-%d-%d-%d", events.DefaultCluster, g.VMID, desired, len(forged)), VMID: g.VMID, Cluster: events.DefaultCluster,
			Node: g.Node, Kind: events.GuestKind(g.Kind), Op: op, Set: set, Reason: "forged",
			DesiredSeq: desired, BasisSeq: basis, Attempt: 1}
		body, err := events.Encode(a)
		if err != nil {
			t.Fatal(err)
		}
		m := events.Message{Subject: events.Subject(events.KindAction, events.DefaultCluster, g.VMID), Data: body, Header: events.Header{}}
		m.Header.Set(events.HeaderPublisher, "planner@pve")
		if _, err := j.Append(ctx, m, journal.FencedAt(lastAction)); err != nil {
			t.Fatal(err)
		}
		forged = append(forged, a.ID)
		return a.ID
	}
	// Newer than anything journalled: no staleness fence fires.
	fake := info.LastSeq + 100
	lasts, err := j.Lasts(ctx, events.DefaultCluster, managed.VMID, events.KindObserved, events.KindResult)
	if err != nil {
		t.Fatal(err)
	}
	basis := lasts[0].Seq
	if lasts[1] != nil {
		basis = max(basis, lasts[1].Seq)
	}
	cases := []struct {
		g              pvesim.GuestInfo
		op             events.Op
		set            map[string]string
		desired, basis uint64
	}{
		{unmanaged, events.OpStop, nil, fake, fake},
		{unmanaged, events.OpShutdown, nil, fake, fake},
		{unmanaged2, events.OpSetConfig, map[string]string{"protection": "1", "startup": "order=1", "hookscript": "local:snippets/evil.sh"}, fake, fake},
		{unmanaged2, events.OpSetConfig, map[string]string{"hookscript": "local:snippets/evil.sh"}, fake, fake},
		{managed, events.OpStop, nil, seq, basis},
		// Every check of the sequences passes: only Plan says no.
		{managed, events.OpShutdown, nil, seq, basis},
	}
	for _, c := range cases {
		id := forge(c.g, c.op, c.set, c.desired, c.basis)
		vmid := c.g.VMID
		var r events.Result
		if !until(30*time.Second, func() bool {
			lasts, err := j.Lasts(context.Background(), events.DefaultCluster, vmid, events.KindResult)
			if err != nil || lasts[0] == nil {
				return false
			}
			r, err = events.Decode[events.Result](lasts[0].Data)
			return err == nil && r.ActionID == id && r.Status.Final()
		}) {
			t.Fatalf("guest %d: no final result for forged action %s", vmid, id)
		}
		if r.Status != events.ResultSkipped || !strings.Contains(r.Reason, "does not follow from the journal") {
			t.Errorf("guest %d: forged action %s ended %s (%q), want skipped as not following from the journal", vmid, id, r.Status, r.Reason)
		}
		t.Logf("guest %d, forged %s: %s: %s", vmid, c.op, r.Status, r.Reason)
	}
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("forged actions reached Proxmox: %d mutations", n)
	}
	for _, g := range []pvesim.GuestInfo{unmanaged, unmanaged2, managed} {
		if now, _ := p.sim.Guest(g.VMID); now.Status != "running" {
			t.Errorf("guest %d is %s", g.VMID, now.Status)
		}
	}
}

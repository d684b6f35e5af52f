package planner

import (
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// TestPeriodicPassSweeps: beyond sweepChunk guests the periodic full pass
// plans every guest once, sweepChunk of them per tick, in vmid order; an
// observer staleness flip still replans them all at once.
func TestPeriodicPassSweeps(t *testing.T) {
	const guests = 2*sweepChunk + sweepChunk/2
	e := convergedEngine(t, guests)
	var planned []int
	e.cfg.OnDecision = func(v *projector.View, _ Decision) { planned = append(planned, v.VMID) }
	now, seq := t0, e.LastSeq()
	heartbeat := func(reachable bool) {
		seq++
		e.Fold([]projector.Event{{Seq: seq, Subject: "pve.heartbeat.pve", Time: now,
			Data: mustJSON(events.Heartbeat{Meta: events.NewMeta("o", "", now), Cluster: "pve", Reachable: reachable})}}, 0, now)
		_ = e.Ready()
	}
	tick := func() {
		now = now.Add(e.cfg.FlushInterval)
		e.Tick(now)
		_ = e.Ready()
	}
	now = now.Add(e.cfg.FullPassInterval)
	heartbeat(true) // folded: the pass is due
	for step, want := range []int{sweepChunk, 2 * sweepChunk, guests} {
		if len(planned) != want {
			t.Fatalf("after %d steps of the sweep %d guests planned, want %d", step+1, len(planned), want)
		}
		tick()
	}
	if len(planned) != guests {
		t.Fatalf("a finished sweep goes on: %d planned", len(planned))
	}
	for i, id := range planned {
		if id != 100+i {
			t.Fatalf("planned #%d is %d, want %d (vmid order, each once)", i, id, 100+i)
		}
	}
	planned = planned[:0]
	now = now.Add(e.cfg.FullPassInterval)
	heartbeat(true) // the next sweep starts
	if len(planned) != sweepChunk {
		t.Fatalf("next sweep planned %d at once", len(planned))
	}
	planned = planned[:0]
	heartbeat(false) // stale: every guest at once, the sweep overtaken
	if len(planned) != guests {
		t.Fatalf("a staleness flip planned %d guests, want all %d", len(planned), guests)
	}
	planned = planned[:0]
	tick()
	if len(planned) != 0 {
		t.Fatalf("the overtaken sweep went on: %d planned", len(planned))
	}
	if c := e.Counts(); c[Blocked] != guests {
		t.Fatalf("Proxmox unreachable, yet %v", c)
	}
}

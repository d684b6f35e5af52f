package planner

import (
	"fmt"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// TestBehindPlansEachGuestOnceOnItsNewestDesired: a caught-up engine that
// finds itself more than behindBy events behind the journal folds a batch
// without planning, and plans each touched guest once, on its newest
// desired revision, once a batch leaves it close behind (after that
// batch's own guests); caught up, it plans as it folds.
func TestBehindPlansEachGuestOnceOnItsNewestDesired(t *testing.T) {
	type plan struct {
		vmid int
		seq  uint64
	}
	var plans []plan
	cfg := configNamed("t")
	cfg.Policy.ObserveOnly = true
	cfg.OnDecision = func(v *projector.View, _ Decision) { plans = append(plans, plan{v.VMID, v.DesiredSeq}) }
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Begin(0, t0) // an empty journal: caught up at once
	seq := uint64(0)
	desired := func(vmid int) projector.Event {
		seq++
		return projector.Event{Seq: seq, Subject: events.StoredSubject(events.KindDesired, "pve", vmid, DefaultPartitions),
			Data: []byte(fmt.Sprintf(`{"vmid":%d,"description":"rev %d"}`, vmid, seq)), Time: t0}
	}
	// fold is one batch as the loop hands it over: pending is how many
	// events the journal held after the batch's last.
	fold := func(pending uint64, evs ...projector.Event) { e.Fold(evs, pending, t0) }

	// Far behind: three revisions of 101 and two of 102 fold, nothing is planned.
	fold(5000, desired(101), desired(102), desired(101))
	fold(behindBy+1, desired(102), desired(101))
	if len(plans) != 0 {
		t.Fatalf("planned while %d behind: %+v", behindBy+1, plans)
	}
	// Close behind again: the batch is planned as it folds, then the
	// deferred guests, each once, on its newest revision, first touched first.
	fold(behindBy, desired(103))
	want := []plan{{103, 6}, {101, 5}, {102, 4}}
	if fmt.Sprint(plans) != fmt.Sprint(want) {
		t.Fatalf("plans %+v, want %+v", plans, want)
	}
	// Caught up: every event is planned as it folds.
	plans = nil
	fold(0, desired(101), desired(101))
	if want := []plan{{101, 7}, {101, 8}}; fmt.Sprint(plans) != fmt.Sprint(want) {
		t.Fatalf("caught up: plans %+v, want %+v", plans, want)
	}
	// Behind for longer than maxDefer: the deferred guests are planned anyway.
	plans = nil
	fold(9000, desired(104))
	e.Fold([]projector.Event{desired(105)}, 9000, t0.Add(maxDefer))
	if want := []plan{{104, 9}, {105, 10}}; fmt.Sprint(plans) != fmt.Sprint(want) {
		t.Fatalf("behind past maxDefer: plans %+v, want %+v", plans, want)
	}
}

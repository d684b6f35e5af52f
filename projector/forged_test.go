package projector_test

import (
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// A result's read-back rewrites the observation only when the result is
// for the guest's own action (issue 18): one for an action id the journal
// never planned for this guest is folded as a result but its read-back is
// ignored, so a forged "the guest is stopped" cannot make the planner act.
func TestForeignResultReadBackIgnored(t *testing.T) {
	p := projector.New(events.DefaultCluster)
	o := observed(101, at(0), "running")
	applyAll(t, p, desiredEv(1, 101, `{"vmid":101,"power":"running"}`, nil), observedEv(2, o))
	forged := result(101, "pve-101-1-1", events.ResultSucceeded, "", at(1))
	forged.Observed = observed(101, at(1), "stopped")
	applyAll(t, p, resultEv(3, forged))
	if v := p.Views[101]; v.Observed.Status != "running" || v.ObservedSeq != 2 {
		t.Fatalf("a foreign result's read-back was adopted: %s at #%d", v.Observed.Status, v.ObservedSeq)
	}
	// The guest's own action's result is adopted, as before.
	applyAll(t, p, actionEv(4, action(101, "pve-101-1-1", 1, events.OpShutdown)))
	own := result(101, "pve-101-1-1", events.ResultSucceeded, "", at(2))
	own.Observed = observed(101, at(2), "stopped")
	applyAll(t, p, resultEv(5, own))
	if v := p.Views[101]; v.Observed.Status != "stopped" || v.ObservedSeq != 5 {
		t.Fatalf("the action's own read-back was not adopted: %s at #%d", v.Observed.Status, v.ObservedSeq)
	}
}

package observer_test

import (
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// A row that trails a change of two steps is verified within the budget
// (explain.go: lagsBehind, caughtUp with a newer result, the task-started
// path); these pin the rows that only look like it and are news: a
// status the newest read-back contradicts and status/current confirms, a
// live field (the node) that moved, an earlier read-back the fold does
// not hold.

// startedResult journals an executor's "task started" result (no
// read-back) for explainVMID.
func (w *explainWorld) startedResult(t *testing.T) uint64 {
	t.Helper()
	r := events.Result{Meta: events.NewMeta("executor@test", "", w.clk.Now()), ActionID: "a2", VMID: explainVMID,
		Cluster: events.DefaultCluster, Op: events.OpStart, Status: events.ResultStarted, Executor: "executor@test"}
	body, err := events.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return w.j.Publish(events.Message{Subject: events.Subject(events.KindResult, events.DefaultCluster, explainVMID), Data: body})
}

// wantPublishedStatus: the next pass publishes the guest with status.
func wantPublishedStatus(t *testing.T, w *explainWorld, status string) {
	t.Helper()
	last := w.j.last()
	st := pass(t, w.o)
	obs := w.published(t, last, explainVMID)
	if len(obs) != 1 || obs[0].Status != status {
		t.Fatalf("pass: %+v, published %+v; want %d published %s this pass (the fold says otherwise)",
			st, obs, explainVMID, status)
	}
}

// TestLaggingRowStatusByHand: a write (read-back running,
// memory 1024), then a shutdown (read-back stopped); then the guest is
// started again by hand (or HA restarts it). The row, running with memory
// 1024, is what the write's read-back says, but its status contradicts
// the newest read-back, which the fold holds, and status/current confirms
// it: the guest is read and published running in this pass, not deferred
// with the fold saying "stopped" until the budget reaches it.
func TestLaggingRowStatusByHand(t *testing.T) {
	w := newExplainWorld(t, nil)
	w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
	w.result(t, w.readBack(explainVMID, "running")) // the write's
	w.result(t, w.readBack(explainVMID, "stopped")) // the shutdown's
	// Started again by hand: the truth, and the row, say running.
	w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = 1024 })
	wantPublishedStatus(t, w, "running")
}

// TestCaughtUpRowStatusByHand: the budget read the guest after the write;
// the shutdown's read-back (stopped) follows; the guest is started again
// by hand. The row (memory 1024, running) says what the last read found,
// but its status contradicts the newest read-back the fold holds, and
// status/current confirms it: the guest is read and published running.
func TestCaughtUpRowStatusByHand(t *testing.T) {
	w := newExplainWorld(t, nil)
	w.writeReadThenShutdown(t)
	// Started again by hand; the broadcast shows the write at last and
	// the status as it is.
	w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = 1024 })
	wantPublishedStatus(t, w, "running")
}

// TestLaggingRowNodeMoved: a write on pve1
// (read-back memory 1024), then a migration (read-back on pve2); the guest
// is moved back by hand (or by HA). The row on pve1 is what the write's
// read-back says, but the node is live in /cluster/resources (caughtUp's
// own comment): a row on another node than the newest read-back cannot be
// a trailing broadcast. It is read at once, so the fold does not keep pve2
// (actions would go to the wrong node) until the budget reads it.
func TestLaggingRowNodeMoved(t *testing.T) {
	w := newExplainWorld(t, nil)
	w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
	w.result(t, w.readBack(explainVMID, "running")) // the write's, on pve1
	mig := w.readBack(explainVMID, "running")
	mig.Node = "pve2"
	w.result(t, mig)                                                 // the migration's
	w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = 1024 }) // back on pve1
	wantDeferred(t, w, false)
}

// TestTaskRunsDerivedWitness: the earlier read-back is
// derived (AfterSeq) and an observation was journalled after its basis:
// the newest-result path reads such a guest at once ("derived, an
// observation journalled after its basis": the fold holds a config that
// may miss a change that observation read). With a task started after
// it, lagsBehind does not take that read-back as the witness: the fold
// does not hold it, and the guest is read at once.
func TestTaskRunsDerivedWitness(t *testing.T) {
	w := newExplainWorld(t, nil)
	ob := w.act(explainVMID)
	ob.AfterSeq, ob.Digest = 1, "" // the first pass's observations came later
	w.result(t, ob)
	w.startedResult(t) // the next action's task started
	wantDeferred(t, w, false)
}

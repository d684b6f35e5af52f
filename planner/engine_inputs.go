package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// behindBy is how many events may wait in the journal behind a batch for
// the engine to still plan as it folds. Further behind (a burst of desired
// changes, a planner catching up on a busy journal), it folds first and
// plans each touched guest once, on its newest desired state: acting on a
// state the journal already supersedes costs Proxmox a mutation that the
// next one undoes. maxDefer bounds the wait when the planner stays behind.
const (
	behindBy = 1000
	maxDefer = 500 * time.Millisecond
)

// Fold folds a batch of journal events in order; pending is how many
// events the journal holds after the batch's last (0 when unknown). Caught
// up, each touched guest is planned as its event is folded, unless the
// engine is more than behindBy events behind: then planning waits until a
// batch leaves it close behind, or at most maxDefer. While catching up the
// batch is decoded on DecodeWorkers goroutines first (decoding is pure)
// and nothing is planned.
func (e *Engine) Fold(evs []projector.Event, pending uint64, now time.Time) {
	if len(evs) == 0 {
		return
	}
	if e.caughtUp {
		behind := pending > behindBy
		for _, ev := range evs {
			e.foldDeferring(ev, behind, now)
		}
		if !behind || now.Sub(e.deferredSince) >= maxDefer {
			e.planDeferred(now)
		}
		return
	}
	projector.Predecode(evs, e.cfg.DecodeWorkers)
	for _, ev := range evs {
		e.fold(ev, false, now)
	}
	if e.proj.LastSeq >= e.target {
		e.catchUp(now)
	}
}

// Tick does the time-based work: deferred plans that waited too long,
// observer staleness flips, due retries, the periodic full pass, flushing
// documents and checkpoints.
func (e *Engine) Tick(now time.Time) {
	if !e.caughtUp {
		if e.proj.LastSeq >= e.target {
			e.catchUp(now)
		}
		return
	}
	if len(e.deferred) > 0 && now.Sub(e.deferredSince) >= maxDefer {
		e.planDeferred(now) // behind, and no batch came to plan them
	}
	e.tick(now)
}

// Published reports a publish the stream acknowledged. A duplicate of an
// action already folded frees its guest (its fold came first).
func (e *Engine) Published(vmid int, id string, duplicate bool) {
	if v := e.proj.Views[vmid]; duplicate && v != nil && v.LastAction != nil && v.LastAction.ID == id && e.awaiting[vmid] == id {
		e.unawait(vmid)
		e.syncBusy(v, time.Time{})
	}
}

// Refused reports an action the limits ledger refused room for (claim c:
// another planner took the room first). The guest is freed and waits:
// held by the guard, or pending for its node, tried again shortly.
func (e *Engine) Refused(vmid int, id string, c Claim, now time.Time) {
	if e.awaiting[vmid] != id {
		return
	}
	e.unawait(vmid)
	v := e.proj.Views[vmid]
	// The room it held here was never the cluster's to give: no other
	// waiter is planned for it (they would be refused in turn, at once).
	e.lim.setBusy(vmid, "")
	d, _ := e.decision.get(vmid)
	if len(d.Steps) == 0 {
		return
	}
	if IsGuardKey(c.Key) && v != nil && v.Observed != nil && Disruptive(d.Steps[0].Op) {
		// Another planner took the guard's last room at the same moment:
		// held like any step beyond it, and journalled as such.
		d = holdStep(d, fmt.Sprintf("mass-change guard: the cluster's planners already used its %d guests within %s; %s waits for approval (converge approve %d, or --all)",
			c.Limit, c.Window, d.Steps[0].Op, vmid))
		if e.mine(vmid) {
			e.handOut(v, d.Steps[0], nil, false, now)
		}
	} else {
		// Back in line for the node: planned again when a slot frees, or
		// at the retry at the latest.
		// In the line of the node refused (a migration's may be its target).
		if node, ok := strings.CutPrefix(c.Key, NodeKey(e.cfg.Cluster, "")); ok && node != "" {
			e.lim.enqueue(node, vmid, false)
		} else if v != nil && v.Observed != nil {
			e.lim.enqueue(v.Observed.Node, vmid, false)
		}
		d.Status.Reason = fmt.Sprintf("waiting for a task slot (%s: %d in use across the cluster's planners); %s", c.Key, c.Limit, d.Status.Reason)
		d.Status.RetryAt = now.Add(refusedRetry)
		d.Steps = nil
	}
	e.record(vmid, d)
}

// PublishFailed reports a publish that did not happen: refused by its
// fence (another planner, or this one before a restart, acted first),
// failed or timed out. The guest is freed; with replan it is planned again
// now from the fold (which is what a refused fence asks for), otherwise on
// its next event or pass.
func (e *Engine) PublishFailed(vmid int, id string, replan bool, now time.Time) {
	if e.awaiting[vmid] != id {
		return
	}
	e.unawait(vmid)
	v := e.proj.Views[vmid]
	if v != nil {
		e.syncBusy(v, now)
	}
	if replan && v != nil {
		e.planGuest(v, now)
	}
}

// Acquired reports partitions won from a planner that died or gave them
// up: every guest of theirs is planned and its document rewritten, since
// the previous owner may have left work.
func (e *Engine) Acquired(partitions []int, now time.Time) {
	if len(partitions) == 0 || !e.caughtUp {
		return
	}
	won := map[int]bool{}
	for _, p := range partitions {
		won[p] = true
	}
	var ids []int
	for id := range e.proj.Views {
		if won[events.Partition(e.cfg.Cluster, id, e.cfg.Partitions)] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	e.out.Acquired += len(ids)
	for _, id := range ids {
		delete(e.written, id) // the previous owner's document may be older
		e.dirty[id] = true
		e.planGuest(e.proj.Views[id], now)
	}
}

// CheckpointWritten reports the outcome of the last Ready.Checkpoint; a
// failed one is taken again at the next interval.
func (e *Engine) CheckpointWritten(err error) {
	e.ckptBusy = false
	if err != nil {
		e.lastCkptSeq = 0
	}
}

// FinalCheckpoint is the checkpoint to write at shutdown: the fold, if it
// advanced since the last one and checkpoints are on; nil otherwise.
func (e *Engine) FinalCheckpoint() *projector.Snapshot {
	if !e.caughtUp || e.proj.LastSeq <= e.lastCkptSeq || e.cfg.CheckpointOff {
		return nil
	}
	return e.proj.Snapshot()
}

// DisableCheckpoints stops checkpoints: there is nowhere to keep them.
func (e *Engine) DisableCheckpoints() { e.cfg.CheckpointOff = true }

// Shutdown flushes the documents still to write (their Flush is in the
// next Ready).
func (e *Engine) Shutdown(now time.Time) { e.flush(now) }

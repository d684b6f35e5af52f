package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// fold folds one event and, when caught up, plans its guest (unless
// deferPlan) or does what it asks for (resync, tick); it returns the guest
// it touched.
func (e *Engine) fold(ev projector.Event, deferPlan bool, now time.Time) (int, bool) {
	ch := e.proj.Apply(ev)
	if ch.Err != nil {
		e.out.Unfolded = append(e.out.Unfolded, Unfolded{Seq: ev.Seq, Subject: ev.Subject, Err: ch.Err})
	}
	switch {
	case ch.Info != nil:
		// Informational (guest agent addresses): the document changes,
		// nothing is planned, no action's basis moves.
		e.dirty[ch.Info.VMID] = true
	case ch.View != nil:
		v := ch.View
		if id, ok := e.awaiting[v.VMID]; ok && v.LastAction != nil && v.LastAction.ID == id {
			e.unawait(v.VMID)
		}
		if a := v.InFlight; a != nil && v.InFlightSeq == ev.Seq && Disruptive(a.Op) {
			e.lim.disrupt(v.VMID, streamTime(ev, now))
		}
		if a := v.InFlight; a != nil && v.InFlightSeq == ev.Seq && a.Op == events.OpClone {
			e.lim.created = append(e.lim.created, disruption{vmid: v.VMID, at: streamTime(ev, now)})
		}
		if v.DesiredSeq == ev.Seq {
			// A new revision, not reported yet: a view's DesiredSeq changes
			// only when a desired event is accepted, to that event's Seq.
			e.reported.remove(v.VMID)
		}
		e.dirty[v.VMID] = true
		switch {
		case e.caughtUp && !deferPlan && continuing(v):
			// Planned before the line, for the slot its last step freed.
			e.syncBusyThen(v, now, func() { e.planGuest(v, now) })
		case e.caughtUp && !deferPlan:
			e.syncBusy(v, now)
			e.planGuest(v, now)
		default:
			e.syncBusy(v, now)
		}
		return v.VMID, true
	case len(ch.Guests) > 0:
		// An operator's request (pause, resume, approve, release) for
		// these guests: plan them at once, whatever the backlog.
		for _, v := range ch.Guests {
			e.dirty[v.VMID] = true
			if e.caughtUp {
				e.planGuest(v, now)
			}
		}
	case ch.Resync && e.caughtUp:
		e.out.Resync = true
		e.fullPass(now)
	case ch.All && e.caughtUp:
		e.fullPass(now)
	case ch.Cluster && e.caughtUp:
		if pass := e.proj.State.PassAfterSeq; pass != e.lastPass {
			e.lastPass = pass
			e.planUnseen(now)
		}
		e.tick(now)
	}
	return 0, false
}

func streamTime(ev projector.Event, fallback time.Time) time.Time {
	if ev.Time.IsZero() {
		return fallback
	}
	return ev.Time
}

// planUnseen plans the guests that waited for a pass to tell whether they
// exist.
func (e *Engine) planUnseen(now time.Time) {
	ids := make([]int, 0, len(e.unseen))
	for id := range e.unseen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if v := e.proj.Views[id]; v != nil {
			e.planGuest(v, now)
		}
	}
}

// unawait forgets the action handed out for vmid.
func (e *Engine) unawait(vmid int) {
	delete(e.awaiting, vmid)
	delete(e.awaitingOp, vmid)
}

// syncBusy records the node slot vmid's action takes (in flight as
// folded, or handed out), and plans the guests waiting for a node that
// one was freed on.
func (e *Engine) syncBusy(v *projector.View, now time.Time) { e.syncBusyThen(v, now, nil) }

// syncBusyThen is syncBusy, calling first (if set) once the slots are
// freed and before the waiting guests are planned.
func (e *Engine) syncBusyThen(v *projector.View, now time.Time, first func()) {
	var nodes, storage, tpl []string
	if a := v.InFlight; a != nil {
		nodes, storage, tpl = actionNodes(a.Node, a.Op, a.Migrate), []string{storageSlot(a)}, []string{templateSlot(a)}
	} else if _, ok := e.awaiting[v.VMID]; ok {
		nodes, storage, tpl = e.lim.busyNode[v.VMID], e.slim.busyNode[v.VMID], e.tlim.busyNode[v.VMID]
	}
	freedNodes := e.lim.setBusy(v.VMID, nodes...)
	freedStorage := e.slim.setBusy(v.VMID, storage...)
	freedTpl := e.tlim.setBusy(v.VMID, tpl...)
	if first != nil {
		first()
	}
	if !e.caughtUp {
		return
	}
	for _, freed := range freedNodes {
		// The guests begun on the node first: one of them takes the slot.
		for _, id := range e.lim.begunOn(freed) {
			if v := e.proj.Views[id]; v != nil && v.InFlight == nil {
				e.planGuest(v, now)
			}
		}
		e.nodeHeads(freed, now)
	}
	for _, freed := range freedStorage {
		e.planHeads(&e.slim, freed, e.cfg.Limits.clone(), now)
	}
	for _, freed := range freedTpl {
		e.planHeads(&e.tlim, freed, 1, now)
	}
}

// planHeads plans the guests first in line for key's free slots (a node's,
// or a storage's in slim). A guest that leaves the line without taking a
// slot (held by the guard, or with nothing left to do) hands its turn to
// the next one at once.
func (e *Engine) planHeads(l *limiter, key string, limit int, now time.Time) {
	if limit <= 0 {
		return
	}
	tried := map[int]bool{}
	for {
		progressed := false
		for _, id := range l.heads(key, limit-len(l.busy[key])) {
			if tried[id] {
				continue
			}
			tried[id], progressed = true, true
			if v := e.proj.Views[id]; v != nil {
				e.planGuest(v, now)
			}
		}
		if !progressed {
			return
		}
	}
}

// roomFor reports whether node has room of the kind a waiter needs: a
// free slot, or room to begin (lead).
func (e *Engine) roomFor(node string, lead bool) bool {
	slots := e.cfg.Limits.node()
	if lead {
		return e.lim.leadRoom(node, slots) > 0
	}
	return len(e.lim.busy[node]) < slots
}

// nodeHeads plans the guests first in line for node's room: its free
// slots, or room to begin a change (begun.go). Not from within itself: a
// guest planned there that waits would plan the same line again.
func (e *Engine) nodeHeads(node string, now time.Time) {
	slots := e.cfg.Limits.node()
	if e.inHeads[node] || slots <= 0 || e.lim.headRoom(node, slots) <= 0 {
		return
	}
	e.inHeads[node] = true
	e.planHeads(&e.lim, node, len(e.lim.busy[node])+e.lim.headRoom(node, slots), now)
	delete(e.inHeads, node)
}

// foldDeferring is fold, except that while behind a guest's planning waits
// for planDeferred.
func (e *Engine) foldDeferring(ev projector.Event, behind bool, now time.Time) {
	if !behind {
		e.fold(ev, false, now)
		return
	}
	vmid, ok := e.fold(ev, true, now)
	if ok && !e.isDeferred[vmid] {
		if len(e.deferred) == 0 {
			e.deferredSince = now
		}
		e.isDeferred[vmid] = true
		e.deferred = append(e.deferred, vmid)
	}
}

// planDeferred plans the guests folded while behind, each once, in the
// order they were first touched.
func (e *Engine) planDeferred(now time.Time) {
	for _, vmid := range e.deferred {
		delete(e.isDeferred, vmid)
		if v := e.proj.Views[vmid]; v != nil {
			e.planGuest(v, now)
		}
	}
	e.deferred = e.deferred[:0]
}

func (e *Engine) catchUp(now time.Time) {
	e.caughtUp = true
	e.out.CaughtUp = true
	// Which guests had begun is not in the fold: a write of the current
	// revision in flight counts as begun (it is no longer, at its result,
	// if no node task follows it).
	if e.cfg.Limits.node() > 0 {
		for _, id := range e.sweepIDs() {
			v := e.proj.Views[id]
			if a := v.InFlight; a != nil && !NodeTask(a.Op) && a.Op != events.OpHold && a.Op != events.OpClone && a.DesiredSeq == v.DesiredSeq && a.Node != "" {
				e.lim.begin(a.Node, id)
			}
		}
	}
	e.fullPass(now)
}

// tick: observer staleness flips and the periodic pass replan everyone,
// otherwise due retries are planned; then documents and checkpoints.
func (e *Engine) tick(now time.Time) {
	st := e.proj.State
	stale := st.HeartbeatAt.IsZero() || now.Sub(st.HeartbeatAt) > e.cfg.Policy.ObserverTimeout || !st.Reachable
	passed := false
	switch {
	case stale != e.stale:
		e.stale = stale
		e.fullPass(now)
		passed = true
	case !e.sweeping() && now.Sub(e.lastFull) >= e.cfg.FullPassInterval:
		passed = e.periodicPass(now)
	}
	if !passed {
		var due []int
		for vmid, at := range e.retries {
			if !now.Before(at) {
				due = append(due, vmid)
			}
		}
		slices.Sort(due)
		for _, vmid := range due {
			if v := e.proj.Views[vmid]; v != nil {
				e.planGuest(v, now)
			}
		}
	}
	if e.sweeping() {
		e.sweepOn(now)
	}
	if now.Sub(e.lastFlush) >= e.cfg.FlushInterval {
		e.flush(now)
	}
	e.maybeCheckpoint(now)
}

// maybeCheckpoint hands out a copy of the fold when one is due and none is
// being written.
func (e *Engine) maybeCheckpoint(now time.Time) {
	if e.cfg.CheckpointOff || e.proj.LastSeq <= e.lastCkptSeq || now.Sub(e.lastCkpt) < e.cfg.CheckpointInterval || e.ckptBusy {
		return
	}
	e.out.Checkpoint = e.proj.Snapshot()
	e.lastCkpt, e.lastCkptSeq, e.ckptBusy = now, e.proj.LastSeq, true
}

func (e *Engine) fullPass(now time.Time) {
	e.lastFull, e.swept = now, len(e.sweep) // a sweep in progress is overtaken
	for _, id := range e.sweepIDs() {
		e.planGuest(e.proj.Views[id], now)
	}
	e.flush(now)
}

// mine reports whether this planner holds the lease of vmid's partition.
func (e *Engine) mine(vmid int) bool {
	return e.cfg.Owner == nil || e.cfg.Owner.Held(events.Partition(e.cfg.Cluster, vmid, e.cfg.Partitions))
}

// planGuest plans one guest and hands out its first step, at most one
// action in flight per guest.
func (e *Engine) planGuest(v *projector.View, now time.Time) {
	if _, ok := e.awaiting[v.VMID]; ok {
		return
	}
	if v.Desired != nil {
		e.lim.managed.add(v.VMID)
	} else {
		e.lim.managed.remove(v.VMID)
	}
	if v.Desired != nil && v.Observed == nil {
		e.unseen[v.VMID] = true
	} else {
		delete(e.unseen, v.VMID)
	}
	e.noteExisting(v)
	d := Plan(v, e.proj.State, e.cfg.Policy, now)
	var claims []Claim
	waiting := false
	wasQueued, wasBegun, lead := e.lim.queued[v.VMID].node, e.lim.begunNode[v.VMID], leadsTo(d.Steps)
	if len(d.Steps) > 0 && e.mine(v.VMID) {
		d, claims, waiting = e.admit(v, d, now)
	}
	if !waiting {
		// A waiter that no longer needs its node or storage leaves the line.
		e.lim.dequeue(v.VMID)
		e.slim.dequeue(v.VMID)
		e.tlim.dequeue(v.VMID)
		// A begun change that has nothing in flight and no node task to
		// come any more (converged, failed, held, revised) is begun no
		// longer: its room goes to the next in line.
		if v.InFlight == nil && (!leadsTo(d.Steps) || !e.mine(v.VMID)) {
			e.lim.unbegin(v.VMID)
		}
	} else if node := e.lim.queued[v.VMID].node; node != "" && e.roomFor(node, lead) {
		// Room, but others are first in line: they go now.
		e.nodeHeads(node, now)
	}
	if e.cfg.OnDecision != nil {
		e.cfg.OnDecision(v, d)
	}
	e.record(v.VMID, d)
	e.noteConverged(v, d, now)
	if len(d.Steps) > 0 && e.mine(v.VMID) {
		e.handOut(v, d.Steps[0], claims, len(d.Steps) > 1 && NodeTask(d.Steps[1].Op), now)
	}
	if wasQueued != "" && !waiting && !e.lim.busy[wasQueued][v.VMID] {
		// It left a line without taking room there: the next may go.
		e.nodeHeads(wasQueued, now)
	}
	if wasBegun != "" && e.lim.begunNode[v.VMID] != wasBegun && !e.lim.busy[wasBegun][v.VMID] {
		// Its begun room on that node is free (it moved on, or is done).
		e.nodeHeads(wasBegun, now)
	}
}

// handOut hands out step as the guest's next action; lead says a node
// task follows it (Publish.lead).
func (e *Engine) handOut(v *projector.View, step Step, claims []Claim, lead bool, now time.Time) {
	a := events.Action{
		Meta: events.NewMeta(e.cfg.Name, v.CorrelationID, now),
		// Deterministic: a restarted planner replanning the same step
		// publishes the same id, which the stream drops as a duplicate.
		ID:   fmt.Sprintf("%s-%d-%d-%d", v.Cluster, v.VMID, v.DesiredSeq, v.RevisionActions+1),
		VMID: v.VMID, Cluster: v.Cluster, Node: step.Node, Kind: step.Kind,
		Op: step.Op, Set: step.Set, Delete: step.Delete, Revert: step.Revert, Timeout: step.Timeout, Holds: step.Holds,
		Clone: step.Clone, Resize: step.Resize, Migrate: step.Migrate, Pool: step.Pool, Snapshot: step.Snapshot,
		HAState: step.HAState, HARule: step.HARule, Reason: step.Reason,
		DesiredSeq: v.DesiredSeq, BasisSeq: v.BasisSeq(), ObservationSeq: v.ObservedSeq,
		FoldSeq: e.proj.LastSeq, Attempt: v.Failures + 1,
	}
	if o := v.Observed; o != nil && o.Exists {
		a.Node, a.Kind, a.Digest = o.Node, o.Kind, o.Digest
	}
	if a.Snapshot != nil {
		// Named after the action: history links the two.
		s := *a.Snapshot
		s.Name = events.SnapshotName(a.ID)
		a.Snapshot = &s
	}
	e.awaiting[v.VMID], e.awaitingOp[v.VMID] = a.ID, a.Op
	e.noteExisting(v)
	if a.Op != events.OpHold { // a hold is a record: no task, no slot
		e.lim.setBusy(v.VMID, actionNodes(a.Node, a.Op, a.Migrate)...)
		e.slim.setBusy(v.VMID, storageSlot(&a))
		e.tlim.setBusy(v.VMID, templateSlot(&a))
	}
	e.out.Actions = append(e.out.Actions, Publish{Action: a, ExpectLastSeq: v.LastActionSeq, Claims: claims, lead: lead})
}

// record keeps a guest's decision, its state count and retry, and marks
// its document for rewriting if what status shows changed.
func (e *Engine) record(vmid int, d Decision) {
	prev, had := e.decision.get(vmid)
	e.decision.set(vmid, d)
	if had {
		e.counts[prev.Status.Kind]--
		if prev.Status.Limit != "" {
			e.waiting[prev.Status.Limit]--
		}
	}
	e.counts[d.Status.Kind]++
	if d.Status.Limit != "" {
		e.waiting[d.Status.Limit]++
	}
	if d.Status.RetryAt.IsZero() {
		delete(e.retries, vmid)
	} else {
		e.retries[vmid] = d.Status.RetryAt
	}
	if !had || prev.Status.Kind != d.Status.Kind || prev.Status.Reason != d.Status.Reason || !stepsEqual(prev.Steps, d.Steps) {
		e.dirty[vmid] = true
		e.prompt = e.prompt || e.caughtUp && (!had || prev.Status.Kind != d.Status.Kind) && d.Status.Kind.settled()
	}
	if d.Status.Kind == Held && (!had || prev.Status.Kind != Held) {
		e.out.Held = append(e.out.Held, HeldNote{VMID: vmid, Reason: d.Status.Reason})
	}
}

// noteConverged reports a desired revision found done for the first time
// (Ready.Converged), by the guest's owner, for revisions journalled while
// this engine was live (after Begin's target).
func (e *Engine) noteConverged(v *projector.View, d Decision, now time.Time) {
	if !d.Status.Kind.Done() || v.Desired == nil || v.DesiredSeq <= e.target || e.reported.has(v.VMID) || !e.mine(v.VMID) {
		return
	}
	e.reported.add(v.VMID)
	e.out.Converged = append(e.out.Converged, Convergence{VMID: v.VMID, DesiredSeq: v.DesiredSeq, Took: max(now.Sub(v.DesiredAt), 0)})
}

func stepsEqual(a, b []Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Op != b[i].Op || a[i].Reason != b[i].Reason {
			return false
		}
	}
	return true
}

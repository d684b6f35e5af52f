package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// job is one delivery of one action being handled.
type job struct {
	e         *Executor
	d         journal.Delivery
	a         events.Action
	seq       uint64 // the action's stream sequence
	delivered uint64 // delivery count, 1 on first delivery
	part      int    // the action's partition, whose lease fences mutations
	// resultSeq is the sequence of the guest's newest result as this job
	// knows it: each result it journals must directly follow it
	// (Nats-Expected-Last-Subject-Sequence), so that a late write of an
	// executor that lost the partition is refused.
	resultSeq uint64
	ref       pve.GuestRef
	// basis is the reading the action was planned from (verified), nil
	// when unverified.
	basis *events.Observed
	// leads: a node task of the guest's plan waits on this action (a
	// config write before its reboot); its calls go ahead of other
	// waiting writes to the node (pve.Ahead).
	leads bool
	// knownSeq is the newest journal sequence read before acting: a
	// derived read-back is current as of it (readback.go).
	knownSeq uint64
	// digest is the config digest read right before a write planned from
	// a derived read-back (digestCheck), "" otherwise.
	digest string
	// fresh is set while waiting on a task this job started (not one
	// resumed from the journal): its wait learns the task's length.
	fresh bool
	hb    *heartbeat
	log   zerolog.Logger
	// start is when the delivery arrived (converge_action_duration_seconds).
	start time.Time
}

// Handle runs one delivery of an action of partition part, following the
// crash-safety protocol of the package documentation. It acknowledges the
// delivery only after the action's final result is journalled (or found
// journalled); every other way out leaves it un-acknowledged for
// redelivery. Run calls it for each delivery of the partitions it owns;
// scenario tests call it directly.
func (e *Executor) Handle(ctx context.Context, part int, d journal.Delivery) {
	start := e.clk.Now()
	// Whether Proxmox answers this executor's own calls
	// (converge_pve_reachable{role="executor"}).
	ctx = pve.WithAnswered(ctx, e.cfg.Metrics.answered)
	en := d.Entry()
	a, err := decodeAction(en.Subject, en.Data, e.cfg.Cluster)
	if err != nil {
		// Nothing can be done with it, now or on redelivery.
		log := e.log.With().Uint64("seq", en.Seq).Uint64("delivered", d.Delivered()).Logger()
		log.Error().Err(err).Str("subject", en.Subject).Msg("undecodable action; terminating it")
		if e.cfg.Poison != nil {
			e.cfg.Poison("executor", en.Subject, en.Seq, err)
		}
		if err := d.Term(); err != nil {
			log.Warn().Err(err).Msg("term")
		}
		return
	}
	// One logger context per action, built once.
	log := e.log.With().Uint64("seq", en.Seq).Uint64("delivered", d.Delivered()).
		Str("action_id", a.ID).Int("vmid", a.VMID).Str("op", string(a.Op)).
		Str("node", a.Node).Str("correlation_id", a.CorrelationID).Logger()
	if a.Op == events.OpHold {
		// The planner's record of a step it holds: nothing to do here, and
		// no result follows it.
		log.Debug().Str("holds", string(a.Holds)).Msg("hold journalled by the planner; nothing to do")
		if err := d.Ack(ctx); err != nil {
			log.Warn().Err(err).Msg("ack")
		}
		return
	}
	if !e.claim(a.ID) {
		// A redelivery of an action this process is still working on: its
		// handler acknowledges the message when done.
		log.Debug().Msg("action already in progress here; ignoring redelivery")
		return
	}
	defer e.release(a.ID)

	hb := startHeartbeat(d, e.clk, e.cfg.AckWait/3, log)
	defer hb.stop()

	select {
	case e.sem <- struct{}{}:
		defer func() { <-e.sem }()
	case <-ctx.Done():
		return // partition gone or shutting down; redelivered later
	}
	unlock, err := e.lockGuest(ctx, a.VMID)
	if err != nil {
		return // shutting down; redelivered later
	}
	defer unlock()

	j := &job{
		e: e, d: d, a: a, seq: en.Seq, delivered: d.Delivered(), part: part,
		ref: pve.GuestRef{Kind: pve.Kind(a.Kind), Node: a.Node, VMID: a.VMID},
		hb:  hb, log: log, start: start,
	}
	j.run(ctx)
}

// decodeAction decodes and checks an action against its stored subject.
func decodeAction(subject string, data []byte, cluster string) (events.Action, error) {
	info, err := events.ParseSubject(subject)
	if err != nil {
		return events.Action{}, err
	}
	a, err := events.Decode[events.Action](data)
	if err != nil {
		return a, err
	}
	switch {
	case a.ID == "":
		return a, errors.New("action has no id")
	case info.Kind != events.KindAction || info.Cluster != cluster:
		return a, fmt.Errorf("subject %s is not an action of cluster %s", subject, cluster)
	case a.VMID != info.VMID:
		return a, fmt.Errorf("action is for vmid %d but its subject for %d", a.VMID, info.VMID)
	case a.Cluster != "" && a.Cluster != cluster:
		return a, fmt.Errorf("action is for cluster %q but its subject for %q", a.Cluster, cluster)
	}
	return a, nil
}

// outcome is how a job ends: publish a final result, only acknowledge (the
// final result is already journalled), or neither (abandon: redelivery
// resumes from the journal).
type outcome struct {
	result  *events.Result
	ackOnly bool
}

var abandon = outcome{}

func (j *job) run(ctx context.Context) {
	out := j.execute(ctx)
	switch {
	case out.ackOnly:
	case out.result == nil:
		j.log.Info().Msg("action abandoned un-acknowledged; it will be redelivered and resumed")
		return
	default:
		r := out.result
		if err := j.publish(ctx, r); err != nil {
			j.log.Error().Err(err).Msg("final result not journalled; leaving the action for redelivery")
			return
		}
		j.e.cfg.Metrics.finished(j.a.Op, r, j.e.clk.Now().Sub(j.start))
		ev := j.log.Info()
		if r.Status == events.ResultFailed {
			if ev = j.e.failures.Event(&j.log, zerolog.WarnLevel, j.e.clk.Now()); ev != nil {
				ev = ev.Str("error", r.Error).Str("error_class", string(r.ErrorClass))
			}
		}
		if ev != nil {
			ev.Str("status", string(r.Status)).Str("upid", r.UPID).Str("reason", r.Reason).Msg("action finished")
		}
	}
	if err := j.d.Ack(ctx); err != nil {
		// The final result is journalled: a redelivery just acknowledges.
		j.log.Warn().Err(err).Msg("ack")
	}
}

// execute runs the protocol described in the package documentation.
func (j *job) execute(ctx context.Context) outcome {
	e, a := j.e, j.a
	// The guest's newest action, result, desired and observed entries in
	// one batched read: on the usual path (a fresh, current action) the
	// mutation waits for one round trip to the journal.
	lasts, err := e.readLasts(ctx, a.VMID)
	if err != nil {
		j.log.Warn().Err(err).Msg("journal unreadable")
		return abandon
	}
	// Journal: finished or started before (by us or a dead executor)?
	rec, err := e.readRecord(ctx, a.VMID, a.ID, j.seq, seqOf(lasts.action), seqOf(lasts.result))
	if err != nil {
		j.log.Warn().Err(err).Msg("journal unreadable")
		return abandon
	}
	j.resultSeq = rec.lastResult
	j.knownSeq = max(j.seq, seqOf(lasts.action), seqOf(lasts.result), seqOf(lasts.desired), seqOf(lasts.observed), rec.lastResult)
	switch {
	case rec.final != nil:
		j.log.Info().Str("status", string(rec.final.Status)).Msg("action already finished; acknowledging")
		return outcome{ackOnly: true}
	case rec.started != nil:
		if why := verifyTask(a, rec.started); why != "" && !e.cfg.unverified {
			return j.refuse(why)
		}
		t := pve.TaskRef{UPID: rec.started.UPID, Node: rec.started.Node}
		j.log.Info().Str("upid", t.UPID).Msg("resuming journalled task")
		return j.wait(ctx, t)
	}

	// Fence (invariant 2).
	if reason, err := fence(rec, e.fenceReads(ctx, a, lasts)); err != nil {
		j.log.Warn().Err(err).Msg("journal unreadable")
		return abandon
	} else if reason != "" {
		r := j.result(events.ResultSkipped)
		r.Reason = reason
		return outcome{result: r}
	}

	// An operator's pause or release journalled after the plan.
	if why, err := e.operatorStop(ctx, a, lasts.control); err != nil {
		j.log.Warn().Err(err).Msg("journal unreadable")
		return abandon
	} else if why != "" {
		j.log.Info().Str("reason", why).Msg("action not run")
		r := j.result(events.ResultSkipped)
		r.Reason = why
		return outcome{result: r}
	}

	// Only what follows from the journal reaches Proxmox.
	if !e.cfg.unverified {
		basis, why, err := e.verify(ctx, a, lasts, &j.leads)
		j.basis = basis
		switch {
		case err != nil:
			j.log.Warn().Err(err).Msg("journal unreadable")
			return abandon
		case why != "":
			return j.refuse(why)
		}
	}

	// A redelivery with no journalled task: a predecessor may have died
	// between issuing the mutation and journalling its task.
	if j.delivered > 1 && e.finder != nil && !a.Time.IsZero() {
		t, found, err := e.finder.FindTask(ctx, j.ref, pveOp(a.Op), a.Time.Truncate(time.Second))
		switch {
		case ctx.Err() != nil:
			return abandon
		case err != nil && a.Op == events.OpReboot:
			// A guest reads as running before and after a reboot: no
			// pre-check can tell whether the predecessor's went out, and
			// rebooting again on a guess would reboot twice. A transient
			// failure (the node busy or unreachable) is asked again by
			// the redelivery, after the ack wait; any other ends the
			// action failed, not rebooted, with the read-back the planner
			// plans from.
			if pve.Classify(err) == pve.ClassTransient {
				j.log.Warn().Err(err).Msg("task lookup failed; a reboot is not re-checked by status: leaving it for its redelivery to look again")
				return abandon
			}
			return j.finish(ctx, j.failed(fmt.Errorf("not rebooted again: the task list, which says whether an earlier attempt rebooted, could not be read: %w", err), pve.Classify(err)))
		case err != nil:
			j.log.Warn().Err(err).Msg("task lookup failed; re-checking the guest instead")
		case found:
			j.log.Info().Str("upid", t.UPID).Msg("adopting a task issued but not journalled by a previous attempt")
			return j.started(ctx, t)
		}
	}

	// Pre-check, so that a redone action never mutates twice.
	if out, done := j.precheck(ctx); done {
		return out
	}

	// The node's call rate, shared with the other executors.
	if e.rates.wait(ctx, a.Node) != nil {
		return abandon
	}
	// The partition's lease, last before Proxmox: an executor that lost it
	// (stalled past its TTL) must not act; the new owner resumes the action.
	if !e.holds(j.part) {
		j.log.Warn().Int("partition", j.part).Msg("partition no longer ours; leaving the action to its owner")
		return abandon
	}

	// Issue the mutation, exactly once.
	// The lease again once the node's slot is granted (pve.WithGate): the
	// wait for it may outlast the lease.
	mctx := pve.WithGate(ctx, func() bool { return e.holds(j.part) })
	if j.leads {
		mctx = pve.Ahead(mctx)
	}
	t, err := j.mutate(mctx)
	if ctx.Err() != nil {
		// The call may or may not have reached Proxmox: like a crash, the
		// redelivery re-checks.
		return abandon
	}
	if errors.Is(err, pve.ErrGateClosed) {
		j.log.Warn().Int("partition", j.part).Msg("partition lost while waiting for the node; leaving the action to its owner (not sent)")
		return abandon
	}
	if err != nil {
		var pe *pve.Error
		class := pve.Classify(err)
		var r *events.Result
		switch {
		case errors.As(err, &pe) && pe.Indeterminate:
			j.log.Warn().Err(err).Msg("mutation outcome unknown; re-reading the guest")
			r = j.failed(err, pve.ClassTransient)
		case class == pve.ClassAlreadyDone:
			r = j.result(events.ResultSucceeded)
			r.Reason = message(err)
			r.ErrorClass = events.ClassAlreadyDone
		default:
			r = j.failed(err, class)
		}
		return j.finish(ctx, r)
	}
	if t.IsZero() {
		return j.finish(ctx, j.result(events.ResultSucceeded))
	}
	return j.started(ctx, t)
}

// refuse ends an action that does not follow from the journal: skipped,
// with the reason, and never sent to Proxmox.
func (j *job) refuse(why string) outcome {
	j.log.Warn().Str("reason", why).Msg("action refused")
	r := j.result(events.ResultSkipped)
	r.Reason = events.TruncateReason(why)
	return outcome{result: r}
}

// fenceReads is what the journal says about newer desired state and newer
// observations of an action's guest.
type fenceReads struct {
	desired, observed uint64
	err               error
}

func (e *Executor) fenceReads(ctx context.Context, a events.Action, lasts guestLasts) fenceReads {
	var fr fenceReads
	var oerr error
	// Both usually end at the newest entry, with no further read.
	fr.desired, fr.err = e.supersedingDesired(ctx, a.VMID, a.DesiredSeq, lasts.desired)
	fr.observed, oerr = e.supersedingObservation(ctx, a.VMID, a.BasisSeq, lasts.observed)
	if fr.err == nil {
		fr.err = oerr
	}
	return fr
}

// fence returns why the action is stale, "" if it is current.
func fence(rec record, fr fenceReads) (string, error) {
	switch {
	case rec.newerAction != 0:
		return fmt.Sprintf("superseded by action %d", rec.newerAction), nil
	case fr.err != nil:
		return "", fr.err
	case fr.desired != 0:
		return fmt.Sprintf("superseded by desired revision %d", fr.desired), nil
	case fr.observed != 0:
		return fmt.Sprintf("superseded by observation %d", fr.observed), nil
	}
	return "", nil
}

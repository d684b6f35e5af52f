package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// job is one delivery of one action being handled.
type job struct {
	e         *Executor
	msg       jetstream.Msg
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
	hb        *heartbeat
	log       zerolog.Logger
}

// handle runs one delivery. It acknowledges the message only after the
// action's final result is journalled (or found journalled); every other
// way out leaves it un-acknowledged for redelivery.
func (e *Executor) handle(ctx context.Context, part int, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		e.log.Error().Err(err).Str("subject", msg.Subject()).Msg("action without JetStream metadata; terminating it")
		_ = msg.Term()
		return
	}
	a, err := decodeAction(msg.Subject(), msg.Data(), e.cfg.Cluster)
	if err != nil {
		// Nothing can be done with it, now or on redelivery.
		log := e.log.With().Uint64("seq", md.Sequence.Stream).Uint64("delivered", md.NumDelivered).Logger()
		log.Error().Err(err).Str("subject", msg.Subject()).Msg("undecodable action; terminating it")
		if err := msg.Term(); err != nil {
			log.Warn().Err(err).Msg("term")
		}
		return
	}
	// One logger context per action, built once.
	log := e.log.With().Uint64("seq", md.Sequence.Stream).Uint64("delivered", md.NumDelivered).
		Str("action_id", a.ID).Int("vmid", a.VMID).Str("op", string(a.Op)).
		Str("node", a.Node).Str("correlation_id", a.CorrelationID).Logger()
	if !e.claim(a.ID) {
		// A redelivery of an action this process is still working on: its
		// handler acknowledges the message when done.
		log.Debug().Msg("action already in progress here; ignoring redelivery")
		return
	}
	defer e.release(a.ID)

	hb := startHeartbeat(msg, e.cfg.AckWait/3, log)
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
		e: e, msg: msg, a: a, seq: md.Sequence.Stream, delivered: md.NumDelivered, part: part,
		ref: pve.GuestRef{Kind: pve.Kind(a.Kind), Node: a.Node, VMID: a.VMID},
		hb:  hb, log: log,
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
		ev := j.log.Info()
		if r.Status == events.ResultFailed {
			ev = j.log.Warn().Str("error", r.Error).Str("error_class", r.ErrorClass)
		}
		ev.Str("status", string(r.Status)).Str("upid", r.UPID).Str("reason", r.Reason).Msg("action finished")
	}
	if err := j.msg.DoubleAck(ctx); err != nil {
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
	switch {
	case rec.final != nil:
		j.log.Info().Str("status", string(rec.final.Status)).Msg("action already finished; acknowledging")
		return outcome{ackOnly: true}
	case rec.started != nil:
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

	// A redelivery with no journalled task: a predecessor may have died
	// between issuing the mutation and journalling its task.
	if j.delivered > 1 && e.finder != nil && !a.Time.IsZero() {
		t, found, err := e.finder.FindTask(ctx, j.ref, pveOp(a.Op), a.Time.Truncate(time.Second))
		switch {
		case ctx.Err() != nil:
			return abandon
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

	// The partition's lease, last before Proxmox: an executor that lost it
	// (stalled past its TTL) must not act; the new owner resumes the action.
	if !e.holds(j.part) {
		j.log.Warn().Int("partition", j.part).Msg("partition no longer ours; leaving the action to its owner")
		return abandon
	}

	// Issue the mutation, exactly once.
	t, err := j.mutate(ctx)
	if ctx.Err() != nil {
		// The call may or may not have reached Proxmox: like a crash, the
		// redelivery re-checks.
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

// precheck reads the guest's power state before a power operation. done
// reports that the action ends here (already in the wanted state, locked,
// unreadable, or shutting down).
func (j *job) precheck(ctx context.Context) (outcome, bool) {
	var want string
	switch j.a.Op {
	case events.OpStart:
		want = "running"
	case events.OpStop, events.OpShutdown:
		want = "stopped"
	case events.OpReboot:
	default:
		// set_config carries the digest: Proxmox refuses a stale write.
		return abandon, false
	}
	st, err := j.e.px.GuestStatus(ctx, j.ref)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil:
		return outcome{result: j.failed(err, pve.Classify(err))}, true
	case st.Lock != "" && st.Lock != "suspended":
		r := j.result(events.ResultFailed)
		r.ErrorClass = pve.ClassLocked.String()
		r.Error = fmt.Sprintf("guest is locked (%s)", st.Lock)
		return j.finish(ctx, r), true
	case want != "" && st.Status == want:
		r := j.result(events.ResultSucceeded)
		r.Reason = "already " + want
		return j.finish(ctx, r), true
	}
	return abandon, false
}

// mutate issues the action's Proxmox call.
func (j *job) mutate(ctx context.Context) (pve.TaskRef, error) {
	px, a := j.e.px, j.a
	j.log.Debug().Msg("issuing mutation")
	switch a.Op {
	case events.OpStart:
		return px.Start(ctx, j.ref)
	case events.OpStop:
		return px.Stop(ctx, j.ref)
	case events.OpShutdown:
		return px.Shutdown(ctx, j.ref, a.Timeout, true)
	case events.OpReboot:
		return px.Reboot(ctx, j.ref)
	case events.OpSetConfig:
		return px.UpdateConfig(ctx, j.ref, pve.ConfigChange{Set: a.Set, Delete: a.Delete, Digest: a.Digest})
	}
	err := fmt.Errorf("unknown operation %q", a.Op)
	return pve.TaskRef{}, &pve.Error{Class: pve.ClassTerminal, Message: err.Error(), Err: err}
}

// started journals the task id (invariant 3), then waits on the task. If
// the journal stays unreachable the task is waited on anyway: its outcome is
// still the action's, and a redelivery re-checks the guest.
func (j *job) started(ctx context.Context, t pve.TaskRef) outcome {
	r := j.result(events.ResultStarted)
	r.UPID, r.Node = t.UPID, t.Node
	if err := j.publish(ctx, r); err != nil {
		if ctx.Err() != nil {
			return abandon
		}
		if errors.Is(err, errFenced) {
			j.log.Warn().Err(err).Str("upid", t.UPID).Msg("another executor journalled for this guest; leaving the action to it")
			return abandon
		}
		j.log.Error().Err(err).Str("upid", t.UPID).Msg("task id not journalled; waiting on the task anyway")
	} else {
		j.log.Info().Str("upid", t.UPID).Msg("task journalled")
	}
	return j.wait(ctx, t)
}

const maxWaitRetry = 30 * time.Second

// wait waits for a journalled task and turns its outcome into the final
// result. When Proxmox cannot be asked (transient poll failures) it keeps
// waiting: the task runs on regardless, and only its own exit status says
// how the action ended.
func (j *job) wait(ctx context.Context, t pve.TaskRef) outcome {
	opts := pve.WaitOptions{OnPoll: j.hb.touch, MaxInterval: min(time.Second, j.e.cfg.AckWait/3)}
	retry := 250 * time.Millisecond
	for {
		res, err := j.e.px.WaitTask(ctx, t, opts)
		if ctx.Err() != nil {
			return abandon // no outcome claimed; the redelivery resumes
		}
		var pe *pve.Error
		switch {
		case err == nil:
			r := j.result(events.ResultSucceeded)
			r.UPID, r.Node = t.UPID, t.Node
			if res.Warnings > 0 {
				r.Warnings, r.TaskLog = res.Warnings, res.Log
			}
			return j.finish(ctx, r)
		case errors.As(err, &pe) && pe.UPID != "":
			// The task's exit status.
			var r *events.Result
			if pe.Class == pve.ClassAlreadyDone {
				r = j.result(events.ResultSucceeded)
				r.Reason = message(err)
			} else {
				r = j.failed(err, pe.Class)
				r.TaskLog = res.Log
			}
			r.UPID, r.Node = t.UPID, t.Node
			return j.finish(ctx, r)
		case pve.Classify(err) == pve.ClassTransient:
			j.log.Warn().Err(err).Str("upid", t.UPID).Dur("retry_in", retry).Msg("task status unreadable; still waiting")
			if sleep(ctx, retry) != nil {
				return abandon
			}
			retry = min(retry*2, maxWaitRetry)
		default:
			r := j.failed(err, pve.Classify(err))
			r.UPID, r.Node = t.UPID, t.Node
			return j.finish(ctx, r)
		}
	}
}

// finish reads the guest back into the final result. A failed read-back
// leaves the observation out; a shutdown abandons.
func (j *job) finish(ctx context.Context, r *events.Result) outcome {
	readAt := j.e.cfg.Clock()
	st, err := j.e.px.GuestStatus(ctx, j.ref)
	var cfg *pve.GuestConfig
	if err == nil {
		cfg, err = j.e.px.GuestConfig(ctx, j.ref)
	}
	if ctx.Err() != nil {
		return abandon
	}
	if err != nil {
		j.log.Warn().Err(err).Msg("read-back failed; result without observation")
	} else {
		r.Observed = observation(events.NewMeta(j.e.cfg.Name, j.a.CorrelationID, readAt), j.e.cfg.Cluster, j.ref, st, cfg, readAt)
	}
	return outcome{result: r}
}

// result starts a result of the action.
func (j *job) result(s events.ResultStatus) *events.Result {
	return &events.Result{
		Meta:     events.NewMeta(j.e.cfg.Name, j.a.CorrelationID, j.e.cfg.Clock()),
		ActionID: j.a.ID,
		VMID:     j.a.VMID,
		Cluster:  j.e.cfg.Cluster,
		Op:       j.a.Op,
		Status:   s,
		Node:     j.a.Node,
		Executor: j.e.cfg.Name,
	}
}

func (j *job) failed(err error, class pve.Class) *events.Result {
	r := j.result(events.ResultFailed)
	r.Error, r.ErrorClass = err.Error(), class.String()
	return r
}

// message is Proxmox's own message of an error, for reasons.
func message(err error) string {
	var pe *pve.Error
	if errors.As(err, &pe) && pe.Message != "" {
		return pe.Message
	}
	return err.Error()
}

func pveOp(op events.Op) pve.Op {
	switch op {
	case events.OpStart:
		return pve.OpStart
	case events.OpStop:
		return pve.OpStop
	case events.OpShutdown:
		return pve.OpShutdown
	case events.OpReboot:
		return pve.OpReboot
	case events.OpSetConfig:
		return pve.OpUpdateConfig
	}
	return pve.OpUnknown
}

// heartbeat keeps an action's message alive with InProgress while it is
// handled: on a timer, and on each task poll (rate-limited). A timer, not
// a goroutine: most actions end long before the first beat.
type heartbeat struct {
	msg     jetstream.Msg
	every   time.Duration
	log     zerolog.Logger
	mu      sync.Mutex
	last    time.Time
	stopped bool
	timer   *time.Timer
}

func startHeartbeat(msg jetstream.Msg, every time.Duration, log zerolog.Logger) *heartbeat {
	h := &heartbeat{msg: msg, every: every, log: log, last: time.Now()}
	h.mu.Lock()
	h.timer = time.AfterFunc(every, h.tick)
	h.mu.Unlock()
	return h
}

func (h *heartbeat) tick() {
	h.touch()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.timer.Reset(h.every)
	}
}

// touch sends InProgress unless one went out less than every/2 ago, or the
// heartbeat was stopped.
func (h *heartbeat) touch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || time.Since(h.last) < h.every/2 {
		return
	}
	h.last = time.Now()
	if err := h.msg.InProgress(); err != nil {
		h.log.Debug().Err(err).Msg("in-progress heartbeat")
	}
}

// stop ends the heartbeat: no InProgress is sent once it returns.
func (h *heartbeat) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
}

package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/pve"
)

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
	case events.OpClone:
		return j.cloneCheck(ctx)
	case events.OpDestroy:
		return j.destroyCheck(ctx)
	case events.OpMigrate:
		return j.migrateCheck(ctx)
	case events.OpSnapshot:
		return j.snapshotCheck(ctx)
	default:
		// set_config carries the digest: Proxmox refuses a stale write.
		// Planned from a derived read-back, it has none: read it.
		if j.a.Op == events.OpSetConfig && j.a.Digest == "" {
			return j.digestCheck(ctx)
		}
		return abandon, false
	}
	if j.delivered == 1 && j.basis != nil && j.basis.Lock == "" && j.basis.Status != want && (j.a.Op != events.OpReboot || j.basis.Status == "running" && j.a.Kind == events.QEMU) {
		// First delivery of a verified action: the basis is the newest
		// reading of the guest (the fence said so). Proxmox answers a
		// start of a running guest with "already running" (the call's
		// error for a container, the task's exit status for a VM: both
		// already-done), a stop or shutdown of a stopped VM with a task
		// that does nothing, a VM's reboot of a stopped VM with "not
		// running" (terminal: nothing rebooted), and a locked guest with
		// "locked". Only a redelivery, which may follow a mutation
		// already made, reads first. (A reboot waits on this call in
		// every wave of a fleet change: 20 ms and more each.) Not a
		// container's reboot: pve-container's reboot does not check the
		// config lock (vm_reboot: lxc-stop, then start), so a backup or
		// snapshot begun since the basis is found here.
		return abandon, false
	}
	st, err := j.e.px.GuestStatus(ctx, j.ref)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil:
		return outcome{result: j.failed(err, pve.Classify(err))}, true
	case st.Lock != "" && st.Lock != "suspended":
		return j.finish(ctx, j.locked(fmt.Sprintf("guest is locked (%s)", st.Lock))), true
	case want != "" && st.Status == want:
		r := j.result(events.ResultSucceeded)
		r.Reason = "already " + want
		r.ErrorClass = events.ClassAlreadyDone // nothing done: the planner backs off repeats
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
		return px.Reboot(ctx, j.ref, a.Timeout)
	case events.OpSetConfig:
		digest := a.Digest
		if digest == "" {
			digest = j.digest // read by digestCheck
		}
		return px.UpdateConfig(ctx, j.ref, pve.ConfigChange{Set: a.Set, Delete: a.Delete, Revert: a.Revert, Digest: digest})
	case events.OpClone:
		c := a.Clone
		full := c.Full
		// The description names the action: a successor that finds the
		// guest knows it for this clone (cloneCheck).
		return px.Clone(ctx, cloneSource(a), pve.CloneSpec{NewID: a.VMID, Name: c.Name, TargetNode: a.Node, Full: &full,
			Storage: c.Storage, Pool: c.Pool, Description: events.CloneDescription(c.From, a.ID)})
	case events.OpDestroy:
		return px.Destroy(ctx, j.ref)
	case events.OpRemoveHA:
		return pve.TaskRef{}, px.RemoveHA(ctx, j.ref)
	}
	if t, err, ok := j.mutateWhole(ctx); ok {
		return t, err
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
	j.fresh = true
	return j.wait(ctx, t)
}

const maxWaitRetry = 30 * time.Second

// unknownPollCap caps the pause between polls of a task whose length no
// earlier task of its operation told (taskPace), for its first
// unknownFine (power tasks take seconds).
const (
	unknownPollCap = 100 * time.Millisecond
	unknownFine    = 3 * time.Second
)

// wait waits for a journalled task and turns its outcome into the final
// result. When Proxmox cannot be asked (transient poll failures) it keeps
// waiting: the task runs on regardless, and only its own exit status says
// how the action ended.
func (j *job) wait(ctx context.Context, t pve.TaskRef) outcome {
	opts := pve.WaitOptions{OnPoll: j.hb.touch, MaxInterval: min(time.Second, j.e.cfg.AckWait/3)}
	pk := paceKind{op: j.a.Op, kind: j.a.Kind}
	if j.fresh {
		// A task this job just started: its first poll at its expected
		// end, however far (the heartbeat keeps the action's message on
		// its own timer, heartbeat.go), then every afterExpectPoll for a
		// while: a task's end is found within that of its end.
		opts.Expect = j.e.pace.expect(t.Node, pk)
		opts.Fine, opts.FineInterval = opts.Expect+afterExpect(opts.Expect), afterExpectPoll(opts.Expect)
		if opts.Expect == 0 {
			// Nothing known of such tasks yet: pauses doubling up to 1 s
			// would find a 1 s task some 260 ms late, which a one-shot
			// change of a few guests (one wave per node) pays in full.
			// For its first unknownFine the task is polled at most every
			// unknownPollCap, then as any other: a long task (a clone)
			// costs a few more polls, not ten a second.
			opts.Fine, opts.FineInterval = unknownFine, unknownPollCap
		}
	}
	retry := 250 * time.Millisecond
	for {
		began := j.e.clk.Now()
		res, err := j.e.px.WaitTask(ctx, t, opts)
		if ctx.Err() != nil {
			return abandon // no outcome claimed; the redelivery resumes
		}
		if ended := new(*pve.Error); j.fresh && (err == nil || (errors.As(err, ended) && (*ended).UPID != "")) {
			j.e.pace.observe(t.Node, pk, opts.Expect, j.e.clk.Now().Sub(began), res.Polls)
		}
		opts.Expect, opts.Fine, j.fresh = 0, 0, false // a retry polls from the start
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
				// QEMU says "already running" in the task's exit status:
				// nothing was done, as a pre-check would have found.
				r = j.result(events.ResultSucceeded)
				r.Reason = message(err)
				r.ErrorClass = events.ClassAlreadyDone
			} else {
				r = j.failed(err, pe.Class)
				r.TaskLog = res.Log
			}
			r.UPID, r.Node = t.UPID, t.Node
			return j.finish(ctx, r)
		case pve.Classify(err) == pve.ClassTransient:
			j.log.Warn().Err(err).Str("upid", t.UPID).Dur("retry_in", retry).Msg("task status unreadable; still waiting")
			if clock.Sleep(ctx, j.e.clk, retry) != nil {
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
	if r.Status == events.ResultSucceeded {
		if err := j.afterSuccess(ctx, r); err != nil {
			if ctx.Err() != nil {
				return abandon
			}
			upid, node := r.UPID, r.Node
			r = j.failed(err, pve.Classify(err))
			r.UPID, r.Node = upid, node
		}
	}
	if o := j.configReadBack(ctx, r); o != nil {
		r.Observed = o
		j.carryInventory(ctx, o, r)
		return outcome{result: r}
	}
	if o, err := j.derivedPower(ctx, r); o != nil || err != nil {
		if ctx.Err() != nil {
			return abandon
		}
		if err == nil {
			r.Observed = o
			j.carryInventory(ctx, o, r)
			return outcome{result: r}
		}
		j.log.Warn().Err(err).Msg("read-back failed; result without observation")
		return outcome{result: r}
	}
	readAt := j.e.clk.Now()
	st, err := j.e.px.GuestStatus(ctx, j.ref)
	var cfg *pve.GuestConfig
	if err == nil {
		cfg, err = j.e.px.GuestConfig(ctx, j.ref)
	}
	if ctx.Err() != nil {
		return abandon
	}
	switch {
	case err != nil && pve.Classify(err) == pve.ClassGone && (j.a.Op == events.OpDestroy || j.a.Op == events.OpClone):
		// Destroyed (or never made): the read-back says so. After any
		// other action a guest not found where it was is elsewhere
		// (moved by a person or by HA): the observer finds it.
		r.Observed = &events.Observed{Meta: events.NewMeta(j.e.cfg.Name, j.a.CorrelationID, readAt), VMID: j.a.VMID,
			Cluster: j.e.cfg.Cluster, Config: events.GuestConfig{Tags: []string{}}, ReadAt: readAt.UTC(), Source: events.SourceExecutor}
	case err != nil:
		j.log.Warn().Err(err).Msg("read-back failed; result without observation")
	default:
		r.Observed = observation(events.NewMeta(j.e.cfg.Name, j.a.CorrelationID, readAt), j.e.cfg.Cluster, j.ref, st, cfg, readAt)
		j.carryInventory(ctx, r.Observed, r)
	}
	// Taking a lock (a backup starting) rewrites the config, so a write
	// planned before it meets a digest mismatch first (Proxmox checks the
	// digest before the lock): that too is waiting for the lock.
	if o := r.Observed; r.Status == events.ResultFailed && r.ErrorClass == events.ClassConflict && o != nil && o.Lock != "" && o.Lock != "suspended" {
		l := j.locked(fmt.Sprintf("guest is locked (%s); the write met its config change: %s", o.Lock, r.Error))
		l.Observed, l.UPID, l.TaskLog = o, r.UPID, r.TaskLog
		r = l
	}
	return outcome{result: r}
}

// result starts a result of the action.
func (j *job) result(s events.ResultStatus) *events.Result {
	return &events.Result{
		Meta:     events.NewMeta(j.e.cfg.Name, j.a.CorrelationID, j.e.clk.Now()),
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
	if class == pve.ClassLocked {
		return j.locked(message(err))
	}
	r := j.result(events.ResultFailed)
	r.Error, r.ErrorClass = err.Error(), class.Event()
	return r
}

// locked ends an action that met a Proxmox lock: skipped, not failed.
// The planner waits for the lock to go (it shows in the read-back) and
// backs off repeats; a backup or a busy node is not an error.
func (j *job) locked(why string) *events.Result {
	r := j.result(events.ResultSkipped)
	r.ErrorClass = events.ClassLocked
	r.Reason = events.TruncateReason("waiting for a Proxmox lock: " + why)
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
	case events.OpClone:
		return pve.OpClone
	case events.OpDestroy:
		return pve.OpDelete
	case events.OpResize:
		return pve.OpResize
	case events.OpMigrate:
		return pve.OpMigrate
	case events.OpSnapshot:
		return pve.OpSnapshot
	}
	return pve.OpUnknown
}

package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// Plan decides a guest's status and next actions. It is pure.
func Plan(v *projector.View, c projector.ClusterState, p Policy, now time.Time) Decision {
	d := plan(v, c, p, now)
	switch d.Status.Kind {
	case Rejected, Unmanaged, Acting:
		return d
	}
	if h, released := v.HoldInForce(&c); h != nil && !released && len(d.Steps) > 0 && unprotected(d.Steps)[0].Op == h.Op {
		// Journalled as held: it stays held until an operator approves
		// it, however long ago the guard's window began.
		d.Steps = unprotected(d.Steps)
		d = heldDecision(d, h.Reason)
	}
	if m := pausedBy(v, c); m != nil {
		// Paused: planned as usual (status shows what would follow), never
		// acted on.
		why := d.Status.Reason
		if why == "" {
			why = string(d.Status.Kind)
		}
		// Not awaiting an approval while paused: resuming comes first.
		d.Status.Kind, d.Status.Awaits = Paused, ""
		d.Status.Reason = fmt.Sprintf("paused by %s at %s (journal #%d; converge resume to act again); %s",
			m.By, m.At.Format(time.RFC3339), m.Seq, strings.TrimPrefix(why, "next: "))
		d.Status.RetryAt = time.Time{}
		d.Steps = nil
	}
	return d
}

// kindRejection holds a desired event that did not state the guest's kind
// to the rules of the kind observed (events.Desired.CheckKind), as
// DecodeDesired holds one that did: nothing is planned from a value that
// kind of guest refuses.
func kindRejection(v *projector.View) error {
	if v.Desired.Kind != nil || v.Observed == nil || v.Observed.Kind == "" {
		return nil
	}
	return v.Desired.CheckKind(v.Observed.Kind)
}

// pausedBy is the pause in force for the guest, nil when none.
func pausedBy(v *projector.View, c projector.ClusterState) *projector.Mark {
	if v.Paused != nil {
		return v.Paused
	}
	return c.PausedAll
}

func plan(v *projector.View, c projector.ClusterState, p Policy, now time.Time) Decision {
	if v.Rejected != nil {
		return decide(Rejected, "desired event #%d rejected: %s", v.Rejected.Seq, v.Rejected.Reason)
	}
	if v.Desired == nil {
		if r := v.Released; r != nil {
			return decide(Unmanaged, "released by %s at %s (journal #%d): converge leaves this guest alone until a new desired state arrives",
				r.By, r.At.Format(time.RFC3339), r.Seq)
		}
		return decide(Unmanaged, "no desired state: converge leaves this guest alone")
	}
	if v.InFlight != nil {
		a := v.InFlight
		d := decide(Acting, "%s: %s", a.Op, a.Reason)
		if v.Started != nil && v.Started.UPID != "" {
			d.Status.Reason += " (task " + v.Started.UPID + ")"
		}
		return d
	}
	// Invariant 6: nothing is done from stale or missing observations.
	switch {
	case c.HeartbeatAt.IsZero():
		return decide(Blocked, "no observation of Proxmox yet (is an observer running?)")
	case now.Sub(c.HeartbeatAt) > p.ObserverTimeout:
		return decide(Blocked, "observer silent for %s (last heartbeat %s)", now.Sub(c.HeartbeatAt).Round(time.Second), c.HeartbeatAt.Format(time.RFC3339))
	case !c.Reachable:
		return decide(Blocked, "Proxmox unreachable: %s", c.Error)
	case v.Observed == nil && v.RefusedObservation != nil:
		return decide(Blocked, "guest not observed yet: observation #%d refused: %s", v.RefusedObservation.Seq, v.RefusedObservation.Reason)
	}
	if err := kindRejection(v); err != nil {
		return decide(Rejected, "desired event #%d rejected: %s", v.DesiredSeq, events.TruncateReason(err.Error()))
	}
	d, o := v.Desired, v.Observed
	var steps []Step
	var drift, waiting []string
	var reopen time.Time
	switch {
	case v.Missing(&c):
		if d.Absent {
			return decide(Absent, "guest %d does not exist, as desired", v.VMID)
		}
		step, why := createStep(v, &c)
		if why != "" {
			return decide(Error, "%s", why)
		}
		steps, drift = []Step{step}, []string{"guest does not exist"}
	case o == nil:
		// Not an outage: the observer's pass after the desired event
		// tells whether the guest exists.
		return decide(Pending, "waiting for the observer's next pass to look for guest %d in Proxmox", v.VMID)
	case o.Template:
		return decide(Error, "guest %d is a template; converge does not manage templates", v.VMID)
	case isCreating(o.Lock) && !o.Owned():
		if why := cloneLeftover(v); why != "" {
			return decide(Error, "%s", why)
		}
		// A clone (ours, before it wrote its description, or anyone's)
		// still being made: who made it shows once it is done.
		return decide(Pending, "waiting: guest %d is being created (lock %s)", v.VMID, o.Lock)
	case d.Clone != nil && !o.Owned():
		return decide(Error, "vmid %d exists and was not created by converge; drop `clone` to adopt it", v.VMID)
	case d.Absent:
		var dec Decision
		if steps, dec = destroySteps(v, p); len(steps) == 0 {
			return dec
		}
		drift = []string{"guest exists: want absent"}
	default:
		if dec, stop := checkExisting(v); stop {
			return dec
		}
		dp := planDisks(d, o)
		if dp.refuse != "" {
			return decide(Error, "%s", dp.refuse)
		}
		steps, drift, waiting, reopen = diff(v, dp, p, now)
		steps = withSnapshots(v, steps, p.SnapshotKeep)
	}
	if len(steps) == 0 {
		if why := haBlocked(d, o); why != "" {
			dec := decide(Blocked, "%s", why)
			dec.Status.Drift = append(drift, nodeDrift(d, o))
			return dec
		}
		if len(waiting) > 0 {
			dec := decide(Pending, "%s", strings.Join(waiting, "; "))
			dec.Status.Drift = drift
			dec.Status.RetryAt = reopen
			return dec
		}
		return Decision{Status: Status{Kind: Converged}}
	}
	dec := Decision{Steps: steps, Status: Status{Kind: Pending, Drift: drift, Reason: "next: " + steps[0].Reason}}
	if o != nil && o.Exists && o.Lock != "" {
		l := o.Lock
		if why := cloneLeftover(v); why != "" {
			return decide(Error, "%s", why)
		}
		dec.Status.Reason = fmt.Sprintf("waiting: guest is locked (%s); %s", l, dec.Status.Reason)
		dec.Steps = nil
		return dec
	}
	if v.Failures > 0 {
		if v.Terminal {
			dec.Status.Kind = Error
			dec.Status.Reason = fmt.Sprintf("%s failed: %s (not retried until the desired state changes)", lastOp(v), v.LastError)
			if lastOp(v) == string(events.OpReboot) {
				dec.Status.Reason += "; converge never forces a reboot: restart the guest yourself, or give it longer (--shutdown-timeout) and publish the desired state again"
			}
			dec.Steps = nil
			return dec
		}
		// A first digest conflict is answered by re-planning from the fresh
		// read the result carried, not by waiting; repeated ones back off
		// below.
		if v.LastErrorKind != events.ClassConflict {
			at := v.LastFailureAt.Add(p.Backoff(v.VMID, v.Failures))
			if now.Before(at) {
				dec.Status.RetryAt = at
				dec.Status.Reason = fmt.Sprintf("retry %d after %s failed: %s; next attempt %s", v.Failures+1, lastOp(v), v.LastError, at.Format(time.RFC3339))
				dec.Steps = nil
				return dec
			}
		}
	}
	if held, ok := loopGuard(v, p, now); ok {
		held.Status.Drift = drift
		return held
	}
	if p.ObserveOnly {
		dec.Status.Reason = "observe-only: would " + dec.Status.Reason[len("next: "):]
		dec.Steps = nil
	}
	return dec
}

// diff orders the minimal steps: stop before writing config (so it applies
// at once), write config before starting (so the guest boots with it), and
// reboot a running guest only for desired values Proxmox keeps pending.
//
// A pending value is what the guest gets at its next restart, so one that
// differs from the desired value is drift even when the applied value is
// right. Then only the pending value goes (Proxmox's revert parameter):
// rewriting the applied value would also drop it (Proxmox removes a pending
// value equal to the applied one), but would take a key converge does not
// need to change through the hotplug path and plan a needless reboot.
func diff(v *projector.View, dp diskPlan, p Policy, now time.Time) (steps []Step, drift, waiting []string, reopen time.Time) {
	d, o := v.Desired, v.Observed
	var set map[string]string // made at the first key to write
	var del, revert, changed, pendingReboot []string
	var buf [8]field
	fields := managedFields(buf[:0], d, o)
	for _, f := range fields {
		target := f.have
		if f.hasQueued {
			target = f.queued
		}
		switch {
		case target != f.want && f.hasQueued && f.have == f.want:
			drift = append(drift, fmt.Sprintf("%s: want %s, pending %s (applies at next restart)", f.label, show(f.want), show(f.queued)))
			revert = append(revert, f.key)
			changed = append(changed, f.label+" (revert pending)")
		case target != f.want:
			drift = append(drift, fmt.Sprintf("%s: want %s, have %s", f.label, show(f.want), show(target)))
			if f.want == "" && (f.key == "description" || f.key == "tags") {
				del = append(del, f.key)
			} else {
				if set == nil {
					set = map[string]string{}
				}
				set[f.key] = f.want
			}
			changed = append(changed, f.label)
		case f.have != f.want:
			drift = append(drift, fmt.Sprintf("%s: want %s, applies at next restart", f.label, show(f.want)))
			pendingReboot = append(pendingReboot, f.label)
		}
	}
	for k, val := range dp.add {
		if set == nil {
			set = map[string]string{}
		}
		set[k] = val
		changed = append(changed, "disks."+k)
	}
	drift = append(drift, dp.drift...)
	pendingReboot = append(pendingReboot, dp.pending...)
	for _, k := range dp.revert {
		revert = append(revert, k)
		changed = append(changed, "disks."+k+" (revert pending removal)")
	}
	sort.Strings(del)
	sort.Strings(revert)
	running := o.Status == "running"
	var cfg *Step
	if len(set) > 0 || len(del) > 0 || len(revert) > 0 {
		if set == nil {
			set = map[string]string{}
		}
		cfg = &Step{Op: events.OpSetConfig, Set: set, Delete: del, Revert: revert,
			Reason: "config drift: " + strings.Join(changed, ", ")}
		if o.Kind == events.QEMU && events.HasCloudInitKey(set) {
			cfg.Reason += "; the cloud-init drive is regenerated and reaches the guest at its next boot"
		}
	}
	// Placement and growth first: a migration moves the guest before
	// anything else is done to it, and a resize is applied at once, so no
	// later config write can undo it (converge never writes an existing
	// disk's key).
	if mig, why, ok := placement(d, o, consent(d, p, now)); ok {
		drift = append(drift, nodeDrift(d, o))
		steps = append(steps, mig)
	} else if why != "" {
		drift = append(drift, nodeDrift(d, o))
		waiting = append(waiting, why)
	}
	steps = append(steps, dp.resize...)
	defer func() {
		if ps, ok := poolStep(d, o, p); ok {
			drift = append(drift, ps.Reason)
			steps = append(steps, ps)
		}
	}()
	wantPower := ""
	if d.Power != nil {
		wantPower = string(*d.Power)
	}
	if o.HA != "" && wantPower != "" {
		// HA-managed: HA starts and stops the guest.
		if cfg != nil {
			steps = append(steps, *cfg)
		}
		if st, why := haPower(o, wantPower); st != nil {
			drift = append(drift, fmt.Sprintf("power: want %s, HA state %s", wantPower, o.HA))
			steps = append(steps, *st)
		} else if why != "" {
			waiting = append(waiting, why)
		}
		if cfg == nil || !running {
			return steps, drift, waiting, reopen
		}
		wantPower = "" // running, as HA keeps it: a pending write may need a reboot below
		cfg = nil
	}
	if o.Status == "paused" && wantPower != "" {
		waiting = append(waiting, "guest is paused; converge does not resume or stop paused guests")
		if cfg != nil {
			steps = append(steps, *cfg)
		}
		return steps, drift, waiting, reopen
	}
	switch {
	case wantPower == "stopped" && running:
		drift = append(drift, "power: want stopped, have running")
		steps = append(steps, Step{Op: events.OpShutdown, Timeout: p.ShutdownTimeout,
			Reason: "desired power stopped, guest is running (graceful shutdown, forced after " + p.ShutdownTimeout.String() + ")"})
		if cfg != nil {
			steps = append(steps, *cfg)
		}
	case wantPower == "running" && !running:
		drift = append(drift, "power: want running, have "+o.Status)
		if cfg != nil {
			steps = append(steps, *cfg)
		}
		steps = append(steps, Step{Op: events.OpStart, Reason: "desired power running, guest is " + o.Status})
	default:
		if cfg != nil {
			steps = append(steps, *cfg)
		}
		if !running {
			break
		}
		keys := append(pendingReboot, restartKeys(o, set, fields)...)
		if len(keys) == 0 {
			break
		}
		restart := p.Restart
		if d.Restart != nil {
			restart = *d.Restart
		}
		w, _ := ParseWindow(p.RestartWindow) // checked by Validate
		loc := p.Location
		if loc == nil {
			loc = time.Local
		}
		switch {
		case len(pendingReboot) == 0 && restart != events.RestartAllowed:
			// The write comes first; what it leaves pending waits then.
		case restart != events.RestartAllowed:
			waiting = append(waiting, strings.Join(keys, ", ")+" waits for a restart (restart: never; desired restart \"allowed\" or --restart allowed lets converge reboot the guest)")
		case !w.Open(now.In(loc)) && len(pendingReboot) == 0:
		case !w.Open(now.In(loc)):
			reopen = w.Next(now.In(loc))
			waiting = append(waiting, fmt.Sprintf("%s waits for a restart: allowed only in the restart window %s (next opens %s)",
				strings.Join(keys, ", "), w, reopen.Format(time.RFC3339)))
		default:
			// Proxmox never forces a VM's reboot (a guest that ignores the
			// ACPI request stays up and the reboot fails); a container's
			// is killed after the timeout.
			how := "ACPI shutdown within " + p.ShutdownTimeout.String() + ", never forced"
			if o.Kind == events.LXC {
				how = "shutdown, killed after " + p.ShutdownTimeout.String()
			}
			steps = append(steps, Step{Op: events.OpReboot, Timeout: p.ShutdownTimeout,
				Reason: "apply pending " + strings.Join(keys, ", ") + " by a clean reboot (" + how + ", then start; restart allowed)"})
		}
	}
	return steps, drift, waiting, reopen
}

// wantTags is the tag set to write: the desired tags, plus events.OwnerTag
// on a guest converge created (kept whatever the desired tags say, added
// at the first write after its clone). ok is false when tags are not
// managed and the mark is in place.
func wantTags(d *events.Desired, o *events.Observed) (_ []string, ok bool) {
	owned, marked := o.Owned(), slices.ContainsFunc(o.Config.Tags, func(t string) bool { return strings.EqualFold(t, events.OwnerTag) })
	switch {
	case d.Tags != nil && owned:
		return append(slices.Clone(*d.Tags), events.OwnerTag), true
	case d.Tags != nil:
		return *d.Tags, true
	case owned && !marked:
		return append(slices.Clone(o.Config.Tags), events.OwnerTag), true
	}
	return nil, false
}

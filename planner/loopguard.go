package planner

import (
	"time"

	"github.com/converge-pve/converge/projector"
)

// loopGuard holds a guest whose actions keep finishing without converging
// it: repeated "already done", skipped or conflicting outcomes back off;
// past Policy.MaxBurst actions in a window the guest is an error until the
// window ends or the desired state changes.
func loopGuard(v *projector.View, p Policy, now time.Time) (Decision, bool) {
	if v.Burst >= p.MaxBurst {
		until := v.BurstStart.Add(projector.BurstWindow)
		if now.Before(until) {
			d := decide(Error, "%d actions for desired revision %d finished without converging the guest since %s; stopped to avoid a loop until %s (or a new desired state): last %s",
				v.Burst, v.DesiredSeq, v.BurstStart.Format(time.RFC3339), until.Format(time.RFC3339), lastOutcome(v))
			d.Status.RetryAt = until
			return d, true
		}
	}
	if v.Repeats >= 2 {
		at := v.LastRepeatAt.Add(p.Backoff(v.VMID, v.Repeats-1))
		if now.Before(at) {
			d := decide(Pending, "%d outcomes in a row changed nothing (last %s); next attempt %s", v.Repeats, lastOutcome(v), at.Format(time.RFC3339))
			d.Status.RetryAt = at
			return d, true
		}
	}
	return Decision{}, false
}

// lastOutcome describes the last result for a status line.
func lastOutcome(v *projector.View) string {
	r := v.LastResult
	if r == nil {
		return "none"
	}
	s := string(r.Op) + " " + string(r.Status)
	if r.ErrorClass != "" {
		s += " (" + string(r.ErrorClass) + ")"
	}
	switch {
	case r.Error != "":
		s += ": " + r.Error
	case r.Reason != "":
		s += ": " + r.Reason
	}
	return s
}

func lastOp(v *projector.View) string {
	if v.LastResult != nil {
		return string(v.LastResult.Op)
	}
	return "action"
}

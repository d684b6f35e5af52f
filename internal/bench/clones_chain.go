package bench

import (
	"strconv"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// CTChain accounts for the makespan along the container template whose
// clones ended last (the ideal's usual bound): StartS + Clones × task +
// LockWaitS + GapsS + TailS is the makespan, where task is the clone
// task's own length (LockHold + LXCClone).
type CTChain struct {
	Template int `json:"template"`
	Clones   int `json:"clones"`
	// StartS: from the first desired event's publish to the template's
	// first clone task.
	StartS float64 `json:"start_s"`
	// LockWaitS: the tasks' time beyond their own length, waiting for
	// their storage's lock behind other clones.
	LockWaitS float64 `json:"lock_wait_s"`
	// GapsS: from each clone task's end to the next one's start (the
	// result seen, planned, the next clone issued).
	GapsS float64 `json:"gaps_s"`
	// TailS: from the last clone task's end until every guest converged
	// (its config write, its result folded).
	TailS float64 `json:"tail_s"`
}

// ctChain is the CTChain of clones (the run's clone tasks), t0 the
// publish, end when every guest converged, task a clone task's own
// length; nil without container clones.
func ctChain(clones []pvesim.TaskInfo, t0, end time.Time, task time.Duration) *CTChain {
	last, lastEnd := "", time.Time{}
	for _, t := range clones {
		if t.Type == "vzclone" && t.End.After(lastEnd) {
			last, lastEnd = t.ID, t.End
		}
	}
	ts := vzcloneRuns(clones)[last]
	if len(ts) == 0 {
		return nil
	}
	tpl, _ := strconv.Atoi(last)
	c := &CTChain{Template: tpl, Clones: len(ts), StartS: ts[0].Start.Sub(t0).Seconds(), TailS: end.Sub(lastEnd).Seconds()}
	for k, t := range ts {
		c.LockWaitS += max(t.End.Sub(t.Start)-task, 0).Seconds()
		if k > 0 {
			c.GapsS += t.Start.Sub(ts[k-1].End).Seconds()
		}
	}
	return c
}

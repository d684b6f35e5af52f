package executor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/projector"
)

// operatorStop says why an action must not run although the journal
// planned it: an operator paused the guest (or every guest) or released
// it after the planner made the plan, and did not resume it since. ""
// when nothing stops it. The planner saw every request up to the
// action's FoldSeq (a paused or released guest is not planned), so only
// the later ones are read. last is the cluster's newest request as the
// action's first journal read found it (readLasts): when it is no later
// than the plan, nothing is read, as on the usual path. (This moves the
// check earlier only by the record and fence reads; a request journalled
// after it is not seen either way, and the mutation may still wait for
// its node's rate after the check: a pause stops actions not yet checked,
// never one already past it.)
func (e *Executor) operatorStop(ctx context.Context, a events.Action, last *journal.Entry) (string, error) {
	from := a.FoldSeq
	if from == 0 { // an older planner's action
		from = max(a.DesiredSeq, a.BasisSeq)
	}
	if seqOf(last) <= from {
		return "", nil
	}
	var paused, pausedAll, released *stopMark
	for next := from + 1; ; {
		en, err := e.j.Next(ctx, events.KindControl, e.cfg.Cluster, 0, next)
		if err != nil {
			return "", err
		}
		if en == nil {
			break
		}
		next = en.Seq + 1
		c, err := events.Decode[events.Control](en.Data)
		if err != nil || c.Validate() != nil || (!c.All && !slices.Contains(c.VMIDs, a.VMID)) {
			continue // not this guest's, or folded by nobody
		}
		m := &stopMark{seq: en.Seq, by: c.Publisher, at: en.Time}
		switch {
		case c.Command == events.CommandPause && c.All:
			pausedAll = m
		case c.Command == events.CommandPause:
			paused = m
		case c.Command == events.CommandResume && c.All:
			paused, pausedAll = nil, nil // resume --all resumes every guest
		case c.Command == events.CommandResume:
			paused = nil
		case c.Command == events.CommandRelease:
			released = m
		}
	}
	switch {
	case released != nil:
		return "released " + released.String() + ": converge leaves the guest alone", nil
	case paused != nil:
		return "paused " + paused.String() + ": not acted on until resumed", nil
	case pausedAll != nil:
		return "every guest paused " + pausedAll.String() + ": not acted on until resumed", nil
	}
	return "", nil
}

// stopMark is an operator's request as the journal holds it.
type stopMark struct {
	seq uint64
	by  string
	at  time.Time
}

func (m *stopMark) String() string {
	by := m.by
	if by == "" {
		by = "unknown"
	}
	return fmt.Sprintf("by %s at %s (journal #%d)", by, m.at.Format(time.RFC3339), m.seq)
}

// approvalOf is the newest `converge approve` naming the action's guest
// (not --all: the destroy gate opens only for a guest named) journalled
// after its desired revision and before its plan: what opened the gate
// for the planner. nil when there is none.
func (e *Executor) approvalOf(ctx context.Context, a events.Action) (*projector.Mark, error) {
	var out *projector.Mark
	for next := a.DesiredSeq + 1; a.FoldSeq == 0 || next <= a.FoldSeq; {
		en, err := e.j.Next(ctx, events.KindControl, e.cfg.Cluster, 0, next)
		if err != nil {
			return nil, err
		}
		if en == nil || (a.FoldSeq > 0 && en.Seq > a.FoldSeq) {
			break
		}
		next = en.Seq + 1
		c, err := events.Decode[events.Control](en.Data)
		if err == nil && c.Validate() == nil && c.Command == events.CommandApprove && slices.Contains(c.VMIDs, a.VMID) {
			out = &projector.Mark{Seq: en.Seq, By: c.Publisher, At: en.Time}
		}
	}
	return out, nil
}

// goneAfter is the newest reading of the action's guest journalled after
// seq and no later than the plan's basis that found it gone (an
// observation, or an action's read-back), 0 when none did.
func (e *Executor) goneAfter(ctx context.Context, a events.Action, seq uint64) (uint64, error) {
	var gone uint64
	for _, k := range []events.Kind{events.KindObserved, events.KindResult} {
		for next := seq + 1; next <= a.BasisSeq; {
			en, err := e.j.Next(ctx, k, e.cfg.Cluster, a.VMID, next)
			if err != nil {
				return 0, err
			}
			if en == nil || en.Seq > a.BasisSeq {
				break
			}
			next = en.Seq + 1
			var o *events.Observed
			if k == events.KindObserved {
				if ob, err := events.Decode[events.Observed](en.Data); err == nil {
					o = &ob
				}
			} else if r, err := events.Decode[events.Result](en.Data); err == nil {
				o = r.Observed
			}
			if o != nil && !o.Exists && en.Seq > gone {
				gone = en.Seq
			}
		}
	}
	return gone, nil
}

package executor

import (
	"context"
	"fmt"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/projector"
)

// The executor's record of an action, and the fences' reads: all direct
// reads of the journal (journal.Reader), never a consumer.

// guestLasts are a guest's newest journal entries of each kind an action's
// checks read, and the cluster's newest operator's request; nil where there
// is none.
type guestLasts struct {
	action, result, desired, observed, control *journal.Entry
}

func seqOf(m *journal.Entry) uint64 {
	if m == nil {
		return 0
	}
	return m.Seq
}

// readLasts reads a guest's newest action, result, desired and observed
// entries, and the cluster's newest operator's request, in one request: on
// the usual path (a fresh, current action, no request since its plan) the
// mutation waits for one round trip to the journal.
func (e *Executor) readLasts(ctx context.Context, vmid int) (guestLasts, error) {
	ms, err := e.j.Lasts(ctx, e.cfg.Cluster, vmid, events.KindAction, events.KindResult, events.KindDesired, events.KindObserved, events.KindControl)
	if err != nil {
		return guestLasts{}, err
	}
	return guestLasts{ms[0], ms[1], ms[2], ms[3], ms[4]}, nil
}

// nextMsg returns a guest's first event of a kind at or after seq, nil if
// there is none. The server finds it by scanning the stream from seq, so it
// is kept off the common path: callers read the newest event first (an
// index lookup) and walk only when that cannot answer.
func (e *Executor) nextMsg(ctx context.Context, kind events.Kind, vmid int, seq uint64) (*journal.Entry, error) {
	return e.j.Next(ctx, kind, e.cfg.Cluster, vmid, seq)
}

// record is what the journal says about one action.
type record struct {
	// newerAction is the sequence of a later action of the guest, 0 if
	// the action is the guest's newest.
	newerAction uint64
	// final is the action's final result, if one was journalled.
	final *events.Result
	// started is the action's newest "started" result carrying a task id.
	started *events.Result
	// lastResult is the sequence of the guest's newest result, 0 if none.
	lastResult uint64
}

// readRecord reads the journal for the action stored at seq, given the
// sequences of the guest's newest action and newest result (0 for none).
// Its results follow it in the stream; when a newer action of the guest exists, only
// results before that action are the old one's (the planner plans the next
// action of a guest only after the previous one's final result).
func (e *Executor) readRecord(ctx context.Context, vmid int, actionID string, seq, last, lastResult uint64) (record, error) {
	var rec record
	rec.lastResult = lastResult
	if last > seq {
		rec.newerAction = last
	}
	if lastResult <= seq {
		// No result since the action was stored: a first delivery.
		return rec, nil
	}
	m, err := e.nextMsg(ctx, events.KindResult, vmid, seq+1)
	for {
		if err != nil {
			return rec, err
		}
		if m == nil || (rec.newerAction != 0 && m.Seq > rec.newerAction) {
			return rec, nil
		}
		next := m.Seq + 1
		r, derr := events.Decode[events.Result](m.Data)
		if derr == nil && r.ActionID == actionID {
			switch {
			case r.Status.Final():
				rec.final = &r
				return rec, nil
			case r.UPID != "":
				rec.started = &r
			}
		}
		if m.Seq >= rec.lastResult {
			return rec, nil
		}
		m, err = e.nextMsg(ctx, events.KindResult, vmid, next)
	}
}

// supersedingDesired returns the sequence of an accepted desired event of
// the guest after seq (the newest, when it is accepted), 0 if there is none. A desired event the
// projector rejects (invalid body, unknown schema) changes nothing, so it
// supersedes nothing: otherwise an invalid publish would fence every action
// planned from the last valid revision, forever.
// last is the guest's newest desired event (nil for none).
func (e *Executor) supersedingDesired(ctx context.Context, vmid int, seq uint64, last *journal.Entry) (uint64, error) {
	if last == nil || last.Seq <= seq {
		return 0, nil
	}
	// The newest revision is what usually supersedes: one indexed read.
	if acceptedDesired(last, vmid) {
		return last.Seq, nil
	}
	for next := seq + 1; next < last.Seq; {
		m, err := e.nextMsg(ctx, events.KindDesired, vmid, next)
		if err != nil || m == nil {
			return 0, err
		}
		next = m.Seq + 1
		if m.Seq < last.Seq && acceptedDesired(m, vmid) {
			return m.Seq, nil
		}
	}
	return 0, nil
}

// acceptedDesired mirrors the projector's acceptance of a desired event.
func acceptedDesired(m *journal.Entry, vmid int) bool {
	if v := m.Header.Get(events.HeaderSchema); v != "" && v != "1" {
		return false
	}
	_, err := events.DecodeDesired(m.Data, vmid)
	return err == nil
}

// supersedingObservation returns the sequence of an observation of the
// guest after basis (the newest, when it qualifies) that the projector
// would adopt over the basis, 0 if there is none. The rule is the
// projector's (projector.Supersedes): a stamped observation supersedes only
// if its reader knew the basis before reading (AfterSeq >= basis), so an
// observer read that may predate the basis neither fences nor, whatever
// the readers' clocks, makes the planner re-plan from the same basis
// forever; an unstamped one is compared by read_at; one stamped far ahead of
// the journal's time is refused by the projector and fences nothing.
// last is the guest's newest observation (nil for none).
func (e *Executor) supersedingObservation(ctx context.Context, vmid int, basis uint64, last *journal.Entry) (uint64, error) {
	if last == nil || last.Seq <= basis {
		return 0, nil
	}
	var basisObs *events.Observed
	basisRead := false
	var readErr error
	adopted := func(m *journal.Entry) bool {
		o, err := events.Decode[events.Observed](m.Data)
		if err != nil || (!m.Time.IsZero() && o.ReadAt.After(m.Time.Add(projector.MaxReadAhead))) {
			return false
		}
		if o.AfterSeq == 0 && !basisRead {
			basisRead = true
			basisObs, readErr = e.observationAt(ctx, basis)
		}
		return readErr == nil && projector.Supersedes(&o, basisObs, basis)
	}
	// The newest observation is what usually supersedes: one indexed read.
	if adopted(last) {
		return last.Seq, readErr
	}
	if readErr != nil {
		return 0, readErr
	}
	for next := basis + 1; next < last.Seq; {
		m, err := e.nextMsg(ctx, events.KindObserved, vmid, next)
		if err != nil || m == nil {
			return 0, err
		}
		next = m.Seq + 1
		if m.Seq < last.Seq && adopted(m) {
			return m.Seq, readErr
		}
		if readErr != nil {
			return 0, readErr
		}
	}
	return 0, nil
}

// observationAt returns the observation stored at seq (an observed event or
// a result embedding one); nil if there is none.
func (e *Executor) observationAt(ctx context.Context, seq uint64) (*events.Observed, error) {
	if seq == 0 {
		return nil, nil
	}
	m, err := e.j.Get(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("basis %d: %w", seq, err)
	}
	if m == nil {
		return nil, nil
	}
	info, err := events.ParseSubject(m.Subject)
	if err != nil {
		return nil, nil
	}
	switch info.Kind {
	case events.KindObserved:
		if o, err := events.Decode[events.Observed](m.Data); err == nil {
			return &o, nil
		}
	case events.KindResult:
		if r, err := events.Decode[events.Result](m.Data); err == nil && r.Observed != nil {
			return r.Observed, nil
		}
	}
	return nil, nil
}

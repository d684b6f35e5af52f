package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/pve"
)

// Journal reads. All of them are direct gets on the journal stream: the
// newest message of a guest subject, or the first one at or after a
// sequence.

// lastMsg returns a guest's newest event of a kind, nil if there is none.
func (e *Executor) lastMsg(ctx context.Context, kind events.Kind, vmid int) (*jetstream.RawStreamMsg, error) {
	m, err := e.stream.GetLastMsgForSubject(ctx, e.bus.StoredSubject(kind, e.cfg.Cluster, vmid))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last %s of %d: %w", kind, vmid, err)
	}
	return m, nil
}

// lastSeq returns the sequence of a guest's newest event of a kind, 0 if
// there is none.
func (e *Executor) lastSeq(ctx context.Context, kind events.Kind, vmid int) (uint64, error) {
	m, err := e.lastMsg(ctx, kind, vmid)
	if m == nil {
		return 0, err
	}
	return m.Sequence, nil
}

// nextMsg returns a guest's first event of a kind at or after seq, nil if
// there is none. The server finds it by scanning the stream from seq, so it
// is kept off the common path: callers read the newest event first (an
// index lookup) and walk only when that cannot answer.
func (e *Executor) nextMsg(ctx context.Context, kind events.Kind, vmid int, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := e.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(e.bus.StoredSubject(kind, e.cfg.Cluster, vmid)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s of %d at or after %d: %w", kind, vmid, seq, err)
	}
	return m, nil
}

// guestLasts are a guest's newest journal entries of each kind an action's
// checks read; nil where there is none.
type guestLasts struct {
	action, result, desired, observed *jetstream.RawStreamMsg
}

func seqOf(m *jetstream.RawStreamMsg) uint64 {
	if m == nil {
		return 0
	}
	return m.Sequence
}

// readLasts reads a guest's newest action, result, desired and observed
// entries in one batched request (one round trip, one consistent view of
// the stream); from a server that cannot batch, with four concurrent reads.
func (e *Executor) readLasts(ctx context.Context, vmid int) (guestLasts, error) {
	kinds := [4]events.Kind{events.KindAction, events.KindResult, events.KindDesired, events.KindObserved}
	var subjects [4]string
	for i, k := range kinds {
		subjects[i] = e.bus.StoredSubject(k, e.cfg.Cluster, vmid)
	}
	if !e.noBatchGet.Load() {
		ms, err := e.bus.LastMsgs(ctx, subjects[:])
		switch {
		case err == nil:
			return guestLasts{ms[subjects[0]], ms[subjects[1]], ms[subjects[2]], ms[subjects[3]]}, nil
		case !errors.Is(err, bus.ErrBatchGetUnsupported):
			return guestLasts{}, fmt.Errorf("journal of %d: %w", vmid, err)
		}
		e.noBatchGet.Store(true)
		e.log.Info().Msg("the NATS server does not batch direct gets (nats-server < 2.11?); reading the journal one subject at a time")
	}
	var ms [4]*jetstream.RawStreamMsg
	var errs [4]error
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Add(1)
		go func() { defer wg.Done(); ms[i], errs[i] = e.lastMsg(ctx, k, vmid) }()
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return guestLasts{}, err
	}
	return guestLasts{ms[0], ms[1], ms[2], ms[3]}, nil
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
		if m == nil || (rec.newerAction != 0 && m.Sequence > rec.newerAction) {
			return rec, nil
		}
		next := m.Sequence + 1
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
		if m.Sequence >= rec.lastResult {
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
func (e *Executor) supersedingDesired(ctx context.Context, vmid int, seq uint64, last *jetstream.RawStreamMsg) (uint64, error) {
	if last == nil || last.Sequence <= seq {
		return 0, nil
	}
	// The newest revision is what usually supersedes: one indexed read.
	if acceptedDesired(last, vmid) {
		return last.Sequence, nil
	}
	for next := seq + 1; next < last.Sequence; {
		m, err := e.nextMsg(ctx, events.KindDesired, vmid, next)
		if err != nil || m == nil {
			return 0, err
		}
		next = m.Sequence + 1
		if m.Sequence < last.Sequence && acceptedDesired(m, vmid) {
			return m.Sequence, nil
		}
	}
	return 0, nil
}

// acceptedDesired mirrors the projector's acceptance of a desired event.
func acceptedDesired(m *jetstream.RawStreamMsg, vmid int) bool {
	if v := m.Header.Get(events.HeaderSchema); v != "" && v != "1" {
		return false
	}
	_, err := events.DecodeDesired(m.Data, vmid)
	return err == nil
}

// supersedingObservation returns the sequence of an observation of the
// guest after basis (the newest, when it qualifies) that the projector would adopt over the basis (read
// at or after it), 0 if there is none. An observation read before the basis
// but published after it is ignored by the projector, so it must not fence
// either: the planner would re-plan from the same basis forever.
// last is the guest's newest observation (nil for none).
func (e *Executor) supersedingObservation(ctx context.Context, vmid int, basis uint64, last *jetstream.RawStreamMsg) (uint64, error) {
	if last == nil || last.Sequence <= basis {
		return 0, nil
	}
	basisAt, err := e.readAt(ctx, basis)
	if err != nil {
		return 0, err
	}
	adopted := func(m *jetstream.RawStreamMsg) bool {
		o, err := events.Decode[events.Observed](m.Data)
		return err == nil && !o.ReadAt.Before(basisAt)
	}
	// The newest observation is what usually supersedes: one indexed read.
	if adopted(last) {
		return last.Sequence, nil
	}
	for next := basis + 1; next < last.Sequence; {
		m, err := e.nextMsg(ctx, events.KindObserved, vmid, next)
		if err != nil || m == nil {
			return 0, err
		}
		next = m.Sequence + 1
		if m.Sequence < last.Sequence && adopted(m) {
			return m.Sequence, nil
		}
	}
	return 0, nil
}

// readAt returns when the observation stored at seq (an observed event or a
// result embedding one) was read; zero if there is none.
func (e *Executor) readAt(ctx context.Context, seq uint64) (time.Time, error) {
	if seq == 0 {
		return time.Time{}, nil
	}
	m, err := e.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("basis %d: %w", seq, err)
	}
	info, err := events.ParseSubject(m.Subject)
	if err != nil {
		return time.Time{}, nil
	}
	switch info.Kind {
	case events.KindObserved:
		if o, err := events.Decode[events.Observed](m.Data); err == nil {
			return o.ReadAt, nil
		}
	case events.KindResult:
		if r, err := events.Decode[events.Result](m.Data); err == nil && r.Observed != nil {
			return r.Observed.ReadAt, nil
		}
	}
	return time.Time{}, nil
}

// Publishing.

const (
	publishAttempts = 5
	publishBackoff  = 50 * time.Millisecond
)

// msgID is a result's Nats-Msg-Id: a redone action does not journal the
// same step twice within the stream's dedupe window.
func msgID(actionID string, status events.ResultStatus) string {
	if status.Final() {
		return "res-" + actionID + "-final"
	}
	return "res-" + actionID + "-" + string(status)
}

// publishResult journals a result and waits for the stream's
// acknowledgement, retrying a few times (same msg-id, so a retry of a
// publish that was stored but not acknowledged is deduplicated).
func (e *Executor) publishResult(ctx context.Context, r *events.Result, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	body, err := events.Encode(r)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	hdr := nats.Header{}
	hdr.Set(events.HeaderSchema, "1")
	hdr.Set(events.HeaderPublisher, e.cfg.Name)
	if r.CorrelationID != "" {
		hdr.Set(events.HeaderCorrelationID, r.CorrelationID)
	}
	hdr.Set(jetstream.MsgIDHeader, msgID(r.ActionID, r.Status))
	subject := events.Subject(events.KindResult, e.cfg.Cluster, r.VMID)
	delay := publishBackoff
	for attempt := 1; ; attempt++ {
		ack, err := e.bus.Publish(ctx, subject, body, hdr, opts...)
		if err == nil {
			return ack, nil
		}
		if bus.IsWrongLastSequence(err) {
			return nil, fmt.Errorf("publish %s result: %w: %w", r.Status, errFenced, err)
		}
		if ctx.Err() != nil || attempt == publishAttempts {
			return nil, fmt.Errorf("publish %s result: %w", r.Status, err)
		}
		e.log.Warn().Err(err).Str("action_id", r.ActionID).Int("attempt", attempt).Msg("result publish failed; retrying")
		if pve.Sleep(ctx, delay) != nil {
			return nil, fmt.Errorf("publish %s result: %w", r.Status, err)
		}
		delay *= 2
	}
}

// errFenced is a result refused because another result of the guest was
// journalled since this job last read the journal: another executor (the
// partition's new owner) is acting on the guest.
var errFenced = errors.New("fenced by a newer result of the guest")

// publish journals one of the job's results right after the guest's newest
// result it knows of, and advances that mark.
func (j *job) publish(ctx context.Context, r *events.Result) error {
	ack, err := j.e.publishResult(ctx, r, jetstream.WithExpectLastSequencePerSubject(j.resultSeq))
	if err != nil {
		return err
	}
	j.resultSeq = ack.Sequence
	return nil
}

// holds reports whether this executor still owns partition p.
func (e *Executor) holds(p int) bool { return e.leases == nil || e.leases.Held(p) }

// sleep is pve.Sleep under the name handle.go still calls it by.
func sleep(ctx context.Context, d time.Duration) error { return pve.Sleep(ctx, d) }

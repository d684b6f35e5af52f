package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
)

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

// publishResult journals a result right after the guest's result at
// resultSeq (0: none) and waits for the journal's acknowledgement,
// retrying a few times (same msg-id, so a retry of a publish that was
// stored but not acknowledged is deduplicated).
func (e *Executor) publishResult(ctx context.Context, r *events.Result, resultSeq uint64) (journal.Ack, error) {
	body, err := events.Encode(r)
	if err != nil {
		return journal.Ack{}, fmt.Errorf("encode result: %w", err)
	}
	m := events.Message{Subject: events.Subject(events.KindResult, e.cfg.Cluster, r.VMID), Data: body, Header: events.Header{}}
	m.Header.Set(events.HeaderSchema, "1")
	m.Header.Set(events.HeaderPublisher, e.cfg.Name)
	if r.CorrelationID != "" {
		m.Header.Set(events.HeaderCorrelationID, r.CorrelationID)
	}
	x := journal.FencedAt(resultSeq)
	x.MsgID = msgID(r.ActionID, r.Status)
	delay := publishBackoff
	for attempt := 1; ; attempt++ {
		ack, err := e.j.Append(ctx, m, x)
		if err == nil {
			return ack, nil
		}
		if errors.Is(err, journal.ErrFenced) {
			return journal.Ack{}, fmt.Errorf("publish %s result: %w: %w", r.Status, errFenced, err)
		}
		if ctx.Err() != nil || attempt == publishAttempts {
			return journal.Ack{}, fmt.Errorf("publish %s result: %w", r.Status, err)
		}
		e.log.Warn().Err(err).Str("action_id", r.ActionID).Int("attempt", attempt).Msg("result publish failed; retrying")
		if clock.Sleep(ctx, e.clk, delay) != nil {
			return journal.Ack{}, fmt.Errorf("publish %s result: %w", r.Status, err)
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
	ack, err := j.e.publishResult(ctx, r, j.resultSeq)
	if err != nil {
		return err
	}
	j.resultSeq = ack.Seq
	return nil
}

// holds reports whether this executor still owns partition p.
func (e *Executor) holds(p int) bool { return e.owner == nil || e.owner.Held(p) }

package planloop

import (
	"context"
	"errors"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/planner"
)

// publish sends one action fenced by the guest's action subject and with
// its deterministic id as Nats-Msg-Id (planner.Publish), without waiting:
// the outcome is settled on a later tick.
func (l *Loop) publish(p *planner.Publish) {
	a := &p.Action // not a copy: Encode would box one more on the heap
	body, err := events.Encode(a)
	if err != nil {
		l.log.Error().Err(err).Int("vmid", a.VMID).Msg("encode action")
		l.eng.PublishFailed(a.VMID, a.ID, false, l.clk.Now())
		return
	}
	m := events.Message{Subject: events.Subject(events.KindAction, a.Cluster, a.VMID), Data: body, Header: events.Header{}}
	m.Header.Set(events.HeaderCorrelationID, a.CorrelationID)
	fence := p.ExpectLastSeq
	if fence < l.first {
		// The action the plan saw is no longer in the journal (retention,
		// docs/retention.md): its subject must hold nothing newer, that
		// is, nothing at all.
		fence = 0
	}
	x := journal.FencedAt(fence)
	x.MsgID = a.ID
	f, err := l.j.AppendAsync(m, x)
	if err != nil {
		l.log.Warn().Err(err).Int("vmid", a.VMID).Str("action", a.ID).Msg("publish action failed; will retry")
		l.eng.PublishFailed(a.VMID, a.ID, false, l.clk.Now())
		return
	}
	l.pubs = append(l.pubs, pendingPub{vmid: a.VMID, id: a.ID, f: f})
	l.metrics.planned.WithLabelValues(string(a.Op)).Inc()
	l.log.Info().Int("vmid", a.VMID).Str("op", string(a.Op)).Str("action", a.ID).Str("reason", a.Reason).
		Str("correlation_id", a.CorrelationID).Msg("action planned")
}

// settle reports finished publishes to the engine. A refused action (the
// fence moved: another planner, or this one before a restart, acted first)
// or a failed one frees its guest to be planned again from the fold; a
// duplicate of an action already folded frees it too.
func (l *Loop) settle() {
	keep := l.pubs[:0]
	for _, p := range l.pubs {
		ack, err, done := p.f.Poll()
		switch {
		case !done:
			keep = append(keep, p)
		case err == nil:
			l.eng.Published(p.vmid, p.id, ack.Duplicate)
		default:
			if errors.Is(err, journal.ErrFenced) {
				l.log.Info().Int("vmid", p.vmid).Str("action", p.id).Msg("action fence moved; not planned twice")
				l.refreshFirst() // or retention dropped the action it saw
			} else {
				l.log.Warn().Err(err).Int("vmid", p.vmid).Str("action", p.id).Msg("publish action failed; will replan")
			}
			l.eng.PublishFailed(p.vmid, p.id, true, l.clk.Now())
		}
	}
	clear(l.pubs[len(keep):]) // settled futures hold their messages: let them go
	l.pubs = keep
}

// refreshFirst reads where the journal starts now, for fences of actions
// retention has dropped since.
func (l *Loop) refreshFirst() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if info, err := l.j.Info(ctx); err == nil {
		l.first = info.FirstSeq
	}
}

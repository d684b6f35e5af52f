package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/projector"
)

// Entry is one step of a guest's history. Every entry stands alone (guest,
// cluster, sequence, time, kind), so that entries can be shipped one per
// line to a log store.
type Entry struct {
	VMID    int         `json:"vmid"`
	Cluster string      `json:"cluster"`
	Seq     uint64      `json:"seq"`
	Time    time.Time   `json:"time"`
	Kind    events.Kind `json:"kind"`
	// Who published the event: a desired event's publisher (header), the
	// observer, planner or executor (Meta.Publisher).
	Who           string `json:"who"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// TaskID is the Proxmox task (UPID) of a result, when there is one.
	TaskID string `json:"task_id,omitempty"`
	// Summary says in one line what happened.
	Summary string `json:"summary"`

	// Desired is an accepted desired state; Rejected the reason a desired
	// event was refused, with its Body as published (cut at 4 KiB).
	Desired  *events.Desired `json:"desired,omitempty"`
	Rejected string          `json:"rejected,omitempty"`
	Body     string          `json:"body,omitempty"`
	// Observed is an observation that mattered; Changes what differs from
	// the previous one (none for the first).
	Observed *events.Observed `json:"observed,omitempty"`
	Changes  []string         `json:"changes,omitempty"`
	Action   *events.Action   `json:"action,omitempty"`
	// Result leaves out the observation the executor read back.
	Result *events.Result `json:"result,omitempty"`
	// Addresses are the guest agent's addresses as the observer read them
	// (informational, addresses.go).
	Addresses *events.Addresses `json:"addresses,omitempty"`
	// Error says why an event could not be decoded (it is still listed:
	// it is in the journal).
	Error string `json:"error,omitempty"`
}

const maxBody = 4096

// Timeline returns the history of one guest, from since (the journal's
// start when zero) to the guest's last event as the call began. partitions
// is the journal's partition count; 0 reads it from the stream.
func Timeline(ctx context.Context, js jetstream.JetStream, stream, cluster string, vmid, partitions int, since time.Time, auth ...*projector.Auth) ([]Entry, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("journal: stream %s: %w", stream, err)
	}
	if partitions <= 0 {
		if partitions, err = Partitions(s.CachedInfo().Config); err != nil {
			return nil, err
		}
	}
	kinds := []events.Kind{events.KindDesired, events.KindObserved, events.KindAction, events.KindResult, events.KindControl,
		events.KindAddresses}
	subjects := make([]string, len(kinds))
	// Where to stop: the newest of the guest's events now (literal
	// subjects: each a lookup, not a search).
	var last *jetstream.RawStreamMsg
	for i, k := range kinds {
		subjects[i] = events.StoredSubject(k, cluster, vmid, partitions)
		if k == events.KindControl {
			// Operators' requests (pause, approve, release …) are the
			// cluster's; those naming the guest are kept below.
			subjects[i] = events.StoredSubject(k, cluster, 0, partitions)
		}
		m, err := s.GetLastMsgForSubject(ctx, subjects[i])
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("journal: last event on %s: %w", subjects[i], err)
		}
		if last == nil || m.Sequence > last.Sequence {
			last = m
		}
	}
	if last == nil || (!since.IsZero() && last.Time.Before(since)) {
		return nil, nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	oc, release, err := bus.ReadOnce(ctx, s, cfg)
	if err != nil {
		return nil, fmt.Errorf("journal: consumer: %w", err)
	}
	defer release() // after it.Stop below (defers run last first)
	it, err := oc.Messages(jetstream.PullMaxMessages(500), jetstream.PullHeartbeat(bus.ConsumeHeartbeat))
	if err != nil {
		return nil, fmt.Errorf("journal: consume: %w", err)
	}
	defer it.Stop()
	tl := newTimeline(cluster, vmid)
	tl.proj.Auth = firstAuth(auth) // desired events judged as the planner judges them
	if !since.IsZero() {
		// The window's first observation is the guest's first only if the
		// journal holds none stored before the window.
		m, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subjects[1]))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return nil, fmt.Errorf("journal: first observation of %d: %w", vmid, err)
		case m.Time.Before(since):
			tl.seenBefore = since
		}
	}
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("journal: read history of %d: %w", vmid, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("journal: message without metadata: %w", err)
		}
		if md.Sequence.Stream > last.Sequence {
			break
		}
		tl.add(projector.Event{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: events.Header(m.Headers()), Data: m.Data(), Time: md.Timestamp})
		if md.Sequence.Stream == last.Sequence || md.NumPending == 0 {
			break
		}
	}
	return tl.entries, nil
}

// timeline builds entries from one guest's events in stream order.
type timeline struct {
	cluster string
	vmid    int
	// proj decides desired events exactly as the planner's fold does.
	proj    *projector.Projector
	prevObs *obsState
	// seenBefore is the start of a window (--since) the guest was
	// observed before: its first observation in it is not "first seen".
	seenBefore time.Time
	entries    []Entry
}

func newTimeline(cluster string, vmid int) *timeline {
	return &timeline{cluster: cluster, vmid: vmid, proj: projector.New(cluster)}
}

func (t *timeline) add(ev projector.Event) {
	info, err := events.ParseSubject(ev.Subject)
	if err != nil || info.Cluster != t.cluster || (info.VMID != t.vmid && info.Kind != events.KindControl) {
		return
	}
	e := Entry{VMID: t.vmid, Cluster: t.cluster, Seq: ev.Seq, Time: ev.Time, Kind: info.Kind}
	switch info.Kind {
	case events.KindControl:
		c, err := events.Decode[events.Control](ev.Data)
		if err != nil || c.Command == events.CommandResync || (!c.All && !slices.Contains(c.VMIDs, t.vmid)) {
			return
		}
		t.proj.Apply(ev) // a release forgets the desired state, for what follows
		e.Who, e.Summary = c.Publisher, describeControl(&c)
	case events.KindDesired:
		t.desired(&e, ev)
	case events.KindObserved:
		o, err := events.Decode[events.Observed](ev.Data)
		if err != nil {
			e.Error, e.Summary = err.Error(), "undecodable observation"
			break
		}
		st := normalise(&o)
		if t.prevObs != nil {
			e.Changes = t.prevObs.diff(st)
			if len(e.Changes) == 0 {
				return // an identical poll: nothing happened
			}
		}
		t.prevObs = st
		e.Who, e.CorrelationID, e.Observed = o.Publisher, o.CorrelationID, &o
		switch {
		case e.Changes == nil && !t.seenBefore.IsZero():
			e.Summary = "first since " + t.seenBefore.UTC().Format(time.RFC3339) + " (seen before): " + st.describe()
		case e.Changes == nil:
			e.Summary = "first seen: " + st.describe()
		default:
			e.Summary = strings.Join(e.Changes, "; ")
		}
	case events.KindAction:
		a, err := events.Decode[events.Action](ev.Data)
		if err != nil {
			e.Error, e.Summary = err.Error(), "undecodable action"
			break
		}
		e.Who, e.CorrelationID, e.Action = a.Publisher, a.CorrelationID, &a
		if e.CorrelationID == "" {
			e.CorrelationID = ev.Header.Get(events.HeaderCorrelationID)
		}
		e.Summary = describeAction(&a)
	case events.KindResult:
		r, err := events.Decode[events.Result](ev.Data)
		if err != nil {
			e.Error, e.Summary = err.Error(), "undecodable result"
			break
		}
		r.Observed = nil
		e.Who, e.CorrelationID, e.TaskID, e.Result = r.Executor, r.CorrelationID, r.UPID, &r
		if e.Who == "" {
			e.Who = r.Publisher
		}
		e.Summary = describeResult(&r)
	case events.KindAddresses:
		t.addresses(&e, ev) // addresses.go
	default:
		return
	}
	t.entries = append(t.entries, e)
}

func (t *timeline) desired(e *Entry, ev projector.Event) {
	ch := t.proj.Apply(ev)
	v := ch.View
	switch {
	case v == nil:
		e.Error, e.Summary = fmt.Sprint(ch.Err), "desired event not folded"
	case v.Rejected != nil && v.Rejected.Seq == ev.Seq:
		e.Who, e.Rejected = v.Rejected.Publisher, v.Rejected.Reason
		e.CorrelationID = ev.Header.Get(events.HeaderCorrelationID)
		e.Body = string(ev.Data[:min(len(ev.Data), maxBody)])
		e.Summary = "REJECTED: " + v.Rejected.Reason
	default:
		e.Who, e.CorrelationID, e.Desired = v.Publisher, v.CorrelationID, v.Desired
		e.Summary = DescribeDesired(v.Desired)
		if to := ev.Header.Get(events.HeaderRollbackTo); to != "" {
			from := ev.Header.Get(events.HeaderRollbackFrom)
			if from == "" {
				from = "none"
			}
			e.Summary = fmt.Sprintf("rollback to revision %s (from %s): %s", to, from, e.Summary)
		}
	}
}

package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

var _ journal.Kept = (*Bus)(nil)

// KeepPerSubject is how many of each stored subject's newest entries the
// keep stream holds: subjects are per guest and kind, so it holds every
// guest's newest desired events, actions and results whatever the
// journal's retention drops (docs/retention.md).
const KeepPerSubject = 8

// keptKinds are the kinds the keep stream sources: what a fold cannot
// recover otherwise. Observed snapshots are not among them: the observer
// publishes again whatever the journal no longer holds.
var keptKinds = []events.Kind{events.KindDesired, events.KindAction, events.KindResult}

// KeepStream is the keep stream's name for this Config.
func (b *Bus) KeepStream() string { return b.cfg.Stream + "_KEEP" }

// KeepStreamConfig is the keep stream's configuration: JetStream itself
// fills it by sourcing the journal, so it holds while no converge process
// runs. No age or size limit: its size is bounded by guests × kinds ×
// KeepPerSubject.
func (b *Bus) KeepStreamConfig() jetstream.StreamConfig {
	var trs []jetstream.SubjectTransformConfig
	for _, k := range keptKinds {
		f := events.Prefix + "." + string(k) + ".*.*.*"
		trs = append(trs, jetstream.SubjectTransformConfig{Source: f}) // a filter: no destination
	}
	return jetstream.StreamConfig{
		Name:              b.KeepStream(),
		Description:       "converge: every guest's newest desired events, actions and results, whatever the journal's retention",
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          b.cfg.Replicas,
		MaxMsgsPerSubject: KeepPerSubject,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
		Sources:           []*jetstream.StreamSource{{Name: b.cfg.Stream, SubjectTransforms: trs}},
	}
}

// limited reports a journal configuration under which JetStream drops
// desired events, actions or results: one that needs the keep stream.
// Per-message TTLs do not count: converge gives them to observed
// snapshots and heartbeats only.
func limited(c jetstream.StreamConfig) bool {
	return c.MaxAge > 0 || c.MaxBytes > 0 || c.MaxMsgs > 0 || c.MaxMsgsPerSubject > 0
}

// provisionKeep creates the keep stream when create is set, and updates an
// existing one that differs either way: a journal without limits drops
// nothing, so it needs no copy (each stored event would cost a second
// write), but a keep stream once made holds what the journal may since
// have dropped, so it is never removed.
func (b *Bus) provisionKeep(ctx context.Context, create bool) error {
	want := b.KeepStreamConfig()
	s, err := b.JS.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if !create {
			return nil
		}
		if _, err := b.JS.CreateStream(ctx, want); err != nil {
			return fmt.Errorf("bus: create stream %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("bus: stream %s: %w", want.Name, err)
	}
	if sameKeep(s.CachedInfo().Config, want) { // an update is a Raft proposal on a cluster
		return nil
	}
	if _, err := b.JS.UpdateStream(ctx, want); err != nil {
		return fmt.Errorf("bus: update stream %s: %w", want.Name, err)
	}
	return nil
}

// HasKeepStream reports whether the keep stream exists.
func (b *Bus) HasKeepStream(ctx context.Context) (bool, error) {
	_, err := b.JS.Stream(ctx, b.KeepStream())
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("bus: stream %s: %w", b.KeepStream(), err)
	}
	return true, nil
}

// KeepBehindError is provisioning waiting to apply the journal's new
// retention limits until the keep stream has copied the journal's newest
// desired event, action and result as of when the wait began: applied at
// once, the limits would drop the oldest entries before the keep stream
// (which sources the journal from its start) had read them.
type KeepBehindError struct {
	// Kept is the journal sequence of the keep stream's newest copy,
	// Target the one it must reach.
	Kept, Target uint64
	// Source describes the keep stream's sourcing as the server reports
	// it (lag, last activity, error).
	Source string
}

func (e *KeepBehindError) Error() string {
	return fmt.Sprintf("bus: the keep stream has copied the journal up to #%d of #%d; the journal's retention limits wait until it has", e.Kept, e.Target)
}

// keepCaughtUp returns a *KeepBehindError until the keep stream holds a
// copy of the journal's newest desired event, action or result as of the
// first call (p.target; its Nats-Stream-Source names the journal
// sequence). Sourcing keeps the journal's order, so that copy means every
// earlier one is there too.
func (b *Bus) keepCaughtUp(ctx context.Context, journal jetstream.Stream, p *provisioning) error {
	if p.target == 0 {
		for _, k := range keptKinds {
			seq, err := b.lastSeqMatching(ctx, events.Prefix+"."+string(k)+".>")
			if err != nil {
				return err
			}
			p.target = max(p.target, seq)
		}
		if p.target == 0 {
			return nil // nothing to copy
		}
	}
	ks, err := b.JS.Stream(ctx, b.KeepStream())
	if err != nil {
		return fmt.Errorf("bus: stream %s: %w", b.KeepStream(), err)
	}
	info := ks.CachedInfo()
	var kept uint64
	if last := info.State.LastSeq; last > 0 {
		// A direct get may be answered by a replica that has not stored
		// it yet: not found is "not yet", never "caught up".
		m, err := ks.GetMsg(ctx, last)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return fmt.Errorf("bus: stream %s: %w", b.KeepStream(), err)
		default:
			// A copy from an earlier journal of the same name says nothing.
			if seq, ok := SourceSeq(m.Header.Get(streamSourceHeader)); ok && !m.Time.Before(journal.CachedInfo().Created) {
				kept = seq
			}
		}
	}
	if kept >= p.target {
		return nil
	}
	src := "not reported"
	if len(info.Sources) > 0 {
		si := info.Sources[0]
		src = fmt.Sprintf("lag %d, last active %s ago", si.Lag, si.Active.Round(time.Millisecond))
		if si.Active < 0 {
			src = fmt.Sprintf("lag %d, never heard from the journal", si.Lag)
		}
		if si.Error != nil {
			src += ", error: " + si.Error.Error()
		}
	}
	return &KeepBehindError{Kept: kept, Target: p.target, Source: src}
}

// lastSeqMatching is the sequence of the journal's newest entry whose
// stored subject matches filter, 0 if none does. It asks the stream's
// leader with a JSON request: a direct get carries the subject in its own
// subject, where a wildcard has no place.
func (b *Bus) lastSeqMatching(ctx context.Context, filter string) (uint64, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{filter})
	msg, err := b.NC.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+b.cfg.Stream, req)
	if err != nil {
		return 0, fmt.Errorf("bus: newest %s in %s: %w", filter, b.cfg.Stream, err)
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("bus: newest %s in %s: %w", filter, b.cfg.Stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return 0, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("bus: newest %s in %s: %w", filter, b.cfg.Stream, resp.Error)
	case resp.Message == nil:
		return 0, fmt.Errorf("bus: newest %s in %s: an answer without a message", filter, b.cfg.Stream)
	}
	return resp.Message.Seq, nil
}

// sameKeep compares the fields KeepStreamConfig sets.
func sameKeep(have, want jetstream.StreamConfig) bool {
	return have.MaxMsgsPerSubject == want.MaxMsgsPerSubject && have.Replicas == want.Replicas && have.Description == want.Description &&
		have.Storage == want.Storage && have.MaxAge == 0 && have.MaxBytes == -1 && have.MaxMsgs == -1 &&
		len(have.Sources) == 1 && have.Sources[0].Name == want.Sources[0].Name &&
		slices.Equal(have.Sources[0].SubjectTransforms, want.Sources[0].SubjectTransforms)
}

// Kept implements journal.Kept: it reads the whole keep stream with one
// short-lived consumer and returns the entries whose journal sequence is
// in (after, before), in journal order, under their journal sequence and
// stored subject. Entries sourced from an earlier journal of the same name
// (stored before this one was created) are left out.
func (b *Bus) Kept(ctx context.Context, after, before uint64) ([]journal.Entry, error) {
	js, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	created := js.CachedInfo().Created
	ks, err := b.JS.Stream(ctx, b.KeepStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("keep stream: %w", err)
	}
	want := ks.CachedInfo().State.Msgs // a Fetch waits for its whole batch
	if want == 0 {
		return nil, nil
	}
	cons, release, err := ReadOnce(ctx, ks, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("keep stream: %w", err)
	}
	defer release()
	var out []journal.Entry
	for got := uint64(0); got < want; {
		batch, err := cons.Fetch(int(min(want-got, 1000)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return nil, fmt.Errorf("keep stream: %w", err)
		}
		n, last := 0, false
		for m := range batch.Messages() {
			n++
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			last = md.NumPending == 0
			seq, ok := SourceSeq(m.Headers().Get(streamSourceHeader))
			if !ok || seq <= after || seq >= before || md.Timestamp.Before(created) {
				continue
			}
			hdr := events.Header(m.Headers())
			delete(hdr, streamSourceHeader)
			out = append(out, journal.Entry{Seq: seq, Subject: m.Subject(), Header: hdr, Data: m.Data(), Time: md.Timestamp})
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("keep stream: %w", err)
		}
		if last {
			break
		}
		if n == 0 {
			return nil, errors.New("keep stream: read stalled")
		}
	}
	// One source keeps the journal's order; sorting costs little and
	// does not rely on it.
	slices.SortFunc(out, func(a, b journal.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// SourceSeq is the journal sequence a Nats-Stream-Source header names
// ("<stream> <seq> …").
func SourceSeq(h string) (uint64, bool) {
	f := strings.Fields(h)
	if len(f) < 2 {
		return 0, false
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	return seq, err == nil && seq > 0
}

// streamSourceHeader names, on a sourced message, its origin and sequence.
const streamSourceHeader = "Nats-Stream-Source"

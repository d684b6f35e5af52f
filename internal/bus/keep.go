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

// provisionKeep creates the keep stream, or updates one that differs.
func (b *Bus) provisionKeep(ctx context.Context) error {
	want := b.KeepStreamConfig()
	s, err := b.JS.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
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

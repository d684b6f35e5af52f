package observer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/observer"
)

// TestObservedRetention: with an observed retention, observed snapshots and
// heartbeats carry a per-message TTL and leave the journal when it runs
// out, while desired events (the audit trail) stay; an unchanged snapshot
// is published again once half its term has passed, so each guest's newest
// observation is always in the journal.
func TestObservedRetention(t *testing.T) {
	_, c := demo(t)
	b := bustest.New(t)
	ctx := tctx(t)
	clk := newClock()
	const ttl = 2 * time.Second
	o := newObserver(t, c, b, clk, func(cfg *observer.Config) { cfg.Interval = 250 * time.Millisecond; cfg.ObservedTTL = ttl })
	j := newJournal(t, b)
	desired, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", 100), []byte(`{"vmid":100,"power":"running"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	j.seq = desired.Sequence

	pass(t, o)
	first := j.lastSeq()
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := desired.Sequence + 1; seq <= first; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("Nats-TTL"); got != "2s" {
			t.Fatalf("observer event %d (%s) has Nats-TTL %q, want 2s", seq, m.Subject, got)
		}
	}
	j.next()

	// Nothing changed, and less than half the term passed: nothing again.
	clk.Advance(ttl/2 - time.Millisecond)
	if got := j.nextAfter(t, o); len(got.observed) != 0 {
		t.Fatalf("unchanged snapshots republished early: %s", got)
	}
	// Half the term: every snapshot is published again.
	clk.Advance(time.Millisecond)
	if got := j.nextAfter(t, o); len(got.observed) != demoGuests {
		t.Fatalf("at half the term %d of %d snapshots were republished", len(got.observed), demoGuests)
	}

	// The first pass's events run out; the desired event stays.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.GetMsg(ctx, first)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("observed event %d still in the journal long after its TTL (%v)", first, err)
		}
		time.Sleep(50 * time.Millisecond) // waiting for the server's TTL, not synchronising
	}
	if _, err := s.GetMsg(ctx, desired.Sequence); err != nil {
		t.Fatalf("the desired event went with the observations: %v", err)
	}
}

// nextAfter runs a pass and returns what it published.
func (j *journal) nextAfter(t *testing.T, o *observer.Observer) batch {
	t.Helper()
	pass(t, o)
	return j.next()
}

func TestObservedRetentionValidated(t *testing.T) {
	_, c := demo(t)
	b := bustest.New(t)
	for _, bad := range []time.Duration{-time.Second, 500 * time.Millisecond, 30 * time.Second} {
		cfg := observer.DefaultConfig()
		cfg.Interval, cfg.ObservedTTL = 10*time.Second, bad
		_, err := observer.New(cfg, c, b)
		if err == nil {
			t.Errorf("ObservedTTL %s with a 10s interval accepted", bad)
		}
	}
}

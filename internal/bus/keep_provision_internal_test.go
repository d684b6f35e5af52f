package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/converge-pve/converge/events"
)

// TestNewJournalLimitedOnlyWithItsKeepStream: a new journal gets its
// retention limits only once its keep stream exists. A user that may
// create the journal but not the keep stream is refused, saying so
// within one attempt, and leaves a journal without limits, which drops
// nothing (before: the journal was created with its limits and no keep
// stream, and every publish after it could evict a guest's only desired
// event for good; the refusal looked like a timeout for two minutes).
func TestNewJournalLimitedOnlyWithItsKeepStream(t *testing.T) {
	u := &server.User{Username: "half", Password: "pw", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.CREATE.PVE_KEEP"}}}}
	srv := testServer(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bc := DefaultConfig()
	bc.User, bc.Password, bc.MaxBytes = "half", "pw", 64<<10
	b := testConnect(t, ctx, srv, bc, false)
	err := b.Provision(ctx)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "converge provision") {
		t.Fatalf("provisioning without the right to create the keep stream: %v, want a refusal naming converge provision", err)
	}
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; limited(c) {
		t.Fatalf("the journal has limits (max bytes %d) without a keep stream", c.MaxBytes)
	}
}

// TestKeepTargetFixed: the sequence the keep stream must reach before
// new limits apply is the journal's newest desired event, action or
// result when the wait began: events published meanwhile do not move it
// (before, a steady stream of them kept it out of reach and the role
// never started).
func TestKeepTargetFixed(t *testing.T) {
	b := newTestBus(t)
	ctx := context.Background()
	var last uint64
	for id := 100; id < 110; id++ {
		a, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", id), []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		last = a.Sequence
	}
	if err := b.provisionKeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var p provisioning
	err = b.keepCaughtUp(ctx, s, &p)
	var behind *KeepBehindError
	if err != nil && !errors.As(err, &behind) {
		t.Fatal(err)
	}
	if p.target != last {
		t.Fatalf("target %d, want the newest desired event %d", p.target, last)
	}
	if _, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", 200), []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	err = b.keepCaughtUp(ctx, s, &p)
	if errors.As(err, &behind) && behind.Target != last || p.target != last {
		t.Fatalf("target moved to %d (%v), want %d", p.target, err, last)
	}
}

// TestProvisionWithoutLimitsKeepsThemWhenAsked: with LimitsUnset (converge
// provision without --retention-* flags) an existing journal keeps its
// limits; without it they are removed, as the flags say.
func TestProvisionWithoutLimitsKeepsThemWhenAsked(t *testing.T) {
	srv := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maxAge := func(c Config) time.Duration {
		s, err := testConnect(t, ctx, srv, c, true).JS.Stream(ctx, DefaultStream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.MaxAge
	}
	bc2 := DefaultConfig()
	bc2.MaxAge = time.Hour
	if got := maxAge(bc2); got != time.Hour {
		t.Fatalf("max age %s", got)
	}
	bc3 := DefaultConfig()
	bc3.LimitsUnset = true
	if got := maxAge(bc3); got != time.Hour {
		t.Fatalf("limits unset: max age %s, want the journal's hour kept", got)
	}
	if got := maxAge(DefaultConfig()); got != 0 {
		t.Fatalf("no limits: max age %s", got)
	}
}

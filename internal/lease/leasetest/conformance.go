package leasetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/lease"
)

// Conformance checks the semantics lease.Store documents against the store
// open opens, which must be empty and reachable, and must not expire keys
// within a minute: Create and Update as compare-and-sets, the sentinels
// they answer with, deletion, key listing by filter, and a TTL kept from
// the first open. Expiry is not checked (it takes the store's own clock).
func Conformance(t *testing.T, open lease.Opener) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = time.Minute
	s, err := open(ctx, ttl, 1)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if got, err := s.TTL(ctx); err != nil || got != ttl {
		t.Errorf("TTL() = %s, %v; want %s", got, err, ttl)
	}
	again, err := open(ctx, 2*ttl, 1)
	if err != nil {
		t.Fatalf("open again with another TTL: %v", err)
	}
	if got, err := again.TTL(ctx); err != nil || got != ttl {
		t.Errorf("opened again with TTL %s: TTL() = %s, %v; want the first, %s", 2*ttl, got, err, ttl)
	}

	present := func(key string, want bool) {
		t.Helper()
		if got, err := s.Get(ctx, key); err != nil || got != want {
			t.Errorf("Get(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	refused := func(what string, err error, sentinels ...error) {
		t.Helper()
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return
			}
		}
		t.Errorf("%s: %v; want one of %v", what, err, sentinels)
	}

	const k = "g.p.1"
	present(k, false)
	r1, err := s.Create(ctx, k, []byte("a"))
	if err != nil || r1 == 0 {
		t.Fatalf("Create(absent) = %d, %v", r1, err)
	}
	present(k, true)
	_, err = s.Create(ctx, k, []byte("b"))
	refused("Create(present)", err, lease.ErrExists)

	r2, err := s.Update(ctx, k, []byte("a"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("Update(at its revision %d) = %d, %v; want a higher revision", r1, r2, err)
	}
	_, err = s.Update(ctx, k, []byte("a"), r1)
	refused("Update(at a stale revision)", err, lease.ErrRejected)
	r3, err := s.Put(ctx, k, []byte("intruder"))
	if err != nil || r3 <= r2 {
		t.Fatalf("Put = %d, %v; want a revision above %d", r3, err, r2)
	}
	_, err = s.Update(ctx, k, []byte("a"), r2)
	refused("Update after another's Put", err, lease.ErrRejected)

	refused("Delete(at a stale revision)", s.Delete(ctx, k, r2), lease.ErrRejected)
	present(k, true)
	if err := s.Delete(ctx, k, r3); err != nil {
		t.Fatalf("Delete(at its revision) = %v", err)
	}
	present(k, false)
	_, err = s.Update(ctx, k, []byte("a"), r3)
	refused("Update of a deleted key", err, lease.ErrRejected, lease.ErrNotFound)
	r4, err := s.Create(ctx, k, []byte("b"))
	if err != nil || r4 <= r3 {
		t.Fatalf("Create(deleted) = %d, %v; want a revision above %d", r4, err, r3)
	}
	if err := s.Delete(ctx, k, 0); err != nil {
		t.Fatalf("Delete(any revision) = %v", err)
	}
	present(k, false)
	if err := s.Delete(ctx, "g.p.never", 0); err != nil {
		t.Errorf("Delete(never written) = %v", err)
	}

	for _, key := range []string{"g.m.b", "g.m.a", "g.m.c", "g.p.2", "h.m.a"} {
		if _, err := s.Put(ctx, key, []byte("x")); err != nil {
			t.Fatalf("Put(%s): %v", key, err)
		}
	}
	if err := s.Delete(ctx, "g.m.c", 0); err != nil {
		t.Fatalf("Delete(g.m.c): %v", err)
	}
	for filter, want := range map[string][]string{
		"g.m.*": {"g.m.a", "g.m.b"},
		"*.m.a": {"g.m.a", "h.m.a"},
		"g.>":   {"g.m.a", "g.m.b", "g.p.2"},
		"x.m.*": nil,
	} {
		got, err := s.Keys(ctx, filter)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Keys(%s) = %q, %v; want %q", filter, got, err, want)
		}
	}
}

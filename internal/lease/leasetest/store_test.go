package leasetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/lease/leasetest"
)

func TestConformance(t *testing.T) {
	leasetest.Conformance(t, leasetest.New(nil).Open)
}

func TestConformanceThroughConn(t *testing.T) {
	leasetest.Conformance(t, leasetest.New(nil).Conn().Open)
}

func TestKeysExpireOnTheClock(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	s := leasetest.New(clk)
	if _, err := s.Open(ctx, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Create(ctx, "g.p.0", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "g.p.1", 0); err != nil { // a marker expires too
		t.Fatal(err)
	}
	clk.Advance(999 * time.Millisecond)
	if ok, _ := s.Get(ctx, "g.p.0"); !ok {
		t.Fatal("expired before its TTL")
	}
	if _, err := s.Create(ctx, "g.p.0", []byte("b")); !errors.Is(err, lease.ErrExists) {
		t.Fatalf("Create before expiry: %v, want ErrExists", err)
	}
	clk.Advance(time.Millisecond)
	if ok, _ := s.Get(ctx, "g.p.0"); ok {
		t.Fatal("present TTL after its last write")
	}
	if keys, _ := s.Keys(ctx, "g.>"); len(keys) != 0 {
		t.Fatalf("Keys after expiry = %q", keys)
	}
	if _, err := s.Update(ctx, "g.p.0", []byte("a"), rev); !errors.Is(err, lease.ErrRejected) {
		t.Fatalf("Update of an expired key: %v, want ErrRejected", err)
	}
	// Nothing is left of the key, a deletion marker neither: a write that
	// expects no revision (0) succeeds, as on JetStream.
	if _, err := s.Update(ctx, "g.p.1", []byte("a"), 0); err != nil {
		t.Fatalf("Update(expired marker, 0): %v", err)
	}
	if _, err := s.Create(ctx, "g.p.0", []byte("b")); err != nil {
		t.Fatalf("Create after expiry: %v", err)
	}
}

func TestCutConn(t *testing.T) {
	ctx := context.Background()
	s := leasetest.New(nil)
	c := s.Conn()
	st, err := c.Open(ctx, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.Cut(true)
	if _, err := st.Put(ctx, "g.m.a", nil); !errors.Is(err, leasetest.ErrUnreachable) {
		t.Fatalf("Put through a cut conn: %v", err)
	}
	if _, err := c.Open(ctx, time.Minute, 1); !errors.Is(err, leasetest.ErrUnreachable) {
		t.Fatalf("Open through a cut conn: %v", err)
	}
	if _, err := s.Put(ctx, "g.m.b", nil); err != nil { // others still reach it
		t.Fatal(err)
	}
	c.Cut(false)
	if ok, err := st.Get(ctx, "g.m.b"); err != nil || !ok {
		t.Fatalf("Get after the cut is mended = %v, %v", ok, err)
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		filter, key string
		want        bool
	}{
		{"g.m.*", "g.m.a", true}, {"g.m.*", "g.m", false}, {"g.m.*", "g.m.a.b", false},
		{"g.>", "g.m.a", true}, {"g.>", "g", false}, {">", "g", true}, {"*.m.a", "h.m.a", true},
		{"g.m.a", "g.m.a", true}, {"g.m.a", "g.m.b", false},
	} {
		if got := leasetest.Match(c.filter, c.key); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.filter, c.key, got)
		}
	}
}

package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/journal"
)

// The limits ledger is compare-and-set: of two planners that read the same
// revision, only the first write lands; the other is told to read again.
func TestLimitsLedgerCompareAndSet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := bustest.New(t)
	s, err := b.LimitsStore(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	val, rev, err := s.Load(ctx, "node.pve1")
	if err != nil || val != nil || rev != 0 {
		t.Fatalf("missing key: %q %d %v", val, rev, err)
	}
	if err := s.Store(ctx, "node.pve1", []byte(`[1]`), 0); err != nil {
		t.Fatal(err)
	}
	// A second creator read "absent" too: refused.
	if err := s.Store(ctx, "node.pve1", []byte(`[2]`), 0); !errors.Is(err, journal.ErrStale) {
		t.Fatalf("second create: %v, want ErrStale", err)
	}
	val, rev, err = s.Load(ctx, "node.pve1")
	if err != nil || string(val) != `[1]` {
		t.Fatalf("load: %q %v", val, err)
	}
	if err := s.Store(ctx, "node.pve1", []byte(`[1,3]`), rev); err != nil {
		t.Fatal(err)
	}
	// A planner still holding the old revision: refused.
	if err := s.Store(ctx, "node.pve1", []byte(`[1,4]`), rev); !errors.Is(err, journal.ErrStale) {
		t.Fatalf("stale update: %v, want ErrStale", err)
	}
	if val, _, _ := s.Load(ctx, "node.pve1"); string(val) != `[1,3]` {
		t.Fatalf("ledger %q, want the first write", val)
	}
}

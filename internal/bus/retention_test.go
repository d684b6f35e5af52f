package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
)

// TestRetentionLimits: the journal's age and size limits reach the stream,
// and per-message TTLs (observed snapshots) are allowed on it.
func TestRetentionLimits(t *testing.T) {
	srv := bustest.Server(t, bustest.New(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bc := bus.DefaultConfig()
	bc.InProcess, bc.Name, bc.MaxAge, bc.MaxBytes, bc.Logger = srv, "retention", 90*24*time.Hour, 1<<30, zerolog.Nop()
	b, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; c.MaxAge != 90*24*time.Hour || c.MaxBytes != 1<<30 || !c.AllowMsgTTL {
		t.Fatalf("stream limits: max age %s, max bytes %d, msg TTL %v", c.MaxAge, c.MaxBytes, c.AllowMsgTTL)
	}
}

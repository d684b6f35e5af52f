package bus

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/natsserver"
)

// TestProvisionLeavesUnchangedAlone checks that the server hands back the
// stream and bucket configuration as Provision asked for it, so that a
// role starting against a provisioned cluster proposes no update, and that
// a changed setting is still applied.
func TestProvisionLeavesUnchangedAlone(t *testing.T) {
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(maxAge time.Duration) *Bus {
		bc := DefaultConfig()
		bc.InProcess, bc.MaxAge, bc.Logger = s, maxAge, zerolog.Nop()
		b, err := Connect(ctx, bc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := connect(0)
	st, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameStream(st.CachedInfo().Config, b.StreamConfig()) {
		t.Fatalf("created stream differs from its request:\n%+v\n%+v", st.CachedInfo().Config, b.StreamConfig())
	}
	kv, err := b.Views(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBucket(ks, b.bucketConfig()) {
		t.Fatalf("created bucket differs from its request: %+v", ks)
	}
	connect(time.Hour)
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != time.Hour {
		t.Fatalf("MaxAge not updated: %s", info.Config.MaxAge)
	}
}

package bus

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
)

// TestLastsBatchedAndOneByOne: the batched read of a guest's newest
// entries and the one-subject-at-a-time reads (servers that cannot batch)
// agree.
func TestLastsBatchedAndOneByOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	bc := DefaultConfig()
	bc.InProcess, bc.Logger = s, zerolog.Nop()
	b, err := Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []events.Kind{events.KindDesired, events.KindAction, events.KindDesired, events.KindResult} {
		if _, err := b.Publish(ctx, events.Subject(k, "pve", 101), []byte(`{"vmid":101}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []events.Kind{events.KindAction, events.KindResult, events.KindDesired, events.KindObserved}
	seqs := func(es []*journal.Entry) []uint64 {
		out := make([]uint64, len(es))
		for i, e := range es {
			if e != nil {
				out[i] = e.Seq
			}
		}
		return out
	}
	batched, err := b.Lasts(ctx, "pve", 101, kinds...)
	if err != nil || b.lasts.unsupported.Load() {
		t.Fatalf("batched: %v (fell back: %v)", err, b.lasts.unsupported.Load())
	}
	b.lasts.unsupported.Store(true)
	single, err := b.Lasts(ctx, "pve", 101, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{2, 4, 3, 0}
	for i := range want {
		if seqs(batched)[i] != want[i] || seqs(single)[i] != want[i] {
			t.Fatalf("batched %v, one by one %v; want %v", seqs(batched), seqs(single), want)
		}
	}
}

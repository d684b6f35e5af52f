package bus

import (
	"context"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsserver"
)

// TestKeepStream: provisioning creates the keep stream sourcing the
// journal's desired, action and result subjects (not observations nor
// heartbeats), a second provisioning leaves it as it is, and Kept reads
// the sourced entries back under their journal sequence and stored
// subject, within the asked range.
func TestKeepStream(t *testing.T) {
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Connect(ctx, Config{InProcess: srv, Name: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	ks, err := b.JS.Stream(ctx, b.KeepStream())
	if err != nil {
		t.Fatal(err)
	}
	if have := ks.CachedInfo().Config; !sameKeep(have, b.KeepStreamConfig()) || have.MaxMsgsPerSubject != KeepPerSubject {
		t.Fatalf("keep stream as created differs from what provisioning wants: %+v", have)
	}
	pub := func(subject string) uint64 {
		a, err := b.Publish(ctx, subject, []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		return a.Sequence
	}
	d1 := pub(events.Subject(events.KindDesired, "pve", 101))
	pub(events.Subject(events.KindObserved, "pve", 101))
	pub(events.ClusterSubject(events.KindHeartbeat, "pve"))
	a1 := pub(events.Subject(events.KindAction, "pve", 101))
	r1 := pub(events.Subject(events.KindResult, "pve", 101))
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := ks.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keep stream holds %d entries, want 3", info.State.Msgs)
		}
		time.Sleep(5 * time.Millisecond) // polling the server's sourcing
	}
	kept, err := b.Kept(ctx, 0, r1+1)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		seq  uint64
		kind events.Kind
	}{{d1, events.KindDesired}, {a1, events.KindAction}, {r1, events.KindResult}}
	if len(kept) != len(want) {
		t.Fatalf("kept %+v, want seqs %d, %d, %d", kept, d1, a1, r1)
	}
	for i, w := range want {
		if kept[i].Seq != w.seq || kept[i].Subject != b.StoredSubject(w.kind, "pve", 101) || kept[i].Header.Get(streamSourceHeader) != "" {
			t.Fatalf("kept[%d] = seq %d %s (header %v), want seq %d %s", i, kept[i].Seq, kept[i].Subject, kept[i].Header, w.seq, w.kind)
		}
	}
	if kept, _ := b.Kept(ctx, d1, r1); len(kept) != 1 || kept[0].Seq != a1 {
		t.Fatalf("kept in (%d, %d): %+v", d1, r1, kept)
	}
	created := ks.CachedInfo().Created
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if ks, err = b.JS.Stream(ctx, b.KeepStream()); err != nil || !ks.CachedInfo().Created.Equal(created) {
		t.Fatalf("second provisioning: %v, created %v then %v", err, created, ks.CachedInfo().Created)
	}
}

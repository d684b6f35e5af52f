package planloop

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// evictGap journals wave 1 (guests 101..110), lets a planner checkpoint
// it, then desires guest 111 (cores 2) and evicts everything after the
// checkpoint up to and including that desired event, as retention would
// while no planner runs; guest 111 is then observed with 1 core.
func evictGap(t *testing.T, b *bus.Bus) {
	t.Helper()
	ctx := context.Background()
	publishWave(t, b, 1)
	_, stop := runLoop(t, b, "p1")
	stop() // checkpoint at 21
	if _, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", 111), []byte(`{"vmid":111,"power":"running","cores":2}`), nil); err != nil {
		t.Fatal(err)
	}
	hb, _ := events.Encode(events.Heartbeat{Meta: events.NewMeta("observer", "", time.Now()), Cluster: "pve", Reachable: true, Interval: time.Second})
	for range 5 {
		if _, err := b.Publish(ctx, events.ClusterSubject(events.KindHeartbeat, "pve"), hb, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Sourcing is the server's, asynchronous: wait until the keep stream
	// holds the 11 desired events.
	ks, err := b.JS.Stream(ctx, b.KeepStream())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err := ks.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keep stream holds %d entries, want 11", info.State.Msgs)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(27)); err != nil { // retention's cut
		t.Fatal(err)
	}
	o, _ := events.Encode(events.Observed{Meta: events.NewMeta("observer", "", time.Now()), VMID: 111, Cluster: "pve", Exists: true,
		Node: "pve1", Kind: events.QEMU, Status: "running", Digest: "d111",
		Config: events.GuestConfig{Name: "vm", Cores: 1, MemoryMiB: 512, Tags: []string{}}, ReadAt: time.Now(), Source: events.SourceObserver})
	if _, err := b.Publish(ctx, events.Subject(events.KindObserved, "pve", 111), o, nil); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(ctx); info.State.FirstSeq != 27 {
		t.Fatalf("journal starts at %d after the cut, want 27", info.State.FirstSeq)
	}
}

// checkManaged: guests 101 and 111 are managed, and 111's drift (1 core,
// desired 2) is planned.
func checkManaged(t *testing.T, l *Loop) {
	t.Helper()
	for _, id := range []int{101, 111} {
		d, ok := l.eng.Decision(id)
		if !ok || d.Status.Kind == planner.Unmanaged {
			t.Errorf("guest %d: decision %+v (planned %v): desired state lost to retention", id, d.Status, ok)
		}
	}
	// Observe-only: the plan is stated, not carried out.
	if d, _ := l.eng.Decision(111); d.Status.Kind != planner.Pending || len(d.Status.Drift) == 0 {
		t.Errorf("guest 111: its drift is not planned: %+v", d.Status)
	}
}

// TestCheckpointAcrossRetentionGap: retention evicts a guest's only
// desired event after the planner's checkpoint; the restarted planner
// still resumes from the checkpoint, folds the kept desired event, and
// plans the guest's drift.
func TestCheckpointAcrossRetentionGap(t *testing.T) {
	b := bustest.New(t, bustest.Limited)
	evictGap(t, b)
	l, stop := runLoop(t, b, "p2")
	stop()
	if l.ResumedFrom() != 21 {
		t.Errorf("resumed from %d, want the checkpoint at 21", l.ResumedFrom())
	}
	checkManaged(t, l)
}

// TestNoCheckpointAfterRetention: after `converge rebuild` (views and
// checkpoint dropped) on a journal retention has cut, the planner folding
// without a checkpoint keeps every guest's desired state.
func TestNoCheckpointAfterRetention(t *testing.T) {
	b := bustest.New(t, bustest.Limited)
	evictGap(t, b)
	store, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	// As `converge rebuild` does: views and checkpoint dropped.
	if r, err := views.Rebuild(context.Background(), store, b.Checkpoints(), CheckpointName("pve")); err != nil || !r.CheckpointDropped {
		t.Fatalf("rebuild: %+v, %v", r, err)
	}
	l, stop := runLoop(t, b, "p2")
	stop()
	if l.ResumedFrom() != 0 {
		t.Errorf("resumed from %d without a checkpoint", l.ResumedFrom())
	}
	checkManaged(t, l)
}

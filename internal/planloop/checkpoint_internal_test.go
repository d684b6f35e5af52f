package planloop

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// publishWave journals desired state and observations for guests 101..110.
func publishWave(t *testing.T, b *bus.Bus, wave int) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	for id := 101; id <= 110; id++ {
		d := `{"vmid":` + strconv.Itoa(id) + `,"power":"running","description":"wave ` + strconv.Itoa(wave) + `"}`
		if _, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", id), []byte(d), nil); err != nil {
			t.Fatal(err)
		}
		o, _ := events.Encode(events.Observed{Meta: events.NewMeta("observer", "", now), VMID: id, Cluster: "pve", Exists: true,
			Node: "pve1", Kind: events.QEMU, Status: "stopped", Digest: "d" + strconv.Itoa(wave),
			Config: events.GuestConfig{Name: "vm", Cores: 1, MemoryMiB: 512, Tags: []string{}}, ReadAt: now, Source: events.SourceObserver})
		if _, err := b.Publish(ctx, events.Subject(events.KindObserved, "pve", id), o, nil); err != nil {
			t.Fatal(err)
		}
	}
	hb, _ := events.Encode(events.Heartbeat{Meta: events.NewMeta("observer", "", now), Cluster: "pve", Reachable: true, Interval: time.Second})
	if _, err := b.Publish(ctx, events.ClusterSubject(events.KindHeartbeat, "pve"), hb, nil); err != nil {
		t.Fatal(err)
	}
}

// foldAll folds the whole stream from the start, as replay does.
func foldAll(t *testing.T, b *bus.Bus) *projector.Projector {
	t.Helper()
	ctx := context.Background()
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	p := projector.New("pve")
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		p.Apply(projector.Event{Seq: seq, Subject: m.Subject, Header: events.Header(m.Header), Data: m.Data, Time: m.Time})
	}
	return p
}

// runLoop runs a planner named name on b, configured further by mods,
// until the returned stop.
func runLoop(t *testing.T, b *bus.Bus, name string, mods ...func(*Config)) (*Loop, func()) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Planner.Name, cfg.Logger = name, zerolog.New(zerolog.NewTestWriter(t))
	cfg.Planner.Policy.ObserveOnly = true // no executor here: plan, never act
	for _, m := range mods {
		m(&cfg)
	}
	store, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, b, store, b.Checkpoints(), b.LeaseStore)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !s.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("planner never ready")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	return s, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointResume: a planner stopped after folding writes a
// checkpoint of the sequence it reflects; the next one resumes from it,
// folds only the tail, and ends with exactly the views a fold of the whole
// journal gives.
func TestCheckpointResume(t *testing.T) {
	b := bustest.New(t)
	if err := b.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	publishWave(t, b, 1)
	first, stop := runLoop(t, b, "p1")
	if first.ResumedFrom() != 0 {
		t.Fatalf("first planner resumed from %d with no checkpoint", first.ResumedFrom())
	}
	stop() // writes the checkpoint
	raw, err := b.Checkpoints().Get(context.Background(), CheckpointName("pve"))
	if err != nil || raw == nil {
		t.Fatalf("no checkpoint after shutdown: %v", err)
	}
	if raw, err = zstdDecoder.DecodeAll(raw, nil); err != nil {
		t.Fatalf("checkpoint not zstd-compressed: %v", err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Seq != 21 || len(cp.Views) != 10 {
		t.Fatalf("checkpoint at seq %d with %d views; want 21 and 10", cp.Seq, len(cp.Views))
	}

	publishWave(t, b, 2)
	second, stop2 := runLoop(t, b, "p2")
	if second.ResumedFrom() != cp.Seq {
		t.Fatalf("second planner resumed from %d, want %d", second.ResumedFrom(), cp.Seq)
	}
	if folded := testutil.ToFloat64(second.metrics.folded); folded != 21 {
		t.Fatalf("second planner folded %v events, want the 21 of the tail", folded)
	}
	want := foldAll(t, b)
	// Stopped, the loop leaves the engine alone: its fold is what a
	// final checkpoint holds.
	stop2()
	snap := second.eng.FinalCheckpoint()
	if snap == nil {
		snap = &projector.Snapshot{Views: map[int]*projector.View{}}
	}
	got, _ := json.Marshal(snap.Views)
	gotState, _ := json.Marshal(snap.State)
	wantViews, _ := json.Marshal(want.Views)
	wantState, _ := json.Marshal(want.State)
	if string(got) != string(wantViews) || string(gotState) != string(wantState) {
		t.Fatalf("checkpoint + tail differs from a whole fold:\n got %s\nwant %s", got, wantViews)
	}
}

// TestCheckpointIgnoredWhenStreamRecreated: a checkpoint of a stream that
// has since been deleted and created again is not used, even when the new
// stream has grown past its sequence.
func TestCheckpointIgnoredWhenStreamRecreated(t *testing.T) {
	b := bustest.New(t)
	ctx := context.Background()
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	publishWave(t, b, 1)
	_, stop := runLoop(t, b, "p1")
	stop()
	if err := b.JS.DeleteStream(ctx, b.Config().Stream); err != nil {
		t.Fatal(err)
	}
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	publishWave(t, b, 2)
	publishWave(t, b, 3)
	s, stop2 := runLoop(t, b, "p2")
	if s.ResumedFrom() != 0 {
		t.Fatalf("resumed from %d: a checkpoint of the deleted stream was used", s.ResumedFrom())
	}
	want := foldAll(t, b)
	stop2()
	got, _ := json.Marshal(s.eng.FinalCheckpoint().Views)
	wantViews, _ := json.Marshal(want.Views)
	if string(got) != string(wantViews) {
		t.Fatal("views differ from a whole fold of the new stream")
	}
}

// TestViewsBehind: once the planner has folded a wave of changes and
// ViewsBehind reports 0, every guest's view document shows its newest
// desired revision (what `converge bench` waits on before its latency run).
func TestViewsBehind(t *testing.T) {
	b := bustest.New(t)
	ctx := context.Background()
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	s, stop := runLoop(t, b, "p1")
	defer stop()
	kv, err := b.Views(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Views are written for the partitions the planner holds: all of
	// them, once it has joined its group.
	for deadline := time.Now().Add(30 * time.Second); len(s.Owned()) < planner.DefaultPartitions; {
		if time.Now().After(deadline) {
			t.Fatalf("planner holds %d of %d partitions", len(s.Owned()), planner.DefaultPartitions)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	for wave := 1; wave <= 2; wave++ {
		publishWave(t, b, wave)
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			// The planner started on an empty journal: it has folded
			// everything once it has counted every message.
			folded := testutil.ToFloat64(s.metrics.folded) >= float64(info.State.Msgs)
			if folded && s.ViewsBehind() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("wave %d: folded %v, %d views behind", wave, folded, s.ViewsBehind())
			}
			time.Sleep(5 * time.Millisecond) // polling a condition
		}
		for id := 101; id <= 110; id++ {
			last, err := stream.GetLastMsgForSubject(ctx, b.StoredSubject(events.KindDesired, "pve", id))
			if err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(ctx, views.GuestKey("pve", id))
			if err != nil {
				t.Fatalf("wave %d, guest %d: %v", wave, id, err)
			}
			var doc views.GuestDoc
			if err := json.Unmarshal(e.Value(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.View == nil || doc.View.DesiredSeq != last.Sequence {
				t.Fatalf("wave %d, guest %d: view at desired revision %v, journal at %d", wave, id, doc.View, last.Sequence)
			}
		}
	}
}

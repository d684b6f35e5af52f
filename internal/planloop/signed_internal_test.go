package planloop

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// storedCheckpoint is the planner's checkpoint as the object store holds
// it.
func storedCheckpoint(t *testing.T, b *bus.Bus) *Checkpoint {
	t.Helper()
	raw, err := b.Checkpoints().Get(context.Background(), CheckpointName("pve"))
	if err != nil || raw == nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	cp, why := decodeCheckpoint(raw)
	if why != "" {
		t.Fatal(why)
	}
	return cp
}

// Turning on --require-signed over a journal whose desired states are
// unsigned (issue 35, defect 6): the planner restarted with signing
// required does not resume from the checkpoint written without it, and
// ends with the views a rebuild and a replay with the same settings give:
// every unsigned desired state rejected, the signed one in force.
func TestCheckpointSigningChanged(t *testing.T) {
	b := bustest.New(t)
	ctx := context.Background()
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	seed := sha256.Sum256([]byte("planloop test key ci"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	auth := &projector.Auth{Keys: map[string]ed25519.PublicKey{"ci": priv.Public().(ed25519.PublicKey)}, Require: true}
	signed := func(a *Config) { a.Planner.Auth = auth }

	publishWave(t, b, 1) // guests 101..110, unsigned
	stopped := events.PowerStopped
	m, err := events.DesiredMessage(&events.Desired{VMID: 111, Power: &stopped}, events.PublishOptions{Publisher: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if err := events.SignMessage(&m, priv, "ci", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, m.Subject, m.Data, map[string][]string(m.Header)); err != nil {
		t.Fatal(err)
	}

	// Signing off: every desired state is in force; the checkpoint says so.
	_, stop := runLoop(t, b, "p1")
	stop()
	if cp := storedCheckpoint(t, b); cp.Signing != "" {
		t.Fatalf("checkpoint without signing records settings %q", cp.Signing)
	}

	// (a) live: restarted with signing required.
	live, stop := runLoop(t, b, "p2", signed)
	stop()
	for id := 101; id <= 110; id++ {
		d, ok := live.eng.Decision(id)
		if !ok || d.Status.Kind != planner.Rejected || !strings.Contains(d.Status.Reason, "unsigned: this cluster requires signed desired events") {
			t.Fatalf("guest %d live: %+v, want rejected as unsigned", id, d.Status)
		}
	}
	if d, _ := live.eng.Decision(111); d.Status.Kind == planner.Rejected {
		t.Fatalf("signed guest 111 rejected: %+v", d.Status)
	}
	if live.ResumedFrom() != 0 {
		t.Fatalf("resumed from checkpoint %d folded without signing", live.ResumedFrom())
	}
	liveCp := storedCheckpoint(t, b)
	if liveCp.Signing != auth.Digest() {
		t.Fatalf("checkpoint records signing %q, want %q", liveCp.Signing, auth.Digest())
	}
	want, _ := json.Marshal(liveCp.Views)
	for id, v := range liveCp.Views {
		if id == 111 {
			if v.Rejected != nil || v.SignedBy != "ci" {
				t.Fatalf("guest 111: rejected %+v, signed by %q", v.Rejected, v.SignedBy)
			}
		} else if v.Desired != nil || v.Rejected == nil {
			t.Fatalf("guest %d: desired %+v in force, rejection %+v", id, v.Desired, v.Rejected)
		}
	}

	// (c) replay with the same settings.
	rp, err := audit.FoldUntil(ctx, b.JS, b.Config().Stream, "pve", audit.Point{}, nil, auth)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(rp.Views); string(got) != string(want) {
		t.Fatalf("replay differs from the live planner:\n got %s\nwant %s", got, want)
	}

	// The checkpoint written under these settings is resumed from.
	again, stop := runLoop(t, b, "p3", signed)
	stop()
	if again.ResumedFrom() != liveCp.Seq {
		t.Fatalf("resumed from %d, want the checkpoint %d of the same settings", again.ResumedFrom(), liveCp.Seq)
	}

	// (b) rebuild: the checkpoint dropped, the journal folded from the start.
	store, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := views.Rebuild(ctx, store, b.Checkpoints(), CheckpointName("pve")); err != nil {
		t.Fatal(err)
	}
	rebuilt, stop := runLoop(t, b, "p4", signed)
	stop()
	if rebuilt.ResumedFrom() != 0 {
		t.Fatalf("rebuilt planner resumed from %d", rebuilt.ResumedFrom())
	}
	if got, _ := json.Marshal(storedCheckpoint(t, b).Views); string(got) != string(want) {
		t.Fatalf("rebuild differs from the live planner:\n got %s\nwant %s", got, want)
	}
}

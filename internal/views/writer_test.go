package views_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// TestWriterWritesDocumentsAndPolicy: a flush handed to the writer becomes
// one document per guest and the cluster document, which carries the
// policy the planner plans with (what `converge plan` plans with).
func TestWriterWritesDocumentsAndPolicy(t *testing.T) {
	f := newFixture(t)
	pol := planner.DefaultPolicy()
	pol.ObserveOnly, pol.ShutdownTimeout = true, 17*time.Second
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	w := views.NewWriter(f.r.Store, "pve", "planner@test", pol, clock.Real, zerolog.Nop())
	lim := planner.DefaultLimits()
	lim.GuardMin = 7
	w.PublishLimits(lim)
	w.Start()
	d := planner.Decision{Status: planner.Status{Kind: planner.Pending, Reason: "next: start"},
		Steps: []planner.Step{{Op: events.OpStart, Reason: "desired power running"}}}
	fl := &planner.Flush{Docs: []planner.Doc{{View: &projector.View{VMID: 101, Cluster: "pve", DesiredSeq: 7}, Decision: d}},
		State: projector.ClusterState{Cluster: "pve", Reachable: true}, Seq: 9, At: t0}
	if !w.Write(fl) {
		t.Fatal("an idle writer refused a flush")
	}
	w.Close(30 * time.Second)
	if w.Writing() != 0 {
		t.Fatalf("%d documents still being written after Close", w.Writing())
	}
	g, err := f.r.Guest(f.ctx, 101)
	if err != nil || g == nil {
		t.Fatalf("guest document: %v %v", g, err)
	}
	if g.Status.Kind != planner.Pending || len(g.Next) != 1 || g.Next[0].Op != events.OpStart || !g.UpdatedAt.Equal(t0) || g.View.DesiredSeq != 7 {
		t.Fatalf("guest document %+v", g)
	}
	cd, err := f.r.ClusterDoc(f.ctx)
	if err != nil || cd == nil {
		t.Fatalf("cluster document: %v %v", cd, err)
	}
	if cd.Seq != 9 || cd.Planner != "planner@test" || cd.Policy == nil || !cd.Policy.ObserveOnly || cd.Policy.ShutdownTimeout != 17*time.Second {
		t.Fatalf("cluster document %+v (policy %+v)", cd, cd.Policy)
	}
	// And the limits it applies (what `converge plan -f` holds with).
	if cd.Limits == nil || cd.Limits.GuardMin != 7 {
		t.Fatalf("cluster document limits %+v", cd.Limits)
	}
}

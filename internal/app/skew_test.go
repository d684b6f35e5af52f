package app_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// skewed is a clock running ahead of the executor's by d: an observer host
// with a wrong clock.
type skewed struct {
	clock.Clock
	d time.Duration
}

func (s skewed) Now() time.Time { return s.Clock.Now().Add(s.d) }

// An observer whose clock runs 20 s ahead made every read-back of the
// executor look older than the observer's snapshot: the read-back was
// discarded and the planner re-planned the same write from the stale view,
// thousands of times. Reads are ordered by the journal now.
func TestSkewedObserverDoesNotFloodProxmox(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Guests: 4}, func(c *observer.Config) { c.Clock, c.VerifyOff = skewed{clock.Real, 20 * time.Second}, true })
	p.pass(t)
	const vmid = 100
	desc, name := "set by converge", "skewed-100"
	before := p.sim.Mutations()
	seq := p.desire(t, &events.Desired{VMID: vmid, Description: &desc, Name: &name})
	doc := p.waitState(t, vmid, seq, planner.Converged, 20*time.Second)
	writes := p.sim.Mutations() - before
	if doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("not converged after 20s with a 20s-skewed observer: %+v; %d Proxmox mutations", doc, writes)
	}
	// Further (skewed) passes, folded and acted on, change nothing.
	converged := p.sim.Mutations()
	doc = p.settleIn(t, vmid)
	if n := p.sim.Mutations() - converged; n != 0 {
		t.Fatalf("further passes made %d Proxmox mutations (results %+v)", n, p.results(t, vmid))
	}
	writes = p.sim.Mutations() - before
	if doc.Status.Kind != planner.Converged || writes > 3 {
		t.Fatalf("one desired change cost %d Proxmox mutations (status %+v)", writes, doc.Status)
	}
	t.Logf("one desired change with a 20 s skewed observer: %d Proxmox mutations", writes)
}

// One observation stamped in 2099 (a forged event, a clock step) made every
// later read look older: about a thousand actions a second, indefinitely.
// It is refused now, with the reason in status.
func TestFutureObservationRefused(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Guests: 4}, verifyOff)
	p.pass(t)
	const vmid = 101
	forged := &events.Observed{Meta: events.NewMeta("mallory", "", time.Now()), VMID: vmid, Cluster: events.DefaultCluster,
		Exists: true, Node: "pve1", Kind: events.QEMU, Status: "stopped", ReadAt: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), Source: events.SourceObserver}
	body, err := events.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.Bus().Append(pvesimtest.Context(t), events.Message{Subject: events.Subject(events.KindObserved, events.DefaultCluster, vmid), Data: body}, journal.Expect{}); err != nil {
		t.Fatal(err)
	}
	desc := "after a forged read"
	before := p.sim.Mutations()
	seq := p.desire(t, &events.Desired{VMID: vmid, Description: &desc})
	if doc := p.waitState(t, vmid, seq, planner.Converged, 20*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("not converged after a 2099 observation: %+v; %d Proxmox mutations", doc, p.sim.Mutations()-before)
	}
	// Further passes, folded and acted on, change nothing.
	converged := p.sim.Mutations()
	doc := p.settleIn(t, vmid)
	if n := p.sim.Mutations() - converged; n != 0 {
		t.Fatalf("further passes made %d Proxmox mutations (results %+v)", n, p.results(t, vmid))
	}
	if writes := p.sim.Mutations() - before; doc.Status.Kind != planner.Converged || writes > 3 {
		t.Fatalf("after a 2099 observation: %d Proxmox mutations, status %+v", writes, doc)
	}
	if r := doc.View.RefusedObservation; r == nil || r.Publisher != "mallory" {
		t.Fatalf("refusal not in the view: %+v", r)
	}
}

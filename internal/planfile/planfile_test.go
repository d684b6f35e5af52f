package planfile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/planfile"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

var now = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func guest(vmid int, desired *events.Desired, status string, cores int) views.GuestDoc {
	return views.GuestDoc{View: &projector.View{VMID: vmid, Cluster: "pve", Desired: desired, DesiredSeq: 2, ObservedSeq: 3,
		Observed: &events.Observed{VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: status,
			ReadAt: now, Config: events.GuestConfig{Cores: cores, MemoryMiB: 512}}}}
}

func ptr[T any](v T) *T { return &v }

// Releases a caller passes (a set's prune) are planned as unmanaged and
// listed, leave Proxmox alone, and count as a change; the guard's
// managed count drops with them.
func TestReleasesAndDefaults(t *testing.T) {
	cd := &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve", HeartbeatAt: now, Reachable: true}, Seq: 9, Planner: "p1"}
	docs := []views.GuestDoc{
		guest(101, &events.Desired{VMID: 101, Cores: ptr(1)}, "running", 1),
		guest(102, &events.Desired{VMID: 102, Cores: ptr(2)}, "running", 2),
	}
	es, err := planfile.Split([]byte(`[{"vmid":101,"cores":1,"name":"web"}]`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := planfile.Plan(planfile.Input{Cluster: "pve", Docs: docs, ClusterDoc: cd, Entries: es, Releases: []int{102, 999}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.PolicySource, "defaults") || !strings.HasPrefix(r.LimitsSource, "defaults") {
		t.Errorf("unpublished policy and limits should say defaults: %q %q", r.PolicySource, r.LimitsSource)
	}
	if len(r.Releases) != 1 || r.Releases[0].VMID != 102 || r.Releases[0].Status.Kind != planner.Unmanaged || !r.Changes {
		t.Errorf("releases: %+v", r.Releases)
	}
	g := r.Guests[0]
	if g.Desired != "changed" || len(g.Changed) != 1 || g.Changed[0] != "name" || len(g.Steps) != 1 || g.Steps[0].Op != events.OpSetConfig {
		t.Errorf("101: %+v", g)
	}
	// The docs were not touched: 102 still has its desired state.
	if docs[1].View.Desired == nil {
		t.Error("Plan changed the caller's views")
	}
}

// An override is applied and named; no cluster document is an error.
func TestOverrideAndNoPlanner(t *testing.T) {
	if _, err := planfile.Plan(planfile.Input{Cluster: "pve", Now: now}); err == nil {
		t.Error("no cluster document: want an error")
	}
	cd := &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve", HeartbeatAt: now, Reachable: true}, Seq: 9}
	docs := []views.GuestDoc{guest(101, nil, "running", 1)}
	es, _ := planfile.Split([]byte(`{"guests":[{"vmid":101,"power":"running","cores":2}]}`))
	in := planfile.Input{Cluster: "pve", Docs: docs, ClusterDoc: cd, Entries: es, Now: now}
	r, err := planfile.Plan(in)
	if err != nil || r.Guests[0].Steps[0].Op != events.OpSetConfig {
		t.Fatalf("%v %+v", err, r)
	}
	in.Override = func(p *planner.Policy, _ *planner.Limits) []string {
		p.Restart = events.RestartAllowed
		return []string{"restart=allowed"}
	}
	r, err = planfile.Plan(in)
	if err != nil || len(r.Overridden) != 1 || r.Policy.Restart != events.RestartAllowed {
		t.Fatalf("%v %+v", err, r)
	}
}

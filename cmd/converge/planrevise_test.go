package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// plan shows a set's publish and a rollback before they are made: plan
// -f --set NAME --prune lists the members it would release, --set refuses
// a guest of another set without --move, and plan --rollback plans the
// desired state the rollback would publish; nothing is journalled.
func TestPlanSetAndRollback(t *testing.T) {
	c := startCLIBus(t)
	pol, lim := planner.DefaultPolicy(), planner.DefaultLimits()
	c.putCluster(t, &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve", HeartbeatAt: time.Now(), Reachable: true},
		Seq: 5, Planner: "planner@test", Policy: &pol, Limits: &lim})
	// Two revisions of 101 journalled (cores 2, then 4), the views at the
	// second; 102 in set web, 103 in set db.
	rev1 := c.desire(t, 101, "--cores", "2")
	rev2 := c.desire(t, 101, "--cores", "4")
	guest := func(vmid int, seq uint64, cores int, set string) {
		c.put(t, &views.GuestDoc{View: &projector.View{VMID: vmid, Cluster: "pve", DesiredSeq: seq, ObservedSeq: seq + 100,
			Desired:  &events.Desired{VMID: vmid, Cores: &cores, Set: set},
			Observed: &events.Observed{VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: "stopped", ReadAt: time.Now(), Config: events.GuestConfig{Cores: cores, MemoryMiB: 512}}},
			Status: planner.Status{Kind: planner.Converged}})
	}
	guest(101, rev2, 4, "web")
	guest(102, 1, 1, "web")
	guest(103, 1, 1, "db")

	file := writeConfig(t, "- {vmid: 101, cores: 4}\n")
	out, code := c.cli(t, "plan", "-f", file, "--set", "web", "--prune", "-o", "json")
	var res struct {
		Releases []struct{ VMID int }
		Changes  bool
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &res); code != exitOK || err != nil ||
		len(res.Releases) != 1 || res.Releases[0].VMID != 102 || !res.Changes {
		t.Fatalf("plan -f --set web --prune: exit %d %v, want 102 released:\n%s", code, err, out)
	}
	if !strings.Contains(out, "--prune releases 102") {
		t.Errorf("the release is not said:\n%s", out)
	}
	if out, code := c.cli(t, "plan", "-f", file, "--set", "web"); code != exitOK || strings.Contains(out, "released") {
		t.Errorf("without --prune nothing is released: exit %d:\n%s", code, out)
	}
	other := writeConfig(t, "- {vmid: 103, cores: 1}\n")
	if out, code := c.cli(t, "plan", "-f", other, "--set", "web"); code != exitUsage || !strings.Contains(out, "--move") {
		t.Errorf("a guest of set db planned into web: exit %d, want 2 naming --move:\n%s", code, out)
	}
	if out, code := c.cli(t, "plan", "-f", other, "--set", "web", "--move"); code != exitOK {
		t.Errorf("with --move: exit %d:\n%s", code, out)
	}
	if out, code := c.cli(t, "plan", "--prune", "-f", file); code != exitUsage {
		t.Errorf("--prune without --set: exit %d, want 2:\n%s", code, out)
	}

	out, code = c.cli(t, "plan", "--rollback", "101", "--to", strconv.FormatUint(rev1, 10))
	if code != exitOK || !strings.Contains(out, "set_config") || !strings.Contains(out, "cores") ||
		!strings.Contains(out, "rollback of 101 to revision "+strconv.FormatUint(rev1, 10)) {
		t.Fatalf("plan --rollback: exit %d, want cores back to 2 planned:\n%s", code, out)
	}
	if out, code := c.cli(t, "plan", "--rollback", "101"); code != exitUsage {
		t.Errorf("--rollback without --to: exit %d, want 2:\n%s", code, out)
	}
	st, err := c.b.Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(context.Background()); err != nil || info.State.Msgs != 2 {
		t.Errorf("plan journalled something: %v, %d messages, want the 2 desired revisions", err, info.State.Msgs)
	}
}

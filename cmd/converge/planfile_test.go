package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// putCluster writes the cluster document, as a planner would.
func (c *cliBus) putCluster(t *testing.T, cd *views.ClusterDoc) {
	t.Helper()
	vs, err := c.b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(cd)
	f, err := vs.PutAsync(views.ClusterKey(events.DefaultCluster), body)
	if err == nil {
		_, err = f.Wait(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// plan -f through the command: the policy and limits the planner
// published, labelled overrides, -o json, and the exit codes: 0 without
// --detailed-exitcode, 0/6 with it, 2 for a rejected entry or a bad file.
func TestPlanFileCommand(t *testing.T) {
	c := startCLIBus(t)
	if out, code := c.cli(t, "plan", "--detailed-exitcode"); code != exitUsage {
		t.Errorf("--detailed-exitcode without -f: exit %d, want 2: %s", code, out)
	}
	if out, code := c.cli(t, "plan", "-f", "/nonexistent/guests.yaml"); code != exitUsage {
		t.Errorf("a missing file: exit %d, want 2: %s", code, out)
	}
	pol, lim := planner.DefaultPolicy(), planner.DefaultLimits()
	c.putCluster(t, &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve", HeartbeatAt: time.Now(), Reachable: true},
		Seq: 5, Planner: "planner@test", Policy: &pol, Limits: &lim})
	cores := 1
	c.put(t, &views.GuestDoc{View: &projector.View{VMID: 101, Cluster: "pve", DesiredSeq: 2, ObservedSeq: 3,
		Desired:  &events.Desired{VMID: 101, Cores: &cores},
		Observed: &events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running", ReadAt: time.Now(), Config: events.GuestConfig{Cores: 1, MemoryMiB: 512}}},
		Status: planner.Status{Kind: planner.Converged}})

	same := writeConfig(t, "- {vmid: 101, cores: 1}\n")
	out, code := c.cli(t, "plan", "-f", same, "--detailed-exitcode")
	if code != exitOK || !strings.Contains(out, "policy: published by planner planner@test") || !strings.Contains(out, "changes: false") {
		t.Errorf("the desired state in force: exit %d, want 0:\n%s", code, out)
	}
	more := writeConfig(t, "- {vmid: 101, cores: 2}\n")
	if out, code := c.cli(t, "plan", "-f", more); code != exitOK || !strings.Contains(out, "now set_config") || !strings.Contains(out, "changed (cores)") {
		t.Errorf("a change without --detailed-exitcode: exit %d, want 0:\n%s", code, out)
	}
	if out, code := c.cli(t, "plan", "-f", more, "--detailed-exitcode"); code != exitChanges {
		t.Errorf("a change with --detailed-exitcode: exit %d, want %d:\n%s", code, exitChanges, out)
	}
	out, code = c.cli(t, "plan", "-f", more, "-o", "json", "--override-restart", "allowed")
	var res struct {
		Overridden []string
		Guests     []struct {
			Steps []struct{ Op string }
		}
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Guests) != 1 || len(res.Guests[0].Steps) == 0 ||
		res.Guests[0].Steps[0].Op != "set_config" || len(res.Overridden) != 1 || res.Overridden[0] != "restart=allowed" {
		t.Errorf("-o json with an override: exit %d %v:\n%s", code, err, out)
	}
	if out, _ := c.cli(t, "plan", "-f", more, "--override-guard-min", "9"); !strings.Contains(out, "OVERRIDDEN by flags") {
		t.Errorf("an override is not labelled:\n%s", out)
	}
	bad := writeConfig(t, "- {vmid: 101, cores: 0}\n- {vmid: 101, cores: 2}\n")
	if out, code := c.cli(t, "plan", "-f", bad); code != exitUsage || !strings.Contains(out, "desire -f would refuse this file") || !strings.Contains(out, "now set_config") {
		t.Errorf("a rejected entry: exit %d, want 2 after the plan:\n%s", code, out)
	}
	st, err := c.b.Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(context.Background()); err != nil || info.State.Msgs != 0 {
		t.Errorf("plan -f journalled something: %v %+v", err, info)
	}
}

package pve_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// TestSimClusterFacts: the release from GET /version, and the HA mode from
// the groups endpoint: groups on PVE 8 (with or without groups), rules on
// PVE 9 once groups are migrated (or never existed), groups on a PVE 9
// cluster mid-upgrade (pve-ha-manager src/PVE/HA/Config.pm
// have_groups_been_migrated; src/PVE/API2/HA/Groups.pm index).
func TestSimClusterFacts(t *testing.T) {
	for _, tc := range []struct {
		version, release string
		group            bool
		want             string
	}{
		{"8", "8.4", false, events.HAGroups},
		{"8", "8.4", true, events.HAGroups},
		{"9", "9.2", false, events.HARules},
		{"9", "9.2", true, events.HAGroups}, // mid-upgrade
	} {
		s := startSim(t, pvesim.Options{Nodes: 2, Version: tc.version})
		if tc.group {
			if err := s.AddHAGroup("prod", "pve1,pve2:2", false); err != nil {
				t.Fatal(err)
			}
		}
		c := newClient(t, s)
		f, err := c.ClusterFacts(tctx(t))
		if err != nil {
			t.Fatalf("%s group=%v: %v", tc.version, tc.group, err)
		}
		if f.Release != tc.release || f.HA != tc.want || f.Version == "" {
			t.Errorf("%s group=%v: facts %+v, want release %s, HA %s", tc.version, tc.group, f, tc.release, tc.want)
		}
		if tc.group && tc.version == "9" {
			// The cluster finishes its upgrade: groups become rules.
			s.MigrateHAGroups()
			if f, err = c.ClusterFacts(tctx(t)); err != nil || f.HA != events.HARules {
				t.Errorf("after the groups' migration: %+v %v, want rules", f, err)
			}
		}
	}
}

// TestSimSetHARule: converge's rule is created, changed and deleted, and
// the HA stack moves the guest by it; the rules list places each HA guest
// (src/PVE/API2/HA/Rules.pm).
func TestSimSetHARule(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 3, Version: "9", HADelay: time.Hour})
	for _, id := range []int{100, 101} {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id, Running: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHAResource(id, "started"); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}
	settle := func() {
		t.Helper()
		s.RunHA()
		if err := s.WaitHA(ctx); err != nil {
			t.Fatal(err)
		}
	}
	placements := func() map[int]*events.HAPlacement {
		t.Helper()
		rules, err := c.HARules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ha, err := c.HAResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pve.HAPlacements(rules, ha)
	}
	if p := placements(); p[100].Rule != "" || p[101].Rule != "" {
		t.Fatalf("placements before any rule: %+v %+v", p[100], p[101])
	}
	if err := c.SetHARule(ctx, ref, "converge-100", []string{"pve2"}, true); err != nil {
		t.Fatal(err)
	}
	settle()
	if g, _ := s.Guest(100); g.Node != "pve2" {
		t.Fatalf("guest on %s after its rule, want pve2 (HA moves it)", g.Node)
	}
	if p := placements(); !p[100].Equal(&events.HAPlacement{Rule: "converge-100", Nodes: []string{"pve2"}}) || !p[100].Owned(100) {
		t.Fatalf("placement %+v", p[100])
	}
	// Create again (a predecessor made it): the rule is changed instead.
	if err := c.SetHARule(ctx, ref, "converge-100", []string{"pve3"}, true); err != nil {
		t.Fatal(err)
	}
	settle()
	if g, _ := s.Guest(100); g.Node != "pve3" {
		t.Fatalf("guest on %s, want pve3", g.Node)
	}
	for _, m := range s.HAMoves() {
		if m.Cause != "node-affinity" {
			t.Errorf("HA move %+v: want only moves by the node-affinity rule", m)
		}
	}
	// Deleted, then deleted again: done both times; a change of a deleted
	// rule creates it.
	for range 2 {
		if err := c.SetHARule(ctx, ref, "converge-100", nil, false); err != nil {
			t.Fatal(err)
		}
	}
	if p := placements(); p[100].Rule != "" {
		t.Fatalf("placement after delete %+v", p[100])
	}
	if err := c.SetHARule(ctx, ref, "converge-100", []string{"pve1"}, false); err != nil {
		t.Fatal(err)
	}
	if p := placements(); !slices.Equal(p[100].Nodes, []string{"pve1"}) {
		t.Fatalf("placement after a change of a deleted rule %+v", p[100])
	}
	// Never another rule than the guest's own.
	if err := c.SetHARule(ctx, ref, "prod", []string{"pve1"}, true); pve.Classify(err) != pve.ClassTerminal {
		t.Fatalf("writing an operator's rule: %v, want a terminal refusal before any call", err)
	}
}

// TestSimSetHARuleRefused: rule writes Proxmox refuses are terminal: the
// same write fails again until something changes. An infeasible rule (a
// positive resource-affinity pair in two node-affinity rules:
// ResourceAffinity.pm) and any rule write on a cluster mid-upgrade
// (Rules.pm: "ha groups have not been migrated yet").
func TestSimSetHARuleRefused(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, Version: "9", HADelay: time.Hour})
	for _, id := range []int{100, 101} {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id, Running: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHAResource(id, "started"); err != nil {
			t.Fatal(err)
		}
	}
	for _, form := range []url.Values{
		{"type": {"resource-affinity"}, "rule": {"pair"}, "resources": {"vm:100,vm:101"}, "affinity": {"positive"}},
		{"type": {"node-affinity"}, "rule": {"prod"}, "resources": {"vm:101"}, "nodes": {"pve1"}},
	} {
		if code, body := pvesimtest.Call(t, s, http.MethodPost, "/cluster/ha/rules", form); code != http.StatusOK {
			t.Fatalf("%v: %d %s", form, code, body)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}
	err := c.SetHARule(ctx, ref, "converge-100", []string{"pve2"}, true)
	if err == nil || pve.Classify(err) != pve.ClassTerminal || !strings.Contains(err.Error(), "is invalid") {
		t.Fatalf("infeasible rule: %v (class %v), want a terminal refusal", err, pve.Classify(err))
	}
	if err := s.AddHAGroup("x", "pve1", false); err != nil { // mid-upgrade: rule writes refused
		t.Fatal(err)
	}
	err = c.SetHARule(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 101}, "converge-101", []string{"pve1"}, true)
	if err == nil || pve.Classify(err) != pve.ClassTerminal {
		t.Fatalf("rule write on a cluster mid-upgrade: %v (class %v), want a terminal refusal", err, pve.Classify(err))
	}
}

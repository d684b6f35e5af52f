package pve

import (
	"testing"

	"github.com/converge-pve/converge/events"
)

// TestHAPlacements: each HA guest's placement is its enabled
// node-affinity rule, else the one a positive resource-affinity rule
// binds it to; disabled and infeasible rules place nothing (converge's
// own are kept, marked inactive), negative affinity binds nothing, and
// failback 0 is carried (pve-ha-manager: a resource is in at most one
// node-affinity rule, and the resources of one positive rule in at most
// one, src/PVE/HA/Rules/ResourceAffinity.pm).
func TestHAPlacements(t *testing.T) {
	ha := []HAResource{{SID: "vm:100", VMID: 100}, {SID: "vm:101", VMID: 101}, {SID: "ct:102", VMID: 102},
		{SID: "vm:103", VMID: 103, NoFailback: true}, {SID: "vm:104", VMID: 104}, {SID: "vm:105", VMID: 105},
		{SID: "vm:106", VMID: 106}, {SID: "vm:107", VMID: 107}}
	rules := []HARule{
		{Rule: "converge-100", Type: "node-affinity", Resources: []string{"vm:100"}, Nodes: []string{"pve2"}},
		{Rule: "pair", Type: "resource-affinity", Affinity: "positive", Resources: []string{"ct:102", "vm:100"}},
		{Rule: "apart", Type: "resource-affinity", Affinity: "negative", Resources: []string{"vm:100", "vm:103"}},
		{Rule: "prod", Type: "node-affinity", Resources: []string{"vm:101"}, Nodes: []string{"pve1", "pve2:2"}, Strict: true},
		{Rule: "off", Type: "node-affinity", Resources: []string{"vm:104"}, Nodes: []string{"pve3"}, Disabled: true},
		{Rule: "bad", Type: "node-affinity", Resources: []string{"vm:105"}, Nodes: []string{"pve3"}, Errors: true},
		{Rule: "other", Type: "node-affinity", Resources: []string{"vm:999"}, Nodes: []string{"pve3"}},
		// converge's own rules, inactive: kept, saying why.
		{Rule: "converge-106", Type: "node-affinity", Resources: []string{"vm:106"}, Nodes: []string{"pve2"}, Disabled: true},
		{Rule: "converge-107", Type: "node-affinity", Resources: []string{"vm:107"}, Nodes: []string{"pve2"}, Errors: true},
	}
	got := HAPlacements(rules, ha)
	want := map[int]events.HAPlacement{
		100: {Rule: "converge-100", Nodes: []string{"pve2"}},
		101: {Rule: "prod", Nodes: []string{"pve1", "pve2:2"}, Strict: true},
		102: {Rule: "converge-100", Via: "vm:100", Nodes: []string{"pve2"}},
		103: {NoFailback: true}, 104: {}, 105: {},
		106: {Rule: "converge-106", Nodes: []string{"pve2"}, Inactive: "disabled"},
		107: {Rule: "converge-107", Nodes: []string{"pve2"}, Inactive: "infeasible"},
	}
	if len(got) != len(want) {
		t.Fatalf("placements for %d guests, want %d: %v", len(got), len(want), got)
	}
	for vmid, w := range want {
		if !got[vmid].Equal(&w) {
			t.Errorf("guest %d: %+v, want %+v", vmid, got[vmid], w)
		}
	}
	if !got[100].Owned(100) || got[102].Owned(102) || got[101].Owned(101) {
		t.Errorf("ownership: only converge-100 of guest 100 is converge's own")
	}
	if !got[101].Allows("pve2") || got[101].Allows("pve3") {
		t.Errorf("Allows reads node:priority entries by name")
	}
}

// TestHAResourcesFailback: failback is read however Proxmox types it; an
// absent one is the default, 1 (pve-ha-manager Resources.pm).
func TestHAResourcesFailback(t *testing.T) {
	ha, err := decodeHAResources([]byte(`[{"sid":"vm:100","failback":0},{"sid":"vm:101"},{"sid":"vm:102","failback":"0"},{"sid":"vm:103","failback":1}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{100: true, 101: false, 102: true, 103: false}
	for _, r := range ha {
		if r.NoFailback != want[r.VMID] {
			t.Errorf("guest %d: NoFailback %v, want %v", r.VMID, r.NoFailback, want[r.VMID])
		}
	}
	if len(ha) != 4 {
		t.Fatalf("%d resources, want 4", len(ha))
	}
}

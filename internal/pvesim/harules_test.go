package pvesim_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// haSim is a 3-node PVE 9 cluster with VMs 100-103 on pve1, all HA
// managed, the HA stack stepped by hand.
func haSim(t *testing.T, version string) *pvesim.Sim {
	t.Helper()
	s := startSim(t, pvesim.Options{Nodes: 3, Version: version, HADelay: time.Hour})
	for id := 100; id <= 103; id++ {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id, Running: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHAResource(id, ""); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func stepHA(t *testing.T, s *pvesim.Sim) {
	t.Helper()
	s.RunHA()
	if err := s.WaitHA(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestHARulesCRUD pins API2/HA/Rules.pm: create, read ($get_api_ha_rule:
// rule, digest, order, nodes and resources encoded sorted, a priority only
// when not 0), the type and resource filters, update, delete, and the
// create's refusals (already defined, unmanaged resources, non-existent
// nodes, all prefixed "create ha rule failed: " by lock_ha_domain), and
// "no such ha rule" on read.
func TestHARulesCRUD(t *testing.T) {
	s := haSim(t, "9")
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "pin", "type": "node-affinity",
		"resources": "vm:101,vm:100", "nodes": "pve2:2,pve3", "strict": 1}); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "GET", "/cluster/ha/rules/pin", nil)
	m, _ := data.(map[string]any)
	if err != nil || m["resources"] != "vm:100,vm:101" || m["nodes"] != "pve2:2,pve3" || m["strict"] != 1.0 || m["order"] != 1.0 || m["digest"] == "" {
		t.Fatalf("read %v %v", data, err)
	}
	_, err = callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "pin", "type": "node-affinity", "resources": "vm:102", "nodes": "pve2"})
	errContains(t, err, "create ha rule failed: HA rule 'pin' already defined")
	_, err = callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "xx", "type": "node-affinity", "resources": "vm:102,vm:999", "nodes": "pve2"})
	errContains(t, err, "cannot use unmanaged resource(s) vm:999.")
	_, err = callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "xx", "type": "node-affinity", "resources": "vm:102", "nodes": "pve2,nowhere"})
	errContains(t, err, "cannot use non-existent node(s) nowhere.")
	_, err = callData(t, s, "GET", "/cluster/ha/rules/nope", nil)
	errContains(t, err, "no such ha rule 'nope'")
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "apart", "type": "resource-affinity", "resources": "vm:102,vm:103", "affinity": "negative"}); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "GET", "/cluster/ha/rules?type=resource-affinity", nil)
	if l, _ := data.([]any); len(l) != 1 || l[0].(map[string]any)["rule"] != "apart" {
		t.Fatalf("type filter %v", data)
	}
	data, _ = callData(t, s, "GET", "/cluster/ha/rules?resource=vm:100", nil)
	if l, _ := data.([]any); len(l) != 1 || l[0].(map[string]any)["rule"] != "pin" {
		t.Fatalf("resource filter %v", data)
	}
	_, err = callData(t, s, "PUT", "/cluster/ha/rules/gone", map[string]any{"type": "node-affinity", "comment": "x"})
	errContains(t, err, "HA rule 'gone' does not exist")
	_, err = callData(t, s, "PUT", "/cluster/ha/rules/pin", map[string]any{"type": "resource-affinity", "affinity": "positive"})
	errContains(t, err, "update HA rules failed: unexpected property 'type'")
	_, err = callData(t, s, "PUT", "/cluster/ha/rules/pin", map[string]any{"type": "node-affinity", "affinity": "positive"})
	errContains(t, err, "update HA rules failed: unexpected property 'affinity'")
	_, err = callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "yy", "type": "resource-affinity", "resources": "vm:102,vm:103"})
	errContains(t, err, "missing value for required option 'affinity'")
	_, err = callData(t, s, "PUT", "/cluster/ha/rules/pin", map[string]any{"type": "node-affinity", "digest": "0000"})
	errContains(t, err, "detected modified configuration")
	if _, err := callData(t, s, "DELETE", "/cluster/ha/rules/apart", nil); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "GET", "/cluster/ha/rules", nil)
	if l, _ := data.([]any); len(l) != 1 {
		t.Fatalf("after delete %v", data)
	}
}

// TestHARulesFeasibility pins Rules.pm check_feasibility through
// $assert_feasibility: a PVE::Exception (400 "Rule '…' is invalid." with
// the errors by option) raised inside lock_ha_domain, which dies with
// "create ha rule failed: $err", the exception stringified: a 500 whose
// message carries the code and the errors
// (NodeAffinity.pm check_single_resource_reference,
// ResourceAffinity.pm check_resource_affinity_resources_count,
// check_negative_resource_affinity_resources_count,
// check_inter_resource_affinity_rules_consistency, Rules.pm
// check_single_node_affinity_per_positive_resource_affinity_rule,
// check_single_priority_node_affinity_in_resource_affinity_rules,
// check_negative_resource_affinity_node_affinity_consistency).
// The list carries a rule's errors as "errors".
func TestHARulesFeasibility(t *testing.T) {
	s := haSim(t, "9")
	post := func(p url.Values) (int, string) {
		t.Helper()
		hdr := tokenHdr()
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
		res, m := raw(t, "POST", s.URL()+"/cluster/ha/rules", hdr, p.Encode())
		msg, _ := m["message"].(string)
		return res.StatusCode, msg
	}
	ok := func(p url.Values) {
		t.Helper()
		if code, msg := post(p); code != 200 {
			t.Fatalf("%v: %d %s", p, code, msg)
		}
	}
	refused := func(p url.Values, want string) {
		t.Helper()
		full := "create ha rule failed: 400 Rule '" + p.Get("rule") + "' is invalid.\nresources: " + want + "\n"
		if code, msg := post(p); code != 500 || msg != full {
			t.Errorf("%v: %d %q, want %q", p, code, msg, full)
		}
	}
	ok(url.Values{"rule": {"ra"}, "type": {"node-affinity"}, "resources": {"vm:100"}, "nodes": {"pve2"}})
	refused(url.Values{"rule": {"rb"}, "type": {"node-affinity"}, "resources": {"vm:100"}, "nodes": {"pve3"}},
		"resource 'vm:100' is already used in another node affinity rule")
	refused(url.Values{"rule": {"rc"}, "type": {"resource-affinity"}, "resources": {"vm:101"}, "affinity": {"positive"}},
		"rule is ineffective as there are less than two resources")
	refused(url.Values{"rule": {"rd"}, "type": {"resource-affinity"}, "resources": {"vm:100,vm:101,vm:102,vm:103"}, "affinity": {"negative"}},
		"rule defines more resources than available nodes")
	ok(url.Values{"rule": {"re"}, "type": {"node-affinity"}, "resources": {"vm:102"}, "nodes": {"pve3"}})
	refused(url.Values{"rule": {"rf"}, "type": {"resource-affinity"}, "resources": {"vm:100,vm:102"}, "affinity": {"positive"}},
		"resources are in multiple node affinity rules")
	ok(url.Values{"rule": {"rg"}, "type": {"resource-affinity"}, "resources": {"vm:101,vm:103"}, "affinity": {"positive"}})
	refused(url.Values{"rule": {"rh"}, "type": {"resource-affinity"}, "resources": {"vm:101,vm:103"}, "affinity": {"negative"}},
		"rule shares two or more resources with a positive resource affinity rule")
	refused(url.Values{"rule": {"ri"}, "type": {"node-affinity"}, "resources": {"vm:101"}, "nodes": {"pve1:2,pve2"}},
		"resources are in a resource affinity rule and cannot be in a node affinity rule with multiple priorities")
	if _, err := callData(t, s, "PUT", "/cluster/ha/rules/re", map[string]any{"type": "node-affinity", "nodes": "pve3:2,pve1"}); err != nil {
		t.Fatal(err)
	}
	refused(url.Values{"rule": {"rj"}, "type": {"resource-affinity"}, "resources": {"vm:102,vm:100"}, "affinity": {"negative"}},
		"resources are in node affinity rules with multiple priorities")
	// Two resources restricted to one node cannot be kept apart.
	if _, err := callData(t, s, "PUT", "/cluster/ha/rules/re", map[string]any{"type": "node-affinity", "nodes": "pve2"}); err != nil {
		t.Fatal(err)
	}
	refused(url.Values{"rule": {"rk"}, "type": {"resource-affinity"}, "resources": {"vm:100,vm:102"}, "affinity": {"negative"}},
		"two or more resources are restricted to less nodes than available to the resources")
	// A disabled rule takes no part; the list shows another's errors.
	ok(url.Values{"rule": {"rl"}, "type": {"node-affinity"}, "resources": {"vm:100"}, "nodes": {"pve3"}, "disable": {"1"}})
	data, _ := callData(t, s, "GET", "/cluster/ha/rules/rl", nil)
	if m, _ := data.(map[string]any); m["disable"] != 1.0 || m["errors"] != nil {
		t.Fatalf("disabled rule %v", data)
	}
}

// TestHARulesVersion8: PVE 8 has no rules API; its paths answer 501 as
// any unknown path of pve-http-server.
func TestHARulesVersion8(t *testing.T) {
	s := haSim(t, "8")
	_, err := callData(t, s, "GET", "/cluster/ha/rules", nil)
	errContains(t, err, "not implemented")
}

// TestHAGroupsMigrated pins API2/HA/Groups.pm and Resources.pm on PVE 9
// without groups (Config.pm have_groups_been_migrated).
func TestHAGroupsMigrated(t *testing.T) {
	s := haSim(t, "9")
	_, err := callData(t, s, "GET", "/cluster/ha/groups", nil)
	errContains(t, err, "cannot index groups: ha groups have been migrated to rules")
	_, err = callData(t, s, "POST", "/cluster/ha/groups", map[string]any{"group": "gg", "nodes": "pve1"})
	errContains(t, err, "cannot create group: ha groups have been migrated to rules")
	_, err = callData(t, s, "PUT", "/cluster/ha/resources/vm:100", map[string]any{"group": "gg"})
	errContains(t, err, "invalid parameter 'group': ha groups have been migrated to rules")
}

// TestHAGroupsMidUpgrade: a PVE 9 cluster with groups lists them as
// generated rules (migrate_groups_to_rules), refuses rule writes until
// the CRM migrates them (Manager.pm $migrate_group_persistently), and
// moves a resource to its group's node.
func TestHAGroupsMidUpgrade(t *testing.T) {
	s := haSim(t, "9")
	if err := s.AddHAGroup("prefer3", "pve3:2,pve2", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHAGroup(100, "prefer3"); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "GET", "/cluster/ha/rules/ha-group-prefer3", nil)
	m, _ := data.(map[string]any)
	if err != nil || m["nodes"] != "pve2,pve3:2" || m["comment"] != "Generated from HA group 'prefer3'." || m["strict"] != 1.0 {
		t.Fatalf("generated rule %v %v", data, err)
	}
	_, err = callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "xx", "type": "node-affinity", "resources": "vm:101", "nodes": "pve2"})
	errContains(t, err, "cannot create ha rule: ha groups have not been migrated yet")
	stepHA(t, s)
	if g, _ := s.Guest(100); g.Node != "pve3" {
		t.Fatalf("vm 100 on %s", g.Node)
	}
	s.MigrateHAGroups()
	_, err = callData(t, s, "GET", "/cluster/ha/groups", nil)
	errContains(t, err, "have been migrated to rules")
	if _, err := callData(t, s, "GET", "/cluster/ha/rules/ha-group-prefer3", nil); err != nil {
		t.Fatal(err)
	}
}

// TestHAGroupsVersion8: groups CRUD and a resource's group on PVE 8.
func TestHAGroupsVersion8(t *testing.T) {
	s := haSim(t, "8")
	if _, err := callData(t, s, "POST", "/cluster/ha/groups", map[string]any{"group": "gg", "nodes": "pve2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/cluster/ha/resources/vm:100", map[string]any{"group": "gg"}); err != nil {
		t.Fatal(err)
	}
	data, _ := callData(t, s, "GET", "/cluster/ha/resources/vm:100", nil)
	if m, _ := data.(map[string]any); m["group"] != "gg" {
		t.Fatalf("resource %v", data)
	}
	_, err := callData(t, s, "DELETE", "/cluster/ha/groups/gg", nil)
	errContains(t, err, "ha group is used by service 'vm:100'")
}

// TestHANodeAffinityMoves: after a rule is created, the CRM's next round
// migrates the resources not on the rule's highest-priority nodes (as
// root@pam), recorded as HAMoves with cause node-affinity; a delete with
// purge (default 1) drops the sid from the rules (delete_service_from_config).
func TestHANodeAffinityMoves(t *testing.T) {
	s := haSim(t, "9")
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "rr", "type": "node-affinity", "resources": "vm:100,vm:101", "nodes": "pve2:2,pve3:2,pve1"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Node != "pve1" {
		t.Fatal("moved before the CRM's round")
	}
	stepHA(t, s)
	g100, _ := s.Guest(100)
	g101, _ := s.Guest(101)
	if g100.Node == "pve1" || g101.Node == "pve1" || g100.Node == g101.Node {
		t.Fatalf("placed on %s, %s (least loaded first)", g100.Node, g101.Node)
	}
	moves := s.HAMoves()
	if len(moves) != 2 || moves[0].Cause != "node-affinity" || moves[0].SID != "vm:100" {
		t.Fatalf("moves %+v", moves)
	}
	if _, err := callData(t, s, "DELETE", "/cluster/ha/resources/vm:100", nil); err != nil {
		t.Fatal(err)
	}
	data, _ := callData(t, s, "GET", "/cluster/ha/rules/rr", nil)
	if m, _ := data.(map[string]any); m["resources"] != "vm:101" {
		t.Fatalf("after purge %v", data)
	}
}

// TestHAPlacementFailbackAndStopped pins Manager.pm: a resource requested
// stopped is not placed (next_state_stopped); with failback 0 a resource
// stays on a node its rule allows (select_service_node): any node for a
// non-strict rule (plugin_compile adds the others at priority -1), only
// the rule's nodes for a strict one.
func TestHAPlacementFailbackAndStopped(t *testing.T) {
	s := haSim(t, "9")
	for _, c := range []struct {
		sid  string
		body map[string]any
	}{
		{"vm:101", map[string]any{"failback": 0}},
		{"vm:102", map[string]any{"failback": 0}},
		{"vm:103", map[string]any{"state": "stopped"}},
	} {
		if _, err := callData(t, s, "PUT", "/cluster/ha/resources/"+c.sid, c.body); err != nil {
			t.Fatal(err)
		}
	}
	stepHA(t, s)
	for _, r := range []map[string]any{
		{"rule": "loose", "type": "node-affinity", "resources": "vm:101,vm:103", "nodes": "pve2"},
		{"rule": "tight", "type": "node-affinity", "resources": "vm:102", "nodes": "pve3", "strict": 1},
	} {
		if _, err := callData(t, s, "POST", "/cluster/ha/rules", r); err != nil {
			t.Fatal(err)
		}
	}
	stepHA(t, s)
	for vmid, want := range map[int]string{101: "pve1", 102: "pve3", 103: "pve1"} {
		if g, _ := s.Guest(vmid); g.Node != want {
			t.Errorf("vm %d on %s, want %s", vmid, g.Node, want)
		}
	}
}

// TestHADeletePurge pins Config.pm delete_service_from_config: purge=0
// keeps the sid in the rules; a guest destroyed with purge (qemu-server's
// destroy_vm calls it with purge) leaves them, and a rule left without
// resources is deleted.
func TestHADeletePurge(t *testing.T) {
	s := haSim(t, "9")
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 110}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHAResource(110, "stopped"); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "keep", "type": "node-affinity", "resources": "vm:100,vm:110", "nodes": "pve1"}); err != nil {
		t.Fatal(err)
	}
	if code, _ := send(t, s, "DELETE", "/cluster/ha/resources/vm:100", url.Values{"purge": {"0"}}); code != 200 {
		t.Fatal(code)
	}
	data, _ := callData(t, s, "GET", "/cluster/ha/rules/keep", nil)
	if m, _ := data.(map[string]any); m["resources"] != "vm:100,vm:110" {
		t.Fatalf("purge=0 %v", data)
	}
	upid, err := callData(t, s, "DELETE", "/nodes/pve1/qemu/110?purge=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUPID(t, s, upid)
	_, err = callData(t, s, "DELETE", "/cluster/ha/resources/vm:999", nil)
	errContains(t, err, "not HA managed")
	data, _ = callData(t, s, "GET", "/cluster/ha/rules/keep", nil)
	if m, _ := data.(map[string]any); m["resources"] != "vm:100" {
		t.Fatalf("after destroy %v", data)
	}
}

package pvesim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestHAResourceAffinity pins ResourceAffinity.pm through the CRM: a
// negative rule separates resources sharing a node, a positive partner
// follows its bundle, and GET …/migrate shows the positive partner as a
// dependent-ha-resource and a negative partner's node as not allowed,
// with blocking-ha-resources cause resource-affinity
// (Config.pm get_resource_motion_info; qemu-server and pve-container
// migrate_vm_precondition).
func TestHAResourceAffinity(t *testing.T) {
	s := haSim(t, "9")
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "apart", "type": "resource-affinity", "resources": "vm:100,vm:101", "affinity": "negative"}); err != nil {
		t.Fatal(err)
	}
	stepHA(t, s)
	g100, _ := s.Guest(100)
	g101, _ := s.Guest(101)
	if g100.Node == g101.Node {
		t.Fatalf("negative affinity left both on %s", g100.Node)
	}
	if m := s.HAMoves(); len(m) != 1 || m[0].SID != "vm:101" || m[0].Cause != "resource-affinity" {
		t.Fatalf("moves %+v", m)
	}
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "together", "type": "resource-affinity", "resources": "vm:102,vm:103", "affinity": "positive"}); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "GET", "/nodes/pve1/qemu/102/migrate", nil)
	m, _ := data.(map[string]any)
	if dep, _ := m["dependent-ha-resources"].([]any); err != nil || len(dep) != 1 || dep[0] != "vm:103" {
		t.Fatalf("precondition %v %v", data, err)
	}
	data, _ = callData(t, s, "GET", "/nodes/pve1/qemu/100/migrate", nil)
	m, _ = data.(map[string]any)
	na, _ := m["not_allowed_nodes"].(map[string]any)
	blocked, _ := na[g101.Node].(map[string]any)
	if b, _ := blocked["blocking-ha-resources"].([]any); len(b) != 1 || b[0].(map[string]any)["cause"] != "resource-affinity" {
		t.Fatalf("not allowed %v", m)
	}
	// A request takes the positive partner along (queue_resource_motion);
	// its answer names it (comigrated-resources).
	data, err = callData(t, s, "POST", "/cluster/ha/resources/vm:102/migrate", map[string]any{"node": "pve3"})
	if m, _ := data.(map[string]any); err != nil || fmt.Sprint(m["comigrated-resources"]) != "[vm:103]" {
		t.Fatalf("migrate answer %v %v", data, err)
	}
	// A request to a negative partner's node is blocked (blocking-resources)
	// and dropped by the CRM.
	data, _ = callData(t, s, "POST", "/cluster/ha/resources/vm:100/migrate", map[string]any{"node": g101.Node})
	if m, _ := data.(map[string]any); m["blocking-resources"] == nil {
		t.Fatalf("migrate answer %v", data)
	}
	stepHA(t, s)
	g102, _ := s.Guest(102)
	g103, _ := s.Guest(103)
	if g102.Node != "pve3" || g103.Node != "pve3" {
		t.Fatalf("bundle on %s, %s", g102.Node, g103.Node)
	}
	if g, _ := s.Guest(100); g.Node != g100.Node {
		t.Fatalf("blocked request moved vm 100 to %s", g.Node)
	}
}

// TestHARequestAgainstNodeAffinity: Proxmox 9 runs an HA migrate request
// to a node its rule does not prefer (next_state_started takes the
// command as given); the CRM's next round moves it back.
func TestHARequestAgainstNodeAffinity(t *testing.T) {
	s := haSim(t, "9")
	if _, err := callData(t, s, "POST", "/cluster/ha/rules", map[string]any{"rule": "home", "type": "node-affinity", "resources": "vm:100", "nodes": "pve1"}); err != nil {
		t.Fatal(err)
	}
	stepHA(t, s)
	if _, err := callData(t, s, "POST", "/cluster/ha/resources/vm:100/migrate", map[string]any{"node": "pve2"}); err != nil {
		t.Fatal(err)
	}
	stepHA(t, s)
	if g, _ := s.Guest(100); g.Node != "pve1" {
		t.Fatalf("vm 100 on %s", g.Node)
	}
	m := s.HAMoves()
	if len(m) != 2 || m[0].Cause != "request" || m[1].Cause != "node-affinity" || m[1].To != "pve1" {
		t.Fatalf("moves %+v", m)
	}
}

// TestHARebalance drives the load balancer (Manager.pm load_balance)
// round by round: it keeps moving guests as their usage changes, every
// move in a round is recorded with it, no move breaks a node-affinity or
// negative resource-affinity rule, a positive bundle moves together, and
// the tasks run as root@pam. The same seed gives the same moves.
func TestHARebalance(t *testing.T) {
	run := func() []pvesim.HAMove {
		s := startSim(t, pvesim.Options{Nodes: 3, Version: "9", HADelay: time.Hour, Seed: 7})
		for id := 100; id < 108; id++ {
			if err := s.AddGuest(pvesim.GuestSpec{VMID: id, Running: true, Cores: 1 + id%3}); err != nil {
				t.Fatal(err)
			}
			if err := s.AddHAResource(id, ""); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []map[string]any{
			{"rule": "pinned", "type": "node-affinity", "resources": "vm:100", "nodes": "pve1", "strict": 1},
			{"rule": "pair", "type": "resource-affinity", "resources": "vm:101,vm:102", "affinity": "positive"},
			{"rule": "apart", "type": "resource-affinity", "resources": "vm:103,vm:104", "affinity": "negative"},
		} {
			if _, err := callData(t, s, "POST", "/cluster/ha/rules", r); err != nil {
				t.Fatal(err)
			}
		}
		stepHA(t, s)
		rounds := map[int]bool{}
		for i := 0; i < 300; i++ {
			s.RebalanceNow()
			stepHA(t, s)
			g100, _ := s.Guest(100)
			g101, _ := s.Guest(101)
			g102, _ := s.Guest(102)
			g103, _ := s.Guest(103)
			g104, _ := s.Guest(104)
			if g100.Node != "pve1" || g101.Node != g102.Node || g103.Node == g104.Node {
				t.Fatalf("round %d broke a rule: %s %s/%s %s/%s", i, g100.Node, g101.Node, g102.Node, g103.Node, g104.Node)
			}
		}
		if s.HARebalanceRounds() != 300 {
			t.Fatalf("rounds %d", s.HARebalanceRounds())
		}
		var moves []pvesim.HAMove
		for _, m := range s.HAMoves() {
			if m.Cause == "rebalance" {
				rounds[m.Round] = true
				moves = append(moves, m)
			}
		}
		if len(rounds) < 20 {
			t.Fatalf("%d rounds with moves", len(rounds))
		}
		for _, task := range s.Tasks() {
			if task.Type == "qmigrate" && task.User != pvesim.DefaultUser {
				t.Fatalf("task %+v", task)
			}
		}
		t.Logf("%d rebalance moves in %d rounds", len(moves), len(rounds))
		return moves
	}
	a, b := run(), run()
	if len(a) != len(b) {
		t.Fatalf("not reproducible: %d vs %d moves", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("move %d: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// TestHARebalanceVersion8: no load balancer before PVE 9; New refuses
// HARebalance there.
func TestHARebalanceVersion8(t *testing.T) {
	if _, err := pvesim.New(pvesim.Options{Version: "8", HARebalance: time.Second}); err == nil {
		t.Fatal("HARebalance accepted on PVE 8")
	}
	s := haSim(t, "8")
	s.RebalanceNow()
	if s.HARebalanceRounds() != 0 || len(s.HAMoves()) != 0 {
		t.Fatal("rebalanced on PVE 8")
	}
}

// TestHAGroupMigrationFailback pins Groups.pm migrate_groups_to_resources
// as the CRM's $migrate_group_persistently applies it: a resource of a
// nofailback group gets failback 0 and loses its group; the group's rule
// is written out and can then be changed.
func TestHAGroupMigrationFailback(t *testing.T) {
	s := haSim(t, "9")
	if err := s.AddHAGroup("sticky", "pve2", false); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/cluster/ha/groups/sticky", map[string]any{"nofailback": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "PUT", "/cluster/ha/resources/vm:100", map[string]any{"group": "sticky"}); err != nil {
		t.Fatal(err)
	}
	data, _ := callData(t, s, "GET", "/cluster/ha/resources/vm:100", nil)
	if m, _ := data.(map[string]any); m["group"] != "sticky" {
		t.Fatalf("mid-upgrade resource %v", data)
	}
	s.MigrateHAGroups()
	data, _ = callData(t, s, "GET", "/cluster/ha/resources/vm:100", nil)
	if m, _ := data.(map[string]any); m["group"] != nil || m["failback"] != 0.0 {
		t.Fatalf("migrated resource %v", data)
	}
	if _, err := callData(t, s, "PUT", "/cluster/ha/rules/ha-group-sticky", map[string]any{"type": "node-affinity", "nodes": "pve3"}); err != nil {
		t.Fatal(err)
	}
}

// TestCTMigratePrecondition: GET /nodes/{node}/lxc/{vmid}/migrate exists
// from pve-container 6 (PVE 9; migrate_vm_precondition, added 2025-07-30)
// with allowed-nodes, not-allowed-nodes and, for an HA resource,
// dependent-ha-resources; PVE 8 answers 501.
func TestCTMigratePrecondition(t *testing.T) {
	for _, v := range []string{"9", "8"} {
		s := startSim(t, pvesim.Options{Nodes: 2, Version: v})
		if err := s.AddGuest(pvesim.GuestSpec{VMID: 200, Kind: pvesim.LXC, Running: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHAResource(200, ""); err != nil {
			t.Fatal(err)
		}
		data, err := callData(t, s, "GET", "/nodes/pve1/lxc/200/migrate", nil)
		if v == "8" {
			errContains(t, err, "not implemented")
			continue
		}
		m, _ := data.(map[string]any)
		if err != nil || m["running"] != 1.0 || fmt.Sprint(m["allowed-nodes"]) != "[pve2]" || m["dependent-ha-resources"] == nil {
			t.Fatalf("precondition %v %v", data, err)
		}
	}
}

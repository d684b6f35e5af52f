package app_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// PVE 9's HA rules through the whole pipeline: the observer finds them in
// force, a desired node of an HA guest becomes converge's node-affinity
// rule, the simulator's HA stack moves the guest, and converge never
// migrates it nor asks HA to.

// haGuests adds running HA-managed VMs on pve1.
func haGuests(t *testing.T, sim *pvesim.Sim, vmids ...int) {
	t.Helper()
	for _, id := range vmids {
		if err := sim.AddGuest(pvesim.GuestSpec{VMID: id, Node: "pve1", Running: true}); err != nil {
			t.Fatal(err)
		}
		if err := sim.AddHAResource(id, "started"); err != nil {
			t.Fatal(err)
		}
	}
}

// rule creates an operator's HA rule through the API.
func rule(t *testing.T, sim *pvesim.Sim, form url.Values) {
	t.Helper()
	if code, body := pvesimtest.Call(t, sim, http.MethodPost, "/cluster/ha/rules", form); code != http.StatusOK {
		t.Fatalf("create rule %v: %d %s", form, code, body)
	}
}

// noConvergeMoves fails unless every migration of the guests was the HA
// stack's own (task user root@pam) and no HA migration was requested.
func noConvergeMoves(t *testing.T, sim *pvesim.Sim, vmids ...int) {
	t.Helper()
	for _, id := range vmids {
		for _, typ := range []string{"qmigrate", "hamigrate"} {
			for _, u := range taskUsers(sim, id, typ) {
				if u != "root@pam" || typ == "hamigrate" {
					t.Errorf("guest %d: a %s task by %s: converge moved an HA guest itself", id, typ, u)
				}
			}
		}
	}
	for _, m := range sim.HAMoves() {
		if m.Cause == "request" {
			t.Errorf("HA move %+v was requested (ha-manager migrate): want only moves HA decided", m)
		}
	}
}

func TestHAGuestPlacedByRule(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyEveryPass)
	const vmid = 440
	haGuests(t, p.sim, vmid)
	p.pass(t)
	node, running := "pve2", events.PowerRunning
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Node: &node})
	p.converge(t, vmid, seq)
	doc := p.settle(t, vmid)
	if g, _ := p.sim.Guest(vmid); g.Node != "pve2" {
		t.Fatalf("guest on %s, want pve2", g.Node)
	}
	if pl := doc.View.Observed.HAPlacement; !pl.Owned(vmid) || len(pl.Nodes) != 1 || pl.Nodes[0] != "pve2" {
		t.Fatalf("placement %+v: want converge's rule converge-%d on pve2", pl, vmid)
	}
	noConvergeMoves(t, p.sim, vmid)
	if !hasOp(p.results(t, vmid), events.OpSetHARule) || hasOp(p.results(t, vmid), events.OpMigrate) {
		t.Fatalf("results %+v: want a set_ha_rule and no migrate", p.results(t, vmid))
	}
	cd, err := p.rd.ClusterDoc(pvesimtest.Context(t))
	if err != nil || cd.State.PVE == nil || cd.State.PVE.HA != events.HARules || cd.State.PVE.Release != "9.2" {
		t.Fatalf("cluster facts %+v %v: want PVE 9.2 with HA rules", cd, err)
	}

	// No desired node any more: converge's rule goes, the guest stays.
	seq = p.desire(t, &events.Desired{VMID: vmid, Power: &running})
	p.converge(t, vmid, seq)
	doc = p.settle(t, vmid)
	if pl := doc.View.Observed.HAPlacement; pl == nil || pl.Rule != "" {
		t.Fatalf("placement %+v: want none once no node is desired", pl)
	}
	if code, body := pvesimtest.Call(t, p.sim, http.MethodGet, "/cluster/ha/rules/converge-440", nil); code == http.StatusOK {
		t.Fatalf("converge's rule still there: %s", body)
	}
	noConvergeMoves(t, p.sim, vmid)
	p.quiet(t, vmid, seq)
}

// An operator's node-affinity rule: a desired node it lists is left to
// HA, one it does not list blocks the guest naming the rule; converge
// neither edits it nor adds a rule of its own.
func TestHAOperatorRule(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyEveryPass)
	const vmid = 441
	haGuests(t, p.sim, vmid)
	rule(t, p.sim, url.Values{"type": {"node-affinity"}, "rule": {"prod"}, "resources": {"vm:441"}, "nodes": {"pve1,pve2"}})
	p.pass(t)
	node := "pve3"
	p.desire(t, &events.Desired{VMID: vmid, Node: &node})
	doc := p.settleWhen(t, vmid, func(d *views.GuestDoc) bool { return d.Status.Kind == planner.Blocked })
	if r := doc.Status.Reason; !strings.Contains(r, "HA node-affinity rule prod (nodes pve1,pve2)") || !strings.Contains(r, "desired node pve3") {
		t.Fatalf("reason %q: want the rule named", r)
	}
	node = "pve2"
	p.desire(t, &events.Desired{VMID: vmid, Node: &node})
	doc = p.settleIn(t, vmid)
	if doc.Status.Kind != planner.Pending || !strings.Contains(doc.Status.Reason, "so HA places the guest") {
		t.Fatalf("status %+v: want waiting for HA, which the rule lets place the guest", doc.Status)
	}
	if code, _ := pvesimtest.Call(t, p.sim, http.MethodGet, "/cluster/ha/rules/converge-441", nil); code == http.StatusOK {
		t.Fatal("converge created a rule beside the operator's")
	}
	if hasOp(p.results(t, vmid), events.OpSetHARule) || hasOp(p.results(t, vmid), events.OpMigrate) {
		t.Fatalf("results %+v: want none", p.results(t, vmid))
	}
	noConvergeMoves(t, p.sim, vmid)
}

// A positive resource-affinity pair: converge places one, HA moves the
// other along, and converge follows it.
func TestHAPositivePair(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyEveryPass)
	const a, b = 442, 443
	haGuests(t, p.sim, a, b)
	rule(t, p.sim, url.Values{"type": {"resource-affinity"}, "rule": {"pair"}, "resources": {"vm:442,vm:443"}, "affinity": {"positive"}})
	p.pass(t)
	node, running := "pve3", events.PowerRunning
	sb := p.desire(t, &events.Desired{VMID: b, Power: &running})
	sa := p.desire(t, &events.Desired{VMID: a, Power: &running, Node: &node})
	p.converge(t, a, sa)
	p.converge(t, b, sb)
	p.settle(t, a)
	doc := p.settle(t, b)
	for _, id := range []int{a, b} {
		if g, _ := p.sim.Guest(id); g.Node != "pve3" {
			t.Fatalf("guest %d on %s, want pve3 (the pair moves together)", id, g.Node)
		}
	}
	if o := doc.View.Observed; o.Node != "pve3" || o.HAPlacement == nil || o.HAPlacement.Via != "vm:442" {
		t.Fatalf("guest %d observed %+v: want followed to pve3, placed through vm:442", b, o)
	}
	if hasOp(p.results(t, b), events.OpSetHARule) || hasOp(p.results(t, b), events.OpMigrate) {
		t.Fatalf("results of %d %+v: want none", b, p.results(t, b))
	}
	noConvergeMoves(t, p.sim, a, b)
}

// A PVE 9 cluster mid-upgrade (HA groups not yet migrated): rules cannot
// be written, so converge asks HA to migrate, as on PVE 8; once the
// groups are migrated the guest's group is an operator's rule.
func TestHAMidUpgrade(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyEveryPass)
	const vmid = 444
	haGuests(t, p.sim, vmid)
	if err := p.sim.AddHAGroup("prod", "pve1,pve2,pve3", false); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.SetHAGroup(vmid, "prod"); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	node := "pve2"
	seq := p.desire(t, &events.Desired{VMID: vmid, Node: &node})
	p.converge(t, vmid, seq)
	p.settle(t, vmid)
	if g, _ := p.sim.Guest(vmid); g.Node != "pve2" {
		t.Fatalf("guest on %s, want pve2", g.Node)
	}
	if !hasOp(p.results(t, vmid), events.OpMigrate) || hasOp(p.results(t, vmid), events.OpSetHARule) {
		t.Fatalf("results %+v: want an HA migration, no rule", p.results(t, vmid))
	}
	cd, err := p.rd.ClusterDoc(pvesimtest.Context(t))
	if err != nil || cd.State.PVE == nil || cd.State.PVE.HA != events.HAGroups || cd.State.PVE.Release != "9.2" {
		t.Fatalf("cluster facts %+v %v: want PVE 9.2 with HA groups", cd, err)
	}
	// The upgrade finishes: the next pass knows (the HA mode is read
	// every pass while groups place HA guests).
	p.sim.MigrateHAGroups()
	p.pass(t)
	node = "pve3"
	p.desire(t, &events.Desired{VMID: vmid, Node: &node})
	doc := p.settleIn(t, vmid)
	if doc.Status.Kind != planner.Pending || !strings.Contains(doc.Status.Reason, "ha-group-prod") {
		g, _ := p.sim.Guest(vmid)
		t.Fatalf("status %+v (guest on %s, observed %+v; results %+v; moves %+v): want the migrated group's rule left to place the guest", doc.Status, g.Node, doc.View.Observed, p.results(t, vmid), p.sim.HAMoves())
	}
}

func hasOp(rs []events.Result, op events.Op) bool {
	for _, r := range rs {
		if r.Op == op {
			return true
		}
	}
	return false
}

package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// passUntil runs observer passes until the guest's document, written at or
// after seq, is in state (or limit passes); it returns the last document.
func (p *pipeline) passUntil(t *testing.T, vmid int, seq uint64, state planner.StatusKind, limit time.Duration) *views.GuestDoc {
	t.Helper()
	var doc *views.GuestDoc
	until(limit, func() bool {
		p.pass(t)
		doc = p.waitState(t, vmid, seq, state, 200*time.Millisecond)
		return doc != nil && doc.View.Seq >= seq && doc.Status.Kind == state
	})
	return doc
}

// approve journals `converge approve` for the guests, as the CLI does.
func (p *pipeline) approve(t *testing.T, vmids ...int) {
	t.Helper()
	c := events.Control{Meta: events.NewMeta("alice", "", time.Now()), Command: events.CommandApprove, VMIDs: vmids}
	if _, err := control.Publish(pvesimtest.Context(t), p.a.Bus(), events.DefaultCluster, c); err != nil {
		t.Fatal(err)
	}
}

// tasksOf lists the simulator's tasks that touched vmid (as its target, or
// a clone into it).
func tasksOf(sim *pvesim.Sim, vmid int) []string {
	var out []string
	for _, tk := range sim.Tasks() {
		if tk.ID == fmt.Sprint(vmid) || strings.Contains(strings.Join(tk.Log, "\n"), fmt.Sprintf("with ID %d", vmid)) {
			out = append(out, tk.Type)
		}
	}
	return out
}

// A missing guest desired with clone is created from its template, then
// configured and powered as desired: one clone, the owner tag, the desired
// values.
func TestCreateFromTemplate(t *testing.T) {
	p := startPipeline(t, pvesim.Options{DemoTemplates: true}, verifyOff)
	p.pass(t)
	running, cores, name := events.PowerRunning, 2, "web1"
	seq := p.desire(t, &events.Desired{VMID: 501, Power: &running, Cores: &cores, Name: &name, Clone: &events.Clone{From: 9000}})
	if doc := p.passUntil(t, 501, seq, planner.Converged, 30*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("not converged: %+v", doc)
	}
	p.settle(t, 501) // and no second clone after
	g, ok := p.sim.Guest(501)
	if !ok || g.Status != "running" || g.Config["cores"] != "2" || g.Config["name"] != "web1" || !strings.Contains(g.Config["tags"], events.OwnerTag) {
		t.Fatalf("guest 501: %+v", g)
	}
	if ts := tasksOf(p.sim, 501); len(ts) == 0 || ts[0] != "qmclone" || strings.Count(strings.Join(ts, " "), "clone") != 1 {
		t.Fatalf("tasks for 501: %v, want exactly one clone first", ts)
	}
}

// A clone onto a vmid taken by a guest converge did not create is refused
// with the reason, and that guest is untouched: no task, no write.
func TestCloneOntoTakenVMIDRefused(t *testing.T) {
	p := startPipeline(t, pvesim.Options{DemoTemplates: true}, verifyOff)
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: 105, Running: true, Name: "theirs"}); err != nil {
		t.Fatal(err)
	}
	before, _ := p.sim.Guest(105)
	p.pass(t)
	stopped := events.PowerStopped
	seq := p.desire(t, &events.Desired{VMID: 105, Power: &stopped, Clone: &events.Clone{From: 9000}})
	doc := p.passUntil(t, 105, seq, planner.Error, 20*time.Second)
	if doc == nil || !strings.Contains(doc.Status.Reason, "vmid 105 exists and was not created by converge; drop `clone` to adopt it") {
		t.Fatalf("status %+v", doc)
	}
	doc = p.settleIn(t, 105)
	after, _ := p.sim.Guest(105)
	if ts := tasksOf(p.sim, 105); len(ts) != 0 || after.Digest != before.Digest || after.Status != "running" {
		t.Fatalf("guest 105 touched: tasks %v, digest %s → %s, status %s", ts, before.Digest, after.Digest, after.Status)
	}
	if doc.Status.Kind != planner.Error {
		t.Fatalf("after more passes: %+v, want still refused", doc.Status)
	}
}

// A guest that does not exist and has no clone, or whose template is
// missing, is an error that says so (never blocked).
func TestMissingGuestExplained(t *testing.T) {
	p := startPipeline(t, pvesim.Options{DemoTemplates: true}, verifyOff)
	p.pass(t)
	running := events.PowerRunning
	seq := p.desire(t, &events.Desired{VMID: 777, Power: &running})
	if doc := p.passUntil(t, 777, seq, planner.Error, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, "does not exist in Proxmox, and its desired state has no clone") {
		t.Fatalf("no clone: %+v", doc)
	}
	seq = p.desire(t, &events.Desired{VMID: 778, Power: &running, Clone: &events.Clone{From: 9999}})
	if doc := p.passUntil(t, 778, seq, planner.Error, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, "clone.from 9999 is not a template") {
		t.Fatalf("no template: %+v", doc)
	}
}

// The destroy gate, closed (the default): a guest converge created waits,
// blocked with the reason, untouched, until `converge approve` names it;
// one it did not create needs the approval too; a protected guest is never
// destroyed, approved or not.
func TestDestroyGate(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyOff)
	for _, g := range []pvesim.GuestSpec{
		{VMID: 701, Running: true, Tags: []string{events.OwnerTag}},
		{VMID: 702, Name: "adopted"},
		{VMID: 703, Tags: []string{events.OwnerTag}, Config: map[string]string{"protection": "1"}},
	} {
		if err := p.sim.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	p.pass(t)
	seqs := map[int]uint64{}
	for _, id := range []int{701, 702, 703} {
		seqs[id] = p.desire(t, &events.Desired{VMID: id, Absent: true})
	}
	for _, c := range []struct {
		id   int
		want string
	}{
		{701, "the destroy gate is closed (run the planner and executors with --allow-destroy, or `converge approve 701` for this guest)"},
		{702, "was not created by converge, so only `converge approve 702` lets converge destroy it"},
		{703, "converge never destroys a protected guest"},
	} {
		if doc := p.passUntil(t, c.id, seqs[c.id], planner.Blocked, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, c.want) {
			t.Fatalf("guest %d: %+v, want blocked: %s", c.id, doc, c.want)
		}
		doc := p.settleIn(t, c.id)
		if ts := tasksOf(p.sim, c.id); len(ts) != 0 {
			t.Fatalf("guest %d behind the gate saw %v", c.id, ts)
		}
		if doc.Status.Kind != planner.Blocked {
			t.Fatalf("guest %d after more passes: %+v, want still blocked", c.id, doc.Status)
		}
	}
	p.approve(t, 701, 702, 703)
	for _, id := range []int{701, 702} {
		if doc := p.passUntil(t, id, seqs[id], planner.Absent, 30*time.Second); doc == nil {
			t.Fatalf("guest %d approved: not absent: %+v", id, doc)
		}
		if _, ok := p.sim.Guest(id); ok {
			t.Fatalf("guest %d still exists", id)
		}
	}
	if ts := tasksOf(p.sim, 701); strings.Join(ts, " ") != "qmshutdown qmdestroy" {
		t.Fatalf("701 (running) saw %v, want a shutdown then a destroy", ts)
	}
	// The approval, and the passes after it, folded and acted on: the
	// protected guest is untouched.
	doc := p.settleIn(t, 703)
	if _, ok := p.sim.Guest(703); !ok || len(tasksOf(p.sim, 703)) != 0 {
		t.Fatalf("protected guest 703 touched: tasks %v", tasksOf(p.sim, 703))
	}
	if doc.Status.Kind != planner.Blocked {
		t.Fatalf("protected 703 after approval: %+v", doc)
	}
}

// --allow-destroy: the guests converge created go when desired absent
// (out of HA first); a protected one stays.
func TestDestroyAllowed(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyOff, func(c *app.Config) {
		c.Planner.Planner.Policy.AllowDestroy = true
		c.Executor.Policy.AllowDestroy = true
	})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 711, Running: true, Tags: []string{events.OwnerTag}},
		{VMID: 713, Tags: []string{events.OwnerTag}, Config: map[string]string{"protection": "1"}},
	} {
		if err := p.sim.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.sim.AddHAResource(711, "started"); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	seq := p.desire(t, &events.Desired{VMID: 711, Absent: true})
	if doc := p.passUntil(t, 711, seq, planner.Absent, 30*time.Second); doc == nil {
		t.Fatalf("711 not absent: %+v", doc)
	}
	if len(p.sim.HAResources()) != 0 {
		t.Fatalf("HA resources left: %+v", p.sim.HAResources())
	}
	seq = p.desire(t, &events.Desired{VMID: 713, Absent: true})
	if doc := p.passUntil(t, 713, seq, planner.Blocked, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, "protection") {
		t.Fatalf("713: %+v", doc)
	}
	doc := p.settleIn(t, 713)
	if _, ok := p.sim.Guest(713); !ok || len(tasksOf(p.sim, 713)) != 0 {
		t.Fatalf("protected guest 713 destroyed or touched: tasks %v", tasksOf(p.sim, 713))
	}
	if doc.Status.Kind != planner.Blocked {
		t.Fatalf("713 after more passes: %+v, want still blocked", doc.Status)
	}
}

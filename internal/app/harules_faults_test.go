package app_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// HA rules when things go wrong: a rule changed behind converge's back,
// reads of the rules or the cluster's facts failing, converge's own rule
// disabled, a guest HA will not move back.

// An operator's rule added after the guest was read (no verification
// reads: only the rule changed) is adopted: a desired node outside it
// blocks the guest rather than making converge write a rule of its own.
func TestHARuleAddedLaterAdopted(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyOff)
	const vmid = 450
	haGuests(t, p.sim, vmid)
	running := events.PowerRunning
	// Desired before the first read: that read carries an AfterSeq, and a
	// snapshot of the later rule published with it would not be adopted.
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running})
	p.pass(t)
	p.converge(t, vmid, seq)
	p.settle(t, vmid)
	rule(t, p.sim, url.Values{"type": {"node-affinity"}, "rule": {"prod"}, "resources": {"vm:450"}, "nodes": {"pve1,pve2"}})
	doc := p.settleIn(t, vmid)
	if pl := doc.View.Observed.HAPlacement; pl == nil || pl.Rule != "prod" {
		t.Fatalf("placement %+v: want the operator's rule prod", pl)
	}
	node := "pve3"
	p.desire(t, &events.Desired{VMID: vmid, Power: &running, Node: &node})
	doc = p.settleWhen(t, vmid, func(d *views.GuestDoc) bool { return d.Status.Kind == planner.Blocked })
	if hasOp(p.results(t, vmid), events.OpSetHARule) || !strings.Contains(doc.Status.Reason, "rule prod") {
		t.Fatalf("status %+v, results %+v: want blocked naming prod, no rule written", doc.Status, p.results(t, vmid))
	}
}

// flakyHA fails the first reads of the HA rules or of the facts.
type flakyHA struct {
	*pve.Client
	failRules, failFacts int
}

func (f *flakyHA) HARules(ctx context.Context) ([]pve.HARule, error) {
	if f.failRules > 0 {
		f.failRules--
		return nil, errors.New("injected: rules not read")
	}
	return f.Client.HARules(ctx)
}

func (f *flakyHA) ClusterFacts(ctx context.Context) (events.PVEFacts, error) {
	if f.failFacts > 0 {
		f.failFacts--
		return events.PVEFacts{}, errors.New("injected: facts not read")
	}
	return f.Client.ClusterFacts(ctx)
}

// A failed read of the rules or of the facts never makes converge migrate
// an HA guest under HA rules: its placement is unknown until read, and
// converge moves it neither way meanwhile.
func TestHAReadFailuresNeverMigrate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rules, facts int
	}{{"rules", 1, 0}, {"facts", 0, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyEveryPass)
			cfg := observer.DefaultConfig()
			verifyEveryPass(&cfg)
			cfg.Logger = zerolog.Nop()
			obs, err := observer.New(cfg, &flakyHA{Client: pvesimtest.Client(t, p.sim), failRules: tc.rules, failFacts: tc.facts}, p.a.Bus())
			if err != nil {
				t.Fatal(err)
			}
			p.obs = obs
			const vmid = 460
			haGuests(t, p.sim, vmid)
			p.pass(t) // the failing read
			node, running := "pve2", events.PowerRunning
			seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Node: &node})
			doc := p.caughtUp(t, vmid, nil)
			if doc.Status.Kind != planner.Pending || !strings.Contains(doc.Status.Reason, "is not known") {
				t.Fatalf("status %+v after a failed read: want waiting, placement unknown", doc.Status)
			}
			p.converge(t, vmid, seq)
			p.settle(t, vmid)
			if rs := p.results(t, vmid); hasOp(rs, events.OpMigrate) || !hasOp(rs, events.OpSetHARule) {
				t.Fatalf("results %+v: want converge's rule, never a migration", rs)
			}
			noConvergeMoves(t, p.sim, vmid)
		})
	}
}

// converge's rule disabled by an operator: converge neither enables it
// nor writes it again, and says so.
func TestHAOwnRuleDisabled(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyOff)
	const vmid = 470
	haGuests(t, p.sim, vmid)
	p.pass(t)
	node, running := "pve2", events.PowerRunning
	p.converge(t, vmid, p.desire(t, &events.Desired{VMID: vmid, Power: &running, Node: &node}))
	p.settle(t, vmid)
	if code, body := pvesimtest.Call(t, p.sim, http.MethodPut, "/cluster/ha/rules/converge-470",
		url.Values{"type": {"node-affinity"}, "disable": {"1"}}); code != http.StatusOK {
		t.Fatalf("disable: %d %s", code, body)
	}
	p.pass(t) // converge learns of it before the next desired node
	before := len(p.results(t, vmid))
	node = "pve3"
	p.desire(t, &events.Desired{VMID: vmid, Power: &running, Node: &node})
	doc := p.settleWhen(t, vmid, func(d *views.GuestDoc) bool { return d.Status.Kind == planner.Blocked })
	if !strings.Contains(doc.Status.Reason, "converge-470 is disabled") {
		t.Fatalf("status %+v: want blocked, the disabled rule named", doc.Status)
	}
	if n := len(p.results(t, vmid)) - before; n != 0 {
		t.Fatalf("%d actions after the rule was disabled, want none: %+v", n, p.results(t, vmid)[before:])
	}
}

// failback 0: HA leaves the guest on a node converge's (non-strict) rule
// allows; converge says so instead of waiting for ever, and moves nothing.
func TestHANoFailback(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyEveryPass)
	const vmid = 480
	haGuests(t, p.sim, vmid)
	if code, body := pvesimtest.Call(t, p.sim, http.MethodPut, "/cluster/ha/resources/vm:480", url.Values{"failback": {"0"}}); code != http.StatusOK {
		t.Fatalf("failback: %d %s", code, body)
	}
	p.pass(t)
	node, running := "pve2", events.PowerRunning
	p.desire(t, &events.Desired{VMID: vmid, Power: &running, Node: &node})
	doc := p.settleWhen(t, vmid, func(d *views.GuestDoc) bool { return d.Status.Kind == planner.Blocked })
	if !strings.Contains(doc.Status.Reason, "failback 0") {
		t.Fatalf("status %+v: want blocked, failback named", doc.Status)
	}
	if g, _ := p.sim.Guest(vmid); g.Node != "pve1" {
		t.Fatalf("guest on %s: HA with failback 0 leaves it on pve1", g.Node)
	}
	if hasOp(p.results(t, vmid), events.OpSetHARule) {
		t.Fatalf("results %+v: a rule that cannot move the guest was written", p.results(t, vmid))
	}
	noConvergeMoves(t, p.sim, vmid)
}

// passOnWrite runs hook (once) when the executor writes a config.
type passOnWrite struct {
	app.Proxmox
	mu   sync.Mutex
	hook func()
}

func (w *passOnWrite) UpdateConfig(ctx context.Context, ref pve.GuestRef, ch pve.ConfigChange) (pve.TaskRef, error) {
	w.mu.Lock()
	h := w.hook
	w.hook = nil
	w.mu.Unlock()
	if h != nil {
		h()
	}
	return w.Proxmox.UpdateConfig(ctx, ref, ch)
}

// An action planned while the guest's placement was unknown ends after
// the observer has published it: the read-back reads the placement
// rather than carrying the unknown one over the observer's.
func TestHAReadBackReadsPlacement(t *testing.T) {
	w := &passOnWrite{}
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: "9"}, verifyOff,
		func(c *app.Config) { w.Proxmox = c.Proxmox; c.Proxmox = w })
	cfg := observer.DefaultConfig()
	verifyOff(&cfg)
	cfg.Logger = zerolog.Nop()
	obs, err := observer.New(cfg, &flakyHA{Client: pvesimtest.Client(t, p.sim), failRules: 1}, p.a.Bus())
	if err != nil {
		t.Fatal(err)
	}
	p.obs = obs
	const vmid = 491
	haGuests(t, p.sim, vmid)
	p.pass(t) // the rules not read: placement unknown
	done := make(chan struct{})
	w.mu.Lock()
	w.hook = func() { defer close(done); _, _ = p.obs.Pass(pvesimtest.Context(t)) } // read now, published
	w.mu.Unlock()
	desc, running := "read back", events.PowerRunning
	p.desire(t, &events.Desired{VMID: vmid, Power: &running, Description: &desc})
	<-done
	p.caughtUp(t, vmid, nil)
	node := "pve2"
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Description: &desc, Node: &node})
	p.converge(t, vmid, seq)
	doc := p.settle(t, vmid)
	if pl := doc.View.Observed.HAPlacement; !pl.Owned(vmid) {
		t.Fatalf("placement %+v, status %+v: want converge's rule, read back", pl, doc.Status)
	}
	noConvergeMoves(t, p.sim, vmid)
}

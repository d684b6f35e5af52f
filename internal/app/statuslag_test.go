package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pvesim"
)

// Proxmox's /cluster/resources reports a guest's status as its node's
// pvestatd last broadcast it. These tests freeze that broadcast (a cycle of
// an hour, run by hand with Sim.Pvestatd where a test needs the inventory
// to catch up at a chosen moment) and run the whole pipeline, the observer
// re-reading every config every pass, as a verification or any row change
// makes it do. Before the observer confirmed contradicting statuses
// (internal/observer/status.go), it journalled the lagging status after
// the executor's read-back and the planner repeated the action (issue 34).

// frozenInventory is a simulator whose pvestatd broadcasts only when told.
var frozenInventory = pvesim.Options{Nodes: 2, Faults: pvesim.Faults{ResourcesLag: pvesim.Duration(time.Hour)}}

// tasksOfType lists the exit statuses of the simulator's tasks of typ on
// vmid.
func tasksOfType(sim *pvesim.Sim, vmid int, typ string) []string {
	return taskField(sim, vmid, typ, func(tk pvesim.TaskInfo) string { return tk.ExitStatus })
}

// noRepeatedPower fails on a task that found the guest already in the
// state it was asked for.
func noRepeatedPower(t *testing.T, sim *pvesim.Sim) {
	t.Helper()
	for _, tk := range sim.Tasks() {
		if strings.Contains(tk.ExitStatus, "already running") || strings.Contains(tk.ExitStatus, "not running") {
			t.Errorf("task %s %s on %s: %s", tk.Type, tk.UPID, tk.ID, tk.ExitStatus)
		}
	}
}

// Guest 104's history: desired stopped with 3 cores; the shutdown and the
// config write succeed, and the observer reads the new config while the
// inventory still says running. One shutdown, not two.
func TestNoSecondShutdownWhileStatusLags(t *testing.T) {
	p := startPipeline(t, frozenInventory, verifyEveryPass)
	const vmid = 601
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1", Running: true, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.sim.Pvestatd()
	p.pass(t)
	stopped, cores := events.PowerStopped, 3
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &stopped, Cores: &cores})
	p.converge(t, vmid, seq)
	doc := p.settle(t, vmid)
	if doc.View.Observed.Status != "stopped" || doc.View.Observed.Config.Cores != 3 {
		t.Fatalf("converged on %+v", doc.View.Observed)
	}
	if ts := tasksOfType(p.sim, vmid, "qmshutdown"); len(ts) != 1 {
		t.Fatalf("shutdown tasks %v, want one", ts)
	}
	if g, _ := p.sim.Guest(vmid); g.Status != "stopped" || g.Config["cores"] != "3" {
		t.Fatalf("guest %+v", g)
	}
	noRepeatedPower(t, p.sim)
}

// Guest 127's history: desired running with 3 cores; the config write and
// the start succeed, and the observer reads the config while the
// inventory still says stopped. One start, and none that finds the guest
// already running.
func TestNoSecondStartWhileStatusLags(t *testing.T) {
	p := startPipeline(t, frozenInventory, verifyEveryPass)
	const vmid = 602
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1", Cores: 2}); err != nil {
		t.Fatal(err)
	}
	p.sim.Pvestatd()
	p.pass(t)
	running, cores := events.PowerRunning, 3
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores})
	p.converge(t, vmid, seq)
	doc := p.settle(t, vmid)
	if doc.View.Observed.Status != "running" {
		t.Fatalf("converged on %+v", doc.View.Observed)
	}
	if ts := tasksOfType(p.sim, vmid, "qmstart"); len(ts) != 1 {
		t.Fatalf("start tasks %v, want one", ts)
	}
	noRepeatedPower(t, p.sim)
}

// A container's restart migration stops it on its node, moves it and
// starts it on the new one. pvestatd's cycle during the move broadcasts it
// stopped; after the migration's read-back (running on pve2) and the
// description written after it, the inventory still says stopped.
// Nothing is started again.
func TestNoStartAfterMigrationWhileStatusLags(t *testing.T) {
	opts := frozenInventory
	opts.Faults.TaskLatencyByType = map[string]pvesim.Duration{"vzmigrate": pvesim.Duration(2 * time.Second)}
	p := startPipeline(t, opts, verifyEveryPass)
	const vmid = 603
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1", Kind: pvesim.LXC, Running: true}); err != nil {
		t.Fatal(err)
	}
	p.sim.Pvestatd()
	p.pass(t)
	node, running, allowed := "pve2", events.PowerRunning, events.RestartAllowed
	desc := "moved"
	seq := p.desire(t, &events.Desired{VMID: vmid, Node: &node, Power: &running, Restart: &allowed, Description: &desc})
	if !until(30*time.Second, func() bool {
		g, _ := p.sim.Guest(vmid)
		return g.Lock == "migrate" && g.Status == "stopped"
	}) {
		t.Fatal("the migration never stopped the container")
	}
	p.sim.Pvestatd() // pvestatd's cycle while the container is stopped
	p.converge(t, vmid, seq)
	doc := p.settle(t, vmid)
	if o := doc.View.Observed; o.Node != "pve2" || o.Status != "running" {
		t.Fatalf("converged on %+v", o)
	}
	if ts := tasksOfType(p.sim, vmid, "vzstart"); len(ts) != 0 {
		t.Fatalf("start tasks after the migration: %v", ts)
	}
	for _, r := range p.results(t, vmid) {
		if r.Op == events.OpStart {
			t.Fatalf("a start was planned after the migration: %+v", r)
		}
	}
	if ts := tasksOfType(p.sim, vmid, "vzmigrate"); len(ts) != 1 {
		t.Fatalf("migrations %v, want one", ts)
	}
	noRepeatedPower(t, p.sim)
}

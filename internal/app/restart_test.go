package app_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/planner"
)

// powerTasks are the simulator's tasks that stop, shut down or reboot
// vmid.
func powerTasks(sim *pvesim.Sim, vmid int) []string {
	var out []string
	for _, tk := range sim.Tasks() {
		if tk.ID != fmt.Sprint(vmid) {
			continue
		}
		for _, typ := range []string{"qmreboot", "qmshutdown", "qmstop", "vzreboot", "vzshutdown", "vzstop"} {
			if tk.Type == typ {
				out = append(out, tk.Type)
			}
		}
	}
	return out
}

// A cores change on a running VM (Proxmox keeps it pending until a
// restart): by default no reboot and no stop reach the simulator, and the
// status says the change waits for a restart, naming the key; with the
// guest's restart "allowed", one reboot applies it and the guest is
// converged.
func TestRestartPolicy(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyOff)
	const vmid = 301
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Running: true, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	running, cores := events.PowerRunning, 2
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores})
	doc := p.waitState(t, vmid, seq, planner.Pending, 20*time.Second)
	until(20*time.Second, func() bool {
		doc = p.waitState(t, vmid, seq, planner.Pending, time.Second)
		return doc != nil && strings.Contains(doc.Status.Reason, "waits for a restart")
	})
	if doc == nil || !strings.Contains(doc.Status.Reason, "cores waits for a restart (restart: never") {
		t.Fatalf("status %+v, want pending: cores waits for a restart", doc)
	}
	if g, _ := p.sim.Guest(vmid); g.Pending["cores"] != "2" || g.Status != "running" {
		t.Fatalf("guest %+v: want running with cores 2 pending", g)
	}
	// More passes change nothing: once they are folded and whatever they
	// called for is done, no restart and no write reached Proxmox.
	before := p.sim.Mutations()
	doc = p.settleIn(t, vmid)
	if ts := powerTasks(p.sim, vmid); len(ts) != 0 {
		t.Fatalf("restart not allowed, yet the simulator saw %v", ts)
	}
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("restart not allowed, yet more passes made %d Proxmox mutations (results %+v)", n, p.results(t, vmid))
	}
	if doc.Status.Kind != planner.Pending || !strings.Contains(doc.Status.Reason, "cores waits for a restart") {
		t.Fatalf("after more passes: %+v, want still pending for a restart", doc.Status)
	}

	allowed := events.RestartAllowed
	seq = p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores, Restart: &allowed})
	if doc := p.waitState(t, vmid, seq, planner.Converged, 20*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("with restart allowed: %+v", doc)
	}
	p.settle(t, vmid) // and no second reboot after
	if ts := powerTasks(p.sim, vmid); len(ts) != 1 || ts[0] != "qmreboot" {
		t.Fatalf("tasks %v, want exactly one reboot", ts)
	}
	if g, _ := p.sim.Guest(vmid); g.Config["cores"] != "2" || len(g.Pending) != 0 || g.Status != "running" {
		t.Fatalf("guest after the reboot: %+v", g)
	}
}

// offsetClock is the wall clock moved by an offset the test changes.
type offsetClock struct {
	clock.Clock
	d atomic.Int64
}

func (c *offsetClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.d.Load())) }

// --restart allowed with a --restart-window that is closed now: no reboot
// until it opens (the planner's and the executor's injected clock moved
// into it), then one, planned once the window opened by their clock.
func TestRestartWindow(t *testing.T) {
	clk := &offsetClock{Clock: clock.Real}
	// Until the test moves it, the injected clock runs ten minutes behind:
	// the window stays closed however slowly the test runs.
	clk.d.Store(int64(-10 * time.Minute))
	// A one-hour window opening at the next minute at least 15 s away, in
	// UTC. The injected clock moves less than a minute ahead: further, the
	// journal would rightly refuse the executor's read-backs as stamped in
	// the future (projector.MaxReadAhead).
	open := time.Now().UTC().Add(15 * time.Second).Truncate(time.Minute).Add(time.Minute)
	window := fmt.Sprintf("%s %s-%s", open.Weekday().String()[:3], open.Format("15:04"), open.Add(time.Hour).Format("15:04"))
	pol := planner.DefaultPolicy()
	pol.Restart, pol.RestartWindow, pol.Location = events.RestartAllowed, window, time.UTC
	// The clock moves minutes ahead of the journal's: observations must
	// not read as stale meanwhile.
	pol.ObserverTimeout = time.Hour
	p := startPipeline(t, pvesim.Options{}, verifyOff, func(c *app.Config) {
		c.Planner.Planner.Policy, c.Planner.Clock = pol, clk
		c.Executor.Policy, c.Executor.Clock = pol, clk
	})
	const vmid = 302
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Running: true, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	running, cores := events.PowerRunning, 4
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores})
	var doc = p.waitState(t, vmid, seq, planner.Pending, 20*time.Second)
	until(20*time.Second, func() bool {
		doc = p.waitState(t, vmid, seq, planner.Pending, time.Second)
		return doc != nil && strings.Contains(doc.Status.Reason, "restart window")
	})
	if doc == nil || !strings.Contains(doc.Status.Reason, "allowed only in the restart window "+window) {
		t.Fatalf("status %+v, want pending until the window %s", doc, window)
	}
	doc = p.settleIn(t, vmid)
	if ts := powerTasks(p.sim, vmid); len(ts) != 0 {
		t.Fatalf("window closed, yet the simulator saw %v", ts)
	}
	if !strings.Contains(doc.Status.Reason, "allowed only in the restart window "+window) {
		t.Fatalf("after more passes: %+v, want still pending until the window", doc.Status)
	}
	// The clock moves to three seconds before the window opens (the lease
	// of the planner, on the same clock, is renewed within a second):
	// still nothing, as far as the planner's clock has come when the
	// passes have settled; the reboot comes when the window opens.
	clk.d.Store(int64(min(time.Until(open)-3*time.Second, 50*time.Second)))
	p.settleIn(t, vmid)
	if now := clk.Now(); now.Before(open) {
		if ts := powerTasks(p.sim, vmid); len(ts) != 0 {
			t.Fatalf("before the window (the clock at %s, the window opens %s), the simulator saw %v", now.Format(time.RFC3339Nano), open, ts)
		}
	} else {
		t.Logf("the window opened (%s) while the passes settled; the reboot's planning time below shows that it waited", open)
	}
	if doc := p.waitState(t, vmid, seq, planner.Converged, 45*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("window open: %+v", doc)
	}
	p.settle(t, vmid)
	if ts := powerTasks(p.sim, vmid); len(ts) != 1 || ts[0] != "qmreboot" {
		t.Fatalf("tasks %v, want exactly one reboot", ts)
	}
	var reboots []time.Time
	for _, a := range journalled[events.Action](t, p, events.KindAction, vmid) {
		if a.Op == events.OpReboot {
			reboots = append(reboots, a.Time)
		}
	}
	if len(reboots) != 1 || reboots[0].Before(open) {
		t.Fatalf("reboots planned at %v, want one, at or after the window opened (%s)", reboots, open)
	}
}

// A VM that ignores the reboot's ACPI request: Proxmox never forces a
// reboot, so converge asks once. The task fails, the VM runs on with the
// value still pending, and the status is an error that says so and what
// to do; later passes plan no second reboot.
func TestRebootNeverForced(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyOff)
	const vmid = 304
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Running: true, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.sim.SetIgnoreShutdown(vmid, true)
	p.pass(t)
	running, cores, allowed := events.PowerRunning, 2, events.RestartAllowed
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores, Restart: &allowed})
	doc := p.waitState(t, vmid, seq, planner.Error, 20*time.Second)
	if doc == nil || !strings.Contains(doc.Status.Reason, "VM quit/powerdown failed - got timeout") ||
		!strings.Contains(doc.Status.Reason, "converge never forces a reboot") {
		t.Fatalf("status %+v, want an error saying the reboot was not forced", doc)
	}
	// Later passes, once folded and acted on, planned no second reboot.
	doc = p.settleIn(t, vmid)
	if ts := powerTasks(p.sim, vmid); len(ts) != 1 || ts[0] != "qmreboot" {
		t.Fatalf("tasks %v, want exactly one reboot", ts)
	}
	if g, _ := p.sim.Guest(vmid); g.Status != "running" || g.Pending["cores"] != "2" {
		t.Fatalf("guest %+v: want running, cores 2 still pending", g)
	}
	if doc.Status.Kind != planner.Error || !strings.Contains(doc.Status.Reason, "converge never forces a reboot") {
		t.Fatalf("after more passes: %+v, want still the error", doc.Status)
	}
}

package app_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// taskUsers lists who ran the simulator's tasks of type typ on vmid.
func taskUsers(sim *pvesim.Sim, vmid int, typ string) []string {
	return taskField(sim, vmid, typ, func(tk pvesim.TaskInfo) string { return tk.User })
}

// taskField lists a field of the simulator's tasks of type typ on vmid.
func taskField(sim *pvesim.Sim, vmid int, typ string, field func(pvesim.TaskInfo) string) []string {
	var out []string
	for _, tk := range sim.Tasks() {
		if tk.ID == strconv.Itoa(vmid) && tk.Type == typ {
			out = append(out, field(tk))
		}
	}
	return out
}

// Placement: a running VM with a local disk migrates online (with its
// local disks) to its desired node, a running container by restart
// migration; both end converged and running there.
func TestMigrateRunningGuests(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 2}, verifyEveryPass)
	const vm, ct = 421, 422
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vm, Node: "pve1", Running: true,
		Config: map[string]string{"scsi0": "local-lvm:vm-421-disk-0,size=4G"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: ct, Node: "pve1", Kind: pvesim.LXC, Running: true}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	node, running := "pve2", events.PowerRunning
	vs := p.desire(t, &events.Desired{VMID: vm, Node: &node, Power: &running})
	allowed := events.RestartAllowed // a running container's migration restarts it
	cs := p.desire(t, &events.Desired{VMID: ct, Node: &node, Power: &running, Restart: &allowed})
	p.converge(t, vm, vs)
	p.converge(t, ct, cs)
	for _, id := range []int{vm, ct} {
		if g, _ := p.sim.Guest(id); g.Node != "pve2" || g.Status != "running" || g.Lock != "" {
			t.Fatalf("guest %d: %+v, want running on pve2", id, g)
		}
	}
	if ts := taskUsers(p.sim, vm, "qmigrate"); len(ts) != 1 {
		t.Fatalf("VM migrations %v, want one", ts)
	}
	if ts := taskUsers(p.sim, ct, "vzmigrate"); len(ts) != 1 {
		t.Fatalf("container migrations %v, want one", ts)
	}
	p.quiet(t, vm, vs)

	// Someone migrates the VM back to pve1 by hand: converge moves it to
	// its desired node again.
	c := pvesimtest.Client(t, p.sim)
	tk, err := c.Migrate(pvesimtest.Context(t), pve.GuestRef{Kind: pve.KindQEMU, Node: "pve2", VMID: vm}, pve.MigrateSpec{Target: "pve1", Online: true, WithLocalDisks: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTask(pvesimtest.Context(t), tk, pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	until(30*time.Second, func() bool {
		p.pass(t)
		g, _ := p.sim.Guest(vm)
		return g.Node == "pve2" && g.Lock == ""
	})
	if g, _ := p.sim.Guest(vm); g.Node != "pve2" || g.Status != "running" {
		t.Fatalf("after a move by hand: %+v, want back on pve2, running", g)
	}
	p.quiet(t, vm, vs)
}

// A guest moved by hand (no desired node) is followed: the next change is
// made on the node it runs on now, and it is never treated as gone.
func TestMovedByHandFollowed(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 2}, verifyEveryPass)
	const vmid = 423
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1", Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	cores := 2
	seq := p.desire(t, &events.Desired{VMID: vmid, Cores: &cores})
	p.converge(t, vmid, seq)

	c := pvesimtest.Client(t, p.sim)
	tk, err := c.Migrate(pvesimtest.Context(t), pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid}, pve.MigrateSpec{Target: "pve2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTask(pvesimtest.Context(t), tk, pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	p.quiet(t, vmid, seq)
	cores = 3
	seq = p.desire(t, &events.Desired{VMID: vmid, Cores: &cores})
	p.converge(t, vmid, seq)
	p.settle(t, vmid) // every read-back journalled
	if g, _ := p.sim.Guest(vmid); g.Node != "pve2" || g.Config["cores"] != "3" {
		t.Fatalf("guest %+v: want cores 3 on pve2", g)
	}
	for _, r := range p.results(t, vmid) {
		if r.Observed != nil && !r.Observed.Exists {
			t.Fatalf("a read-back called the moved guest gone: %+v", r)
		}
	}
}

// HA-managed guests: a desired node moves the guest through HA (under
// HA groups, PVE 8, by a migrate request whose task ends before the guest
// moves: the executor waits on the guest; under HA rules, PVE 9, by
// converge's node-affinity rule), and power goes through the HA state:
// HA, not converge, starts the guest.
func TestHAGuestThroughHA(t *testing.T) {
	for _, v := range []struct {
		version string
		how     events.Op
	}{{"8", events.OpMigrate}, {"9", events.OpSetHARule}} {
		t.Run("pve"+v.version, func(t *testing.T) { testHAGuestThroughHA(t, v.version, v.how) })
	}
}

func testHAGuestThroughHA(t *testing.T, version string, how events.Op) {
	p := startPipeline(t, pvesim.Options{Nodes: 2, Version: version}, verifyEveryPass)
	const moved, started = 424, 425
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: moved, Node: "pve1", Running: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: started, Node: "pve1"}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddHAResource(moved, "started"); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddHAResource(started, "stopped"); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	node, running := "pve2", events.PowerRunning
	ms := p.desire(t, &events.Desired{VMID: moved, Node: &node})
	ss := p.desire(t, &events.Desired{VMID: started, Power: &running})
	p.converge(t, moved, ms)
	p.converge(t, started, ss)
	p.settle(t, moved) // and no second migration, nor a start by converge, after
	p.settle(t, started)
	if g, _ := p.sim.Guest(moved); g.Node != "pve2" || g.Status != "running" {
		t.Fatalf("HA guest %+v: want running on pve2", g)
	}
	if us := taskUsers(p.sim, moved, "qmigrate"); len(us) != 1 || us[0] != "root@pam" {
		t.Fatalf("migrations %v: want one, run by the HA manager (root@pam)", us)
	}
	if rs := p.results(t, moved); !hasOp(rs, how) || len(rs) != 1 {
		t.Fatalf("results %+v: want one %s", rs, how)
	}
	if g, _ := p.sim.Guest(started); g.Status != "running" {
		t.Fatalf("guest %+v: want started by HA", g)
	}
	if us := taskUsers(p.sim, started, "qmstart"); len(us) != 1 || us[0] != "root@pam" {
		t.Fatalf("starts %v: want one, by the HA manager, none by converge", us)
	}
	if !slices.ContainsFunc(p.results(t, started), func(r events.Result) bool { return r.Op == events.OpSetHAState }) {
		t.Fatal("no set_ha_state result")
	}
	p.quiet(t, started, ss)

	// Someone asks HA to stop it through the API: converge asks for
	// started again, and HA starts it.
	if err := pvesimtest.Client(t, p.sim).HASetState(pvesimtest.Context(t), pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 425}, "stopped"); err != nil {
		t.Fatal(err)
	}
	p.sim.RunHA()
	if err := p.sim.WaitHA(pvesimtest.Context(t)); err != nil { // HA stops it
		t.Fatal(err)
	}
	until(30*time.Second, func() bool {
		p.pass(t)
		g, _ := p.sim.Guest(started)
		return g.Status == "running" && len(taskUsers(p.sim, started, "qmstart")) == 2
	})
	if us := taskUsers(p.sim, started, "qmstart"); len(us) != 2 || us[1] != "root@pam" {
		doc, _ := p.rd.Guest(pvesimtest.Context(t), started)
		g, _ := p.sim.Guest(started)
		t.Fatalf("starts %v: want HA to start the guest again (guest %+v, HA %+v, status %+v, results %+v)", us, g, p.sim.HAResources(), doc.Status, p.results(t, started))
	}
	p.converge(t, started, ss)
	p.quiet(t, started, ss)
}

// A guest HA took over after it was last observed: the plain migration
// converge plans becomes an HA request in Proxmox, whose task ends before
// the guest moves. The executor waits for the guest, so it is migrated
// once, not again by a plan from the old node.
func TestMigrateOfGuestHATookOver(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 2}, verifyOff)
	const vmid = 426
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1", Running: true}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	if err := p.sim.AddHAResource(vmid, "started"); err != nil { // not observed yet
		t.Fatal(err)
	}
	node := "pve2"
	seq := p.desire(t, &events.Desired{VMID: vmid, Node: &node})
	until(30*time.Second, func() bool {
		g, _ := p.sim.Guest(vmid)
		return g.Node == "pve2" && g.Lock == ""
	})
	p.converge(t, vmid, seq)
	p.settle(t, vmid) // and no second migration after
	if us := taskUsers(p.sim, vmid, "qmigrate"); len(us) != 1 {
		t.Fatalf("migrations %v, want one", us)
	}
	n := 0
	for _, r := range p.results(t, vmid) {
		if r.Op == events.OpMigrate && r.Status.Final() {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d migrate actions, want 1: %+v", n, p.results(t, vmid))
	}
}

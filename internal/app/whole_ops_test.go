package app_test

import (
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// mutationLog records the simulator's mutating requests.
type mutationLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *mutationLog) note(m pvesim.Mutation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, m.Method+" "+m.Path)
}

func (l *mutationLog) has(method, suffix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.seen, func(s string) bool { return strings.HasPrefix(s, method+" ") && strings.HasSuffix(s, suffix) })
}

// Cloud-init: ipconfig0 and ssh_keys (and the user) written as Proxmox's
// keys, sshkeys URL-encoded, then the drive regenerated (PUT …/cloudinit
// in the mutation log); a change made through the API is corrected; a
// converged guest stays quiet.
func TestCloudInitApplied(t *testing.T) {
	log := &mutationLog{}
	p := startPipeline(t, pvesim.Options{OnMutation: log.note}, verifyEveryPass)
	const vmid = 431
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Config: map[string]string{"ide2": "local-lvm:vm-431-cloudinit,media=cdrom"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@host"
	user, keys := "ops", []string{key}
	seq := p.desire(t, &events.Desired{VMID: vmid, CloudInit: &events.CloudInit{User: &user, SSHKeys: &keys,
		IPConfig: map[string]string{"ipconfig0": "ip=10.0.0.5/24, gw=10.0.0.1"}}})
	p.converge(t, vmid, seq)
	g, _ := p.sim.Guest(vmid)
	if g.Config["ipconfig0"] != "gw=10.0.0.1,ip=10.0.0.5/24" || g.Config["ciuser"] != "ops" {
		t.Fatalf("config %v: want ipconfig0 and ciuser set", g.Config)
	}
	if dec, err := url.PathUnescape(g.Config["sshkeys"]); err != nil || dec != key || g.Config["sshkeys"] == key {
		t.Fatalf("sshkeys = %q: want the key URL-encoded as Proxmox expects", g.Config["sshkeys"])
	}
	if !log.has("PUT", "/qemu/431/cloudinit") {
		t.Fatalf("no cloud-init regeneration in the mutation log: %v", log.seen)
	}
	if ci, _ := p.sim.CloudInit(vmid); ci.Generations < 1 || ci.Values["ipconfig0"] != "gw=10.0.0.1,ip=10.0.0.5/24" {
		t.Fatalf("cloud-init drive %+v: want it regenerated with ipconfig0", ci)
	}
	p.quiet(t, vmid, seq)

	before, _ := p.sim.CloudInit(vmid)
	p.drift(t, pve.KindQEMU, "pve1", vmid, map[string]string{"ipconfig0": "ip=dhcp"})
	// Corrected means the drive regenerated too: the executor writes the
	// config, then regenerates, and a regeneration still to come would
	// count as a mutation after convergence below.
	until(30*time.Second, func() bool {
		p.pass(t)
		g, _ := p.sim.Guest(vmid)
		ci, _ := p.sim.CloudInit(vmid)
		return g.Config["ipconfig0"] == "gw=10.0.0.1,ip=10.0.0.5/24" && ci.Generations > before.Generations &&
			ci.Values["ipconfig0"] == "gw=10.0.0.1,ip=10.0.0.5/24"
	})
	if g, _ := p.sim.Guest(vmid); g.Config["ipconfig0"] != "gw=10.0.0.1,ip=10.0.0.5/24" {
		t.Fatalf("drift not corrected: ipconfig0 = %q", g.Config["ipconfig0"])
	}
	p.quiet(t, vmid, seq)
}

// Pools: a guest moves into its desired pool (through PUT /pools), a move
// made by hand is corrected, and a pool that does not exist is created only
// with --create-pools.
func TestPoolMembership(t *testing.T) {
	log := &mutationLog{}
	p := startPipeline(t, pvesim.Options{OnMutation: log.note}, verifyEveryPass, func(c *app.Config) {
		c.Planner.Planner.Policy.CreatePools = true
		c.Executor.Policy.CreatePools = true
	})
	const vmid = 432
	if err := p.sim.AddPool("prod"); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddPool("other"); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	pool := "prod"
	seq := p.desire(t, &events.Desired{VMID: vmid, Pool: &pool})
	p.converge(t, vmid, seq)
	if g, _ := p.sim.Guest(vmid); g.Pool != "prod" || !log.has("PUT", "/pools/prod") {
		t.Fatalf("guest %+v: want in pool prod through PUT /pools/prod (%v)", g, log.seen)
	}
	p.quiet(t, vmid, seq)

	// Moved to another pool by hand: moved back.
	if err := pvesimtest.Client(t, p.sim).SetPool(pvesimtest.Context(t), "other", vmid, false); err != nil {
		t.Fatal(err)
	}
	until(30*time.Second, func() bool {
		p.pass(t)
		g, _ := p.sim.Guest(vmid)
		return g.Pool == "prod"
	})
	if g, _ := p.sim.Guest(vmid); g.Pool != "prod" {
		t.Fatalf("pool drift not corrected: %+v", g)
	}
	p.quiet(t, vmid, seq)

	pool = "fresh"
	seq = p.desire(t, &events.Desired{VMID: vmid, Pool: &pool})
	p.converge(t, vmid, seq)
	if g, _ := p.sim.Guest(vmid); g.Pool != "fresh" || !slices.Contains(p.sim.Pools(), "fresh") {
		t.Fatalf("guest %+v, pools %v: want the pool created and the guest in it", g, p.sim.Pools())
	}
	if info, _ := p.sim.Pool("prod"); slices.Contains(info.VMs, vmid) {
		t.Fatalf("still a member of prod: %+v", info)
	}
}

// A protective snapshot is taken before a restart, named after its action,
// and history shows it with how to roll back.
func TestSnapshotBeforeRestart(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyEveryPass)
	const vmid = 433
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Running: true, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	running, cores, allowed := events.PowerRunning, 2, events.RestartAllowed
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores, Restart: &allowed,
		SnapshotBefore: []string{events.SnapshotRestart}})
	p.converge(t, vmid, seq)
	p.settle(t, vmid) // and no second reboot after
	snaps := p.sim.Snapshots(vmid)
	if len(snaps) != 1 || !strings.HasPrefix(snaps[0].Name, events.SnapshotPrefix) || snaps[0].Config["cores"] != "1" {
		t.Fatalf("snapshots %+v: want one converge snapshot of the guest with 1 core", snaps)
	}
	if ts := powerTasks(p.sim, vmid); len(ts) != 1 || ts[0] != "qmreboot" {
		t.Fatalf("tasks %v, want one reboot", ts)
	}
	var snapAt, rebootAt time.Time
	for _, tk := range p.sim.Tasks() {
		switch {
		case tk.ID == "433" && tk.Type == "qmsnapshot":
			snapAt = tk.End
		case tk.ID == "433" && tk.Type == "qmreboot":
			rebootAt = tk.Start
		}
	}
	if snapAt.IsZero() || rebootAt.Before(snapAt) {
		t.Fatalf("snapshot ended %v, reboot started %v: want the snapshot first", snapAt, rebootAt)
	}
	es, err := audit.Timeline(pvesimtest.Context(t), p.a.Bus().JS, "PVE", events.DefaultCluster, vmid, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range es {
		lines = append(lines, e.Summary)
	}
	hist := strings.Join(lines, "\n")
	want := "roll back with: qm rollback 433 " + snaps[0].Name
	if !strings.Contains(hist, want) {
		t.Fatalf("history does not say %q:\n%s", want, hist)
	}
}

// --snapshot-keep 1: the second protective snapshot prunes the first;
// snapshots converge did not take are never touched.
func TestSnapshotKeepPrunes(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyEveryPass, func(c *app.Config) {
		c.Planner.Planner.Policy.SnapshotKeep = 1
		c.Executor.Policy.SnapshotKeep = 1
	})
	const vmid = 434
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Running: true, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	c := pvesimtest.Client(t, p.sim)
	tk, err := c.Snapshot(pvesimtest.Context(t), pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid}, "manual", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTask(pvesimtest.Context(t), tk, pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	running, allowed := events.PowerRunning, events.RestartAllowed
	var names []string
	for _, cores := range []int{2, 3} {
		seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores, Restart: &allowed,
			SnapshotBefore: []string{events.SnapshotRestart}})
		p.converge(t, vmid, seq)
		names = nil
		for _, s := range p.sim.Snapshots(vmid) {
			names = append(names, s.Name)
		}
	}
	if len(names) != 2 || names[0] != "manual" || !strings.HasPrefix(names[1], events.SnapshotPrefix) {
		t.Fatalf("snapshots %v: want the manual one and the newest converge one", names)
	}
	if snaps := p.sim.Snapshots(vmid); snaps[1].Config["cores"] != "2" {
		t.Fatalf("kept snapshot %+v: want the one taken before the second restart (cores 2)", snaps[1])
	}
}

package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// The whole guest end to end: each field set through the pipeline against
// the simulator (through go-proxmox), drift made through the Proxmox API
// corrected, and no false drift once converged.

// verifyEveryPass has each observer pass read every guest's config.
func verifyEveryPass(c *observer.Config) { c.ConfigRefresh, c.VerifyRate = time.Nanosecond, 1000 }

// verifyOff has the observer read only new, changed and unconfirmed
// guests.
func verifyOff(c *observer.Config) { c.VerifyOff = true }

// converge waits until the guest is converged at or after seq, running
// observer passes.
func (p *pipeline) converge(t *testing.T, vmid int, seq uint64) {
	t.Helper()
	if doc := p.passUntil(t, vmid, seq, planner.Converged, 30*time.Second); doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("guest %d not converged: %+v", vmid, doc)
	}
}

// quiet checks that more passes over a converged guest reach Proxmox with
// no mutation: Proxmox's round trips of every managed value read as no
// drift. It asserts only once the system has settled: the planner has
// folded the guest's newest observation, action and result, and nothing
// acts on it (settle), so a drift those passes made the planner act on is
// counted, not missed.
func (p *pipeline) quiet(t *testing.T, vmid int, seq uint64) {
	t.Helper()
	p.converge(t, vmid, seq)
	before := p.sim.Mutations()
	p.settle(t, vmid)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("%d mutations after convergence: false drift (results %+v)", n, p.results(t, vmid))
	}
}

// drift changes the guest's config through the Proxmox API, as a person
// would.
func (p *pipeline) drift(t *testing.T, kind pve.Kind, node string, vmid int, set map[string]string) {
	t.Helper()
	c := pvesimtest.Client(t, p.sim)
	ref := pve.GuestRef{Kind: kind, Node: node, VMID: vmid}
	tk, err := c.UpdateConfig(pvesimtest.Context(t), ref, pve.ConfigChange{Set: set})
	if err != nil {
		t.Fatal(err)
	}
	if !tk.IsZero() {
		if _, err := c.WaitTask(pvesimtest.Context(t), tk, pve.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Disks: a grow plus a cores change on a running VM. The resize is applied
// at once and kept (the cores change stays pending: restart never), a new
// disk is allocated on its storage, and no pass finds drift after. A
// shrink is refused with its reason and never reaches Proxmox.
func TestDisksGrowKeptAndShrinkRefused(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyEveryPass)
	const vmid = 401
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Running: true, Cores: 1,
		Config: map[string]string{"scsi0": "local-lvm:vm-401-disk-0,size=8G"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	running, cores := events.PowerRunning, 2
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores,
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 32}, "scsi1": {SizeGiB: 2, Storage: "local-lvm"}}})
	doc := p.passUntil(t, vmid, seq, planner.Pending, 30*time.Second)
	until(30*time.Second, func() bool {
		p.pass(t)
		doc = p.waitState(t, vmid, seq, planner.Pending, time.Second)
		return doc != nil && strings.Contains(doc.Status.Reason, "waits for a restart")
	})
	g, _ := p.sim.Guest(vmid)
	if !strings.Contains(g.Config["scsi0"], "size=32G") || g.Pending["cores"] != "2" || g.Status != "running" {
		t.Fatalf("guest %+v: want scsi0 grown to 32G, cores 2 pending, running (status %+v)", g, doc.Status)
	}
	if !strings.HasPrefix(g.Config["scsi1"], "local-lvm:vm-401-disk-") || !strings.Contains(g.Config["scsi1"], "size=2G") {
		t.Fatalf("scsi1 = %q, want a new 2G volume on local-lvm", g.Config["scsi1"])
	}
	if doc == nil || !strings.Contains(doc.Status.Reason, "cores waits for a restart") {
		t.Fatalf("status %+v, want cores waiting for a restart", doc)
	}
	// More passes, folded and acted on, change nothing.
	before := p.sim.Mutations()
	p.settleIn(t, vmid)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("%d mutations after the resize, with cores waiting for a restart (results %+v)", n, p.results(t, vmid))
	}
	if g, _ := p.sim.Guest(vmid); !strings.Contains(g.Config["scsi0"], "size=32G") {
		t.Fatalf("the resize was lost: scsi0 = %q", g.Config["scsi0"])
	}
	if n := strings.Count(strings.Join(tasksOf(p.sim, vmid), " "), "resize"); n != 1 {
		t.Fatalf("%d resize tasks, want 1: %v", n, tasksOf(p.sim, vmid))
	}

	// Without the cores change the guest is converged, and stays so: the
	// disks' round trips read as no drift.
	seq = p.desire(t, &events.Desired{VMID: vmid, Power: &running,
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 32}, "scsi1": {SizeGiB: 2, Storage: "local-lvm"}}})
	p.converge(t, vmid, seq)
	p.quiet(t, vmid, seq)

	// Someone detaches scsi1 through the API (Proxmox keeps the volume as
	// unused0): converge allocates the desired disk again and leaves the
	// old volume alone.
	c := pvesimtest.Client(t, p.sim)
	tk, err := c.UpdateConfig(pvesimtest.Context(t), pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid}, pve.ConfigChange{Delete: []string{"scsi1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !tk.IsZero() {
		if _, err := c.WaitTask(pvesimtest.Context(t), tk, pve.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	old := func() string { g, _ := p.sim.Guest(vmid); return g.Config["unused0"] }()
	until(30*time.Second, func() bool {
		p.pass(t)
		g, _ := p.sim.Guest(vmid)
		return strings.Contains(g.Config["scsi1"], "size=2G")
	})
	if g, _ := p.sim.Guest(vmid); !strings.Contains(g.Config["scsi1"], "size=2G") || old == "" || g.Config["unused0"] != old {
		t.Fatalf("after scsi1 was detached by hand: %v (unused0 was %q)", g.Config, old)
	}
	p.converge(t, vmid, seq)
	p.quiet(t, vmid, seq)

	// A shrink: refused with the reason, nothing sent.
	before = p.sim.Mutations()
	seq = p.desire(t, &events.Desired{VMID: vmid, Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 16}}})
	doc = p.passUntil(t, vmid, seq, planner.Error, 20*time.Second)
	if doc == nil || !strings.Contains(doc.Status.Reason, "disks.scsi0: desired 16 GiB is smaller than the disk's 32 GiB; Proxmox cannot shrink a disk") {
		t.Fatalf("status %+v, want the shrink refused with its reason", doc)
	}
	doc = p.settleIn(t, vmid)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("%d mutations for a refused shrink (results %+v)", n, p.results(t, vmid))
	}
	if doc.Status.Kind != planner.Error {
		t.Fatalf("after more passes: %+v, want the shrink still refused", doc.Status)
	}
}

// Network: a changed interface keeps its MAC, a new one gets Proxmox's
// generated MAC, a change made through the API is corrected (MAC still
// kept), and converged guests stay quiet.
func TestNetworkMACKept(t *testing.T) {
	// Every pass verifies every config: a change made by hand shows in no
	// inventory row.
	p := startPipeline(t, pvesim.Options{}, verifyEveryPass)
	const vmid, ct = 402, 412
	const mac = "BC:24:11:00:00:01"
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Config: map[string]string{"net0": "virtio=" + mac + ",bridge=vmbr0"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: ct, Kind: pvesim.LXC, Running: true,
		Config: map[string]string{"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:02,ip=dhcp,type=veth"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	tag, fw := 10, true
	seq := p.desire(t, &events.Desired{VMID: vmid, Net: map[string]events.NetWant{
		"net0": {Bridge: "vmbr1", Tag: &tag, Firewall: &fw}, "net1": {Model: "e1000", Bridge: "vmbr0"}}})
	ctSeq := p.desire(t, &events.Desired{VMID: ct, Net: map[string]events.NetWant{"net0": {IP: "10.1.0.2/24", GW: "10.1.0.1"}}})
	p.converge(t, vmid, seq)
	p.converge(t, ct, ctSeq)
	g, _ := p.sim.Guest(vmid)
	if g.Config["net0"] != "virtio="+mac+",bridge=vmbr1,firewall=1,tag=10" {
		t.Fatalf("net0 = %q: want the MAC kept, bridge vmbr1, tag 10, firewall", g.Config["net0"])
	}
	if !strings.HasPrefix(g.Config["net1"], "e1000=BC:24:11:") || !strings.HasSuffix(g.Config["net1"], ",bridge=vmbr0") {
		t.Fatalf("net1 = %q: want e1000 with a generated MAC on vmbr0", g.Config["net1"])
	}
	if c, _ := p.sim.Guest(ct); c.Config["net0"] != "name=eth0,bridge=vmbr0,gw=10.1.0.1,hwaddr=BC:24:11:00:00:02,ip=10.1.0.2/24,type=veth" {
		t.Fatalf("container net0 = %q", c.Config["net0"])
	}
	p.quiet(t, vmid, seq)

	// Someone moves the interface back to VLAN 20 by hand.
	p.drift(t, pve.KindQEMU, "pve1", vmid, map[string]string{"net0": "virtio=" + mac + ",bridge=vmbr1,firewall=1,tag=20"})
	until(30*time.Second, func() bool {
		p.pass(t)
		g, _ := p.sim.Guest(vmid)
		return g.Config["net0"] == "virtio="+mac+",bridge=vmbr1,firewall=1,tag=10"
	})
	if g, _ := p.sim.Guest(vmid); g.Config["net0"] != "virtio="+mac+",bridge=vmbr1,firewall=1,tag=10" {
		t.Fatalf("drift not corrected: net0 = %q", g.Config["net0"])
	}
	p.quiet(t, vmid, seq)
}

// Hotplug: a memory change on a running VM with memory hotplug and NUMA
// applies at once (converged, no restart); without them it waits for a
// restart, and the status says so.
func TestHotplugAware(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyOff)
	const hot, cold = 403, 404
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: hot, Running: true, MemoryMiB: 1024,
		Config: map[string]string{"hotplug": "network,disk,usb,memory,cpu", "numa": "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: cold, Running: true, MemoryMiB: 1024}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	mem := 2048
	hs := p.desire(t, &events.Desired{VMID: hot, MemoryMiB: &mem})
	cs := p.desire(t, &events.Desired{VMID: cold, MemoryMiB: &mem})
	p.converge(t, hot, hs)
	if g, _ := p.sim.Guest(hot); g.Config["memory"] != "2048" || len(g.Pending) != 0 {
		t.Fatalf("hotplug guest %+v: want memory 2048 applied live", g)
	}
	var doc = p.passUntil(t, cold, cs, planner.Pending, 20*time.Second)
	until(20*time.Second, func() bool {
		p.pass(t)
		doc = p.waitState(t, cold, cs, planner.Pending, time.Second)
		// Not "memory" alone: "next: config drift: memory_mib", before the
		// write's result, says it too.
		return doc != nil && strings.Contains(doc.Status.Reason, "memory") && strings.Contains(doc.Status.Reason, "waits for a restart")
	})
	if doc == nil || !strings.Contains(doc.Status.Reason, "memory") || !strings.Contains(doc.Status.Reason, "waits for a restart") {
		t.Fatalf("status %+v, want memory waiting for a restart", doc)
	}
	doc = p.settleIn(t, cold)
	if ts := powerTasks(p.sim, cold); len(ts) != 0 {
		t.Fatalf("restart never, yet %v", ts)
	}
	if doc.Status.Kind != planner.Pending {
		t.Fatalf("after more passes: %+v, want still waiting for a restart", doc.Status)
	}
}

package pvesim_test

import (
	"net/http"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// The pvestatd cycle (pvestatd.go): PVE::Service::pvestatd broadcasts each
// node's guests every cycle, and /cluster/resources (PVE::API2::Cluster,
// PVE::API2Tools::extract_vm_stats) reports name, status, maxcpu and maxmem
// from that broadcast, lock and tags live from the config.

func vmRow(t *testing.T, c *proxmox.Client, vmid int) *proxmox.ClusterResource {
	t.Helper()
	ctx := ctxT(t)
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if int(r.VMID) == vmid {
			return r
		}
	}
	t.Fatalf("no row for %d in %+v", vmid, rs)
	return nil
}

// TestPvestatdCycle: a stop shows in /cluster/resources only after the
// node's next cycle (forced here through /_sim/pvestatd), the lock at once.
func TestPvestatdCycle(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, Guests: 2, Faults: pvesim.Faults{ResourcesLag: pvesim.Duration(time.Hour)}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, err := c.Node(ctx, "pve1")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := n.VirtualMachine(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r := vmRow(t, c, 100); r.Status != "running" || r.Name != "vm-100" {
		t.Fatalf("the first broadcast (when the cycle was set) knows the seeded guests: %+v", r)
	}
	task, err := vm.Stop(ctx)
	mustOK(t, s, task, err)
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	if r := vmRow(t, c, 100); r.Status != "running" {
		t.Fatalf("status before the next cycle: %+v, want the broadcast's running", r)
	}
	res, _ := raw(t, http.MethodPost, s.ControlURL()+"/pvestatd", nil, "")
	if res.StatusCode != 200 {
		t.Fatalf("POST /_sim/pvestatd: %s", res.Status)
	}
	if r := vmRow(t, c, 100); r.Status != "stopped" {
		t.Fatalf("status after a cycle: %+v", r)
	}
}

// TestPvestatdRunsFree: with a short cycle the rows catch up on their own,
// node by node, without any call to force them.
func TestPvestatdRunsFree(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 3, Faults: pvesim.Faults{ResourcesLag: pvesim.Duration(150 * time.Millisecond)}})
	c := tokenClient(s)
	ctx := ctxT(t)
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Node: "pve1", Running: true}, {VMID: 102, Node: "pve3", Running: true}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
		n, err := c.Node(ctx, g.Node)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := n.VirtualMachine(ctx, g.VMID)
		if err != nil {
			t.Fatal(err)
		}
		task, err := vm.Stop(ctx)
		mustOK(t, s, task, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		a, b := vmRow(t, c, 100), vmRow(t, c, 102)
		if a.Status == "stopped" && b.Status == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rows never caught up: %+v %+v", a, b)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
}

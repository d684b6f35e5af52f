package pvesim

import (
	"testing"
	"time"
)

// TestPvestatdPerNode: each node's pvestatd broadcasts the guests it runs
// (update_qemu_status lists the node's own VMs), so a migrated guest's row
// stays as its old node last broadcast it until its new node's cycle; a
// guest no cycle has broadcast yet, or a vmid reused by a new guest, is
// "unknown"; a destroyed guest's row goes.
func TestPvestatdPerNode(t *testing.T) {
	s, err := New(Options{Nodes: 2, Faults: Faults{ResourcesLag: Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.AddGuest(GuestSpec{VMID: 100, Node: "pve1", Running: true}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[100]
	if r := s.broadcastRow(g); r.known {
		t.Fatalf("a guest no cycle broadcast: %+v", r)
	}
	s.broadcast("pve1")
	if r := s.broadcastRow(g); r.status != "running" {
		t.Fatalf("after pve1's cycle: %+v", r)
	}
	g.node, g.status = "pve2", "stopped" // migrated offline
	s.broadcast("pve1")
	if r := s.broadcastRow(g); r.status != "running" {
		t.Fatalf("pve1 no longer runs it: its row stays as pve1 broadcast it, got %+v", r)
	}
	s.broadcast("pve2")
	if r := s.broadcastRow(g); r.status != "stopped" {
		t.Fatalf("after pve2's cycle: %+v", r)
	}
	s.guests[100] = &guest{vmid: 100, node: "pve2", status: "running"} // destroyed, the vmid reused
	if r := s.broadcastRow(s.guests[100]); r.known {
		t.Fatalf("a new guest under a reused vmid: %+v", r)
	}
	delete(s.guests, 100)
	s.broadcast("pve1")
	if _, ok := s.rrd[100]; ok {
		t.Fatal("a destroyed guest's row is kept")
	}
}

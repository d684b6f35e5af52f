package pve_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSimAgentAddresses: the guest agent's addresses as the observer reads
// them, through the simulator (which answers as qemu-server's
// API2/Qemu/Agent.pm does): a running VM with the agent enabled answers,
// its addresses normalised (lo and the IPv6 link-local ones left out,
// sorted, each with its interface); a VM without the agent key, stopped,
// or with the agent disabled is Proxmox's 500 refusal of
// assert_agent_available, reported as ErrAgentUnavailable with its
// message; the config read learns the agent flag.
func TestSimAgentAddresses(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Running: true, Config: map[string]string{"agent": "enabled=1,fstrim_cloned_disks=1",
			"net0": "virtio=BC:24:11:0A:0B:0C,bridge=vmbr0", "ipconfig0": "ip=192.0.2.50/24,gw=192.0.2.1,ip6=fd00::50/64"}},
		{VMID: 101, Running: true},
		{VMID: 102, Config: map[string]string{"agent": "1"}},
		{VMID: 103, Running: true, Config: map[string]string{"agent": "0"}},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ref := func(vmid int) pve.GuestRef { return pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid} }
	got, err := c.AgentAddresses(tctx(t), ref(100))
	want := []events.GuestAddress{
		{Interface: "eth0", Address: "192.0.2.50", Prefix: 24, MAC: "bc:24:11:0a:0b:0c"},
		{Interface: "eth0", Address: "fd00::50", Prefix: 64, MAC: "bc:24:11:0a:0b:0c"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("addresses %+v, %v", got, err)
	}
	for vmid, msg := range map[int]string{101: "No QEMU guest agent configured", 102: "VM 102 is not running", 103: "QEMU guest agent is not running"} {
		_, err := c.AgentAddresses(tctx(t), ref(vmid))
		if !errors.Is(err, pve.ErrAgentUnavailable) || err.Error() != pve.ErrAgentUnavailable.Error()+": "+msg {
			t.Errorf("guest %d: %v, want unavailable: %s", vmid, err, msg)
		}
	}
	for vmid, on := range map[int]bool{100: true, 101: false, 102: true, 103: false} {
		g, err := c.GuestConfig(tctx(t), ref(vmid))
		if err != nil || g.AgentEnabled() != on {
			t.Errorf("guest %d: agent enabled %v (%v), want %v", vmid, g != nil && g.AgentEnabled(), err, on)
		}
	}
}

// TestAgentEnabled: the agent property string as qemu-server reads it
// (PVE::QemuServer::Agent's parse of "[enabled=]<1|0>[,…]"), booleans as
// PVE's JSONSchema reads them.
func TestAgentEnabled(t *testing.T) {
	for prop, want := range map[string]bool{
		"": false, "1": true, "0": false, "enabled=1": true, "enabled=0": false, "On": true, "yes,type=isa": true,
		"enabled=TRUE,fstrim_cloned_disks=1": true, "fstrim_cloned_disks=1,enabled=1": true, "type=virtio,enabled=no": false,
		"fstrim_cloned_disks=1": false, "x": false,
	} {
		if got := pve.AgentEnabled(prop); got != want {
			t.Errorf("AgentEnabled(%q) = %v, want %v", prop, got, want)
		}
	}
}

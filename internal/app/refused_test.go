package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// TestProxmoxRefusalsNeverReachProxmox: a desired value Proxmox would
// refuse, which the simulator takes, is rejected and never sent: at
// publish (an ipconfig gateway that is not an address), and, for a rule
// of the guest's kind published without kind (a container NIC's mtu 1),
// once the kind is observed. Either way the guest is rejected with the
// field named and Proxmox sees no mutation.
func TestProxmoxRefusalsNeverReachProxmox(t *testing.T) {
	p := startPipeline(t, pvesim.Options{}, verifyOff)
	const vm, ct = 404, 414
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vm}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: ct, Kind: pvesim.LXC, Running: true,
		Config: map[string]string{"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:03,ip=dhcp,type=veth"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	ctx := pvesimtest.Context(t)
	before := p.sim.Mutations()

	// At publish: DesiredMessage would refuse the body, so it is
	// journalled raw, as another publisher could.
	m, err := events.DesiredMessage(&events.Desired{VMID: vm}, events.PublishOptions{Publisher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m.Data = []byte(`{"vmid":404,"cores":3,"cloudinit":{"ipconfig":{"ipconfig0":"ip=10.0.0.5/24,gw=10.0.0.300"}}}`)
	ack, err := p.a.Bus().Append(ctx, m, journal.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	const vmWhy = `cloudinit.ipconfig.ipconfig0: gw "10.0.0.300" is not an IPv4 address (Proxmox format pve-qm-ipconfig)`
	if doc := p.waitState(t, vm, ack.Seq, planner.Rejected, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, vmWhy) {
		t.Fatalf("VM: %+v; want rejected: %s", doc, vmWhy)
	}
	doc := p.settleIn(t, vm)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("a rejected desired value caused %d Proxmox mutations", n)
	}
	if doc.Status.Kind != planner.Rejected {
		t.Fatalf("VM after more passes: %+v, want still rejected", doc.Status)
	}

	// At plan time: mtu 1 is a VM's "the bridge's MTU", below a
	// container's minimum; the event does not say which kind it is for.
	mtu, cores := 1, 3
	seq := p.desire(t, &events.Desired{VMID: ct, Cores: &cores, Net: map[string]events.NetWant{"net0": {MTU: &mtu}}})
	const ctWhy = "net.net0.mtu: mtu 1 is below a container's minimum 64"
	if doc := p.waitState(t, ct, seq, planner.Rejected, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, ctWhy) {
		t.Fatalf("container: %+v; want rejected: %s", doc, ctWhy)
	}
	doc = p.settleIn(t, ct)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("a desired value the container's kind refuses caused %d Proxmox mutations", n)
	}
	if doc.Status.Kind != planner.Rejected {
		t.Fatalf("container after more passes: %+v, want still rejected", doc.Status)
	}
}

package planner

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

// TestPlanRejectsWhatTheObservedKindRefuses: a desired event without kind
// passes publish with an mtu one kind takes; once the guest is observed to
// be of the other kind, the guest is rejected with the field named and
// nothing is planned, not even the changes Proxmox would take.
func TestPlanRejectsWhatTheObservedKindRefuses(t *testing.T) {
	d, err := events.DecodeDesired([]byte(`{"vmid":101,"cores":4,"net":{"net0":{"bridge":"vmbr0","mtu":1}}}`), 101)
	if err != nil {
		t.Fatal(err)
	}
	lxc := &events.Observed{VMID: 101, Cluster: "pve", Exists: true, Kind: events.LXC, Status: "running", Node: "pve1",
		Config: events.GuestConfig{Cores: 2, Net: map[string]string{"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,type=veth"}},
		ReadAt: t0, Source: events.SourceObserver}
	dec := Plan(viewOf(d, lxc), fresh(), policy(), t0)
	if dec.Status.Kind != Rejected || len(dec.Steps) != 0 ||
		!strings.Contains(dec.Status.Reason, "net.net0.mtu: mtu 1 is below a container's minimum 64") {
		t.Errorf("container with mtu 1: %s %q, %d steps; want rejected naming net.net0.mtu, no steps", dec.Status.Kind, dec.Status.Reason, len(dec.Steps))
	}
	// The same event on a VM (1: the bridge's MTU) is planned as usual.
	vm := *lxc
	vm.Kind = events.QEMU
	vm.Config.Net = map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}
	if dec := Plan(viewOf(d, &vm), fresh(), policy(), t0); dec.Status.Kind == Rejected || len(dec.Steps) == 0 {
		t.Errorf("VM with mtu 1: %s %q, %d steps; want planned", dec.Status.Kind, dec.Status.Reason, len(dec.Steps))
	}
}

package pvesim_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestAgentNetworkInterfaces: GET /nodes/{node}/qemu/{vmid}/agent/
// network-get-interfaces as qemu-server's src/PVE/API2/Qemu/Agent.pm
// answers it: {"result": …} (returns of the operation in the API schema),
// after src/PVE/QemuServer/Agent.pm's assert_agent_available refused, in
// its order, a VM without an agent key ("No QEMU guest agent configured"),
// one not running ("VM <vmid> is not running") and one whose qemu-ga does
// not answer guest-ping ("QEMU guest agent is not running": agent
// disabled, or the VM paused) — all Perl dies, 500. The interfaces are
// qemu-ga's guest-network-get-interfaces: name, hardware-address,
// ip-addresses with ip-address-type ipv4/ipv6.
func TestAgentNetworkInterfaces(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	addGuests(t, s, []pvesim.GuestSpec{
		{VMID: 100, Running: true, Config: map[string]string{"agent": "enabled=1,fstrim_cloned_disks=1",
			"net0": "virtio=BC:24:11:0A:0B:0C,bridge=vmbr0", "ipconfig0": "ip=192.0.2.50/24,gw=192.0.2.1,ip6=fd00::50/64",
			"net1": "e1000=BC:24:11:01:02:03,bridge=vmbr0"}},
		{VMID: 101, Running: true},
		{VMID: 102, Config: map[string]string{"agent": "1"}},
		{VMID: 103, Running: true, Config: map[string]string{"agent": "0"}},
		{VMID: 104, Kind: pvesim.LXC, Running: true},
	})
	c := tokenClient(s)
	n, _ := c.Node(ctxT(t), "pve1")
	vm, err := n.VirtualMachine(ctxT(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	ifs, err := vm.AgentGetNetworkIFaces(ctxT(t))
	if err != nil || len(ifs) != 2 || ifs[0].Name != "eth0" || ifs[0].HardwareAddress != "bc:24:11:0a:0b:0c" {
		t.Fatalf("go-proxmox AgentGetNetworkIFaces: %+v %v", ifs, err)
	}
	st, got, _ := getJSON(t, s, "/nodes/pve1/qemu/100/agent/network-get-interfaces")
	want := `{"result":[` +
		`{"hardware-address":"00:00:00:00:00:00","ip-addresses":[{"ip-address":"127.0.0.1","ip-address-type":"ipv4","prefix":8},{"ip-address":"::1","ip-address-type":"ipv6","prefix":128}],"name":"lo"},` +
		`{"hardware-address":"bc:24:11:0a:0b:0c","ip-addresses":[{"ip-address":"192.0.2.50","ip-address-type":"ipv4","prefix":24},{"ip-address":"fd00::50","ip-address-type":"ipv6","prefix":64},{"ip-address":"fe80::be24:11ff:fe0a:b0c","ip-address-type":"ipv6","prefix":64}],"name":"eth0"},` +
		`{"hardware-address":"bc:24:11:01:02:03","ip-addresses":[{"ip-address":"10.1.2.3","ip-address-type":"ipv4","prefix":24},{"ip-address":"fe80::be24:11ff:fe01:203","ip-address-type":"ipv6","prefix":64}],"name":"eth1"}]}`
	if st != "200 OK" || got != want {
		t.Fatalf("network-get-interfaces: %s\n got %s\nwant %s", st, got, want)
	}
	for _, c := range []struct{ path, status string }{
		{"/nodes/pve1/qemu/101/agent/network-get-interfaces", "500 No QEMU guest agent configured"},
		{"/nodes/pve1/qemu/102/agent/network-get-interfaces", "500 VM 102 is not running"},
		{"/nodes/pve1/qemu/103/agent/network-get-interfaces", "500 QEMU guest agent is not running"},
		{"/nodes/pve2/qemu/100/agent/network-get-interfaces", "500 Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist"},
		{"/nodes/pve1/qemu/104/agent/network-get-interfaces", "500 Configuration file 'nodes/pve1/qemu-server/104.conf' does not exist"},
		{"/nodes/pve1/qemu/100/agent/network-get-interfaces?x=1", "400 Parameter verification failed."},
	} {
		if st, _, body := getJSON(t, s, c.path); st != c.status {
			t.Fatalf("%s: %s, want %s (%v)", c.path, st, c.status, body)
		}
	}
	// Paused, qemu-ga cannot answer guest-ping.
	res, body := form(t, s, "POST", "/nodes/pve1/qemu/100/status/suspend", "")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	if st, _, _ := getJSON(t, s, "/nodes/pve1/qemu/100/agent/network-get-interfaces"); st != "500 QEMU guest agent is not running" {
		t.Fatalf("paused: %s", st)
	}
}

package pvesim_test

import (
	"regexp"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestCloneNICs: a clone gets a new MAC on every NIC and its NICs are
// printed canonically. qemu-server's src/PVE/API2/Qemu.pm clone_vm
// ("always change MAC! address") runs every netN through parse_net, sets a
// random_ether_addr macaddr and prints it with print_net — whatever the
// model (src/PVE/QemuServer/Network.pm's $nic_model_list has 14, not just
// the common five). pve-container's src/PVE/API2/LXC.pm clone_vm does the
// same with parse_lxc_network / print_lxc_network (src/PVE/LXC/Config.pm),
// which prints through pve-common's PVE::JSONSchema::print_property_string:
// name (the one required key) first, then the others sorted, so hwaddr
// sits between gw6 and ip, not at the end.
func TestCloneNICs(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	addGuests(t, s, []pvesim.GuestSpec{
		{VMID: 9100, Template: true, Config: map[string]string{
			"net0": "e1000-82545em=AA:BB:CC:00:00:01,bridge=vmbr0,firewall=1",
			"net1": "pcnet=AA:BB:CC:00:00:02,bridge=vmbr0,tag=7",
			"net2": "virtio=AA:BB:CC:00:00:03,bridge=vmbr0",
			"net3": "ne2k_isa=AA:BB:CC:00:00:04,bridge=vmbr0,link_down=1",
		}},
		{VMID: 9101, Kind: pvesim.LXC, Template: true, Config: map[string]string{
			"net0": "name=eth0,bridge=vmbr0,hwaddr=AA:BB:CC:00:00:05,ip=dhcp,type=veth,firewall=1,tag=5",
		}},
	})
	for _, c := range []struct{ path, body string }{
		{"/nodes/pve1/qemu/9100/clone", "newid=150"},
		{"/nodes/pve1/lxc/9101/clone", "newid=151"},
	} {
		res, body := form(t, s, "POST", c.path, c.body)
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
	}
	mac := `BC:24:11(:[0-9A-F]{2}){3}`
	g, _ := s.Guest(150)
	for k, want := range map[string]string{
		"net0": `^e1000-82545em=` + mac + `,bridge=vmbr0,firewall=1$`,
		"net1": `^pcnet=` + mac + `,bridge=vmbr0,tag=7$`,
		"net2": `^virtio=` + mac + `,bridge=vmbr0$`,
		"net3": `^ne2k_isa=` + mac + `,bridge=vmbr0,link_down=1$`,
	} {
		if !regexp.MustCompile(want).MatchString(g.Config[k]) {
			t.Errorf("QEMU clone %s = %q, want %s", k, g.Config[k], want)
		}
	}
	ct, _ := s.Guest(151)
	if want := `^name=eth0,bridge=vmbr0,firewall=1,hwaddr=` + mac + `,ip=dhcp,tag=5,type=veth$`; !regexp.MustCompile(want).MatchString(ct.Config["net0"]) {
		t.Errorf("LXC clone net0 = %q, want %s", ct.Config["net0"], want)
	}
}

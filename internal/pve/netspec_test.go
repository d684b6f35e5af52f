package pve

import (
	"reflect"
	"strings"
	"testing"
)

// Canonical netN values, as print_net / print_lxc_network store them.
// "qs" = qemu-server e6352be6 src/test/cfg2cmd/*.conf; "bpg" =
// bpg/terraform-provider-proxmox d6bd1ffe
// proxmox/nodes/containers/containers_types_test.go; "built" = constructed
// by print_property_string's rules (default key, required keys, the rest
// sorted), not copied from a payload.
var canonicalNICs = []struct {
	kind  Kind
	value string
	want  NIC
}{
	{KindQEMU, "virtio=2E:01:68:F9:9C:87,bridge=vmbr0", NIC{Model: "virtio", MAC: "2E:01:68:F9:9C:87", Bridge: "vmbr0"}},                                                                                                                           // qs
	{KindQEMU, "e1000=BC:24:11:A3:DA:B1,bridge=vnet0,firewall=1", NIC{Model: "e1000", MAC: "BC:24:11:A3:DA:B1", Bridge: "vnet0", Firewall: true}},                                                                                                  // qs
	{KindQEMU, "vmxnet3=BC:24:11:2C:69:EC,bridge=vnet0,firewall=1", NIC{Model: "vmxnet3", MAC: "BC:24:11:2C:69:EC", Bridge: "vnet0", Firewall: true}},                                                                                              // qs
	{KindQEMU, "virtio=A2:C0:43:77:08:A0,bridge=vmbr0,mtu=900,queues=2", NIC{Model: "virtio", MAC: "A2:C0:43:77:08:A0", Bridge: "vmbr0", MTU: 900, Extra: map[string]string{"queues": "2"}}},                                                       // qs
	{KindQEMU, "e1000=12:34:56:78:90:12,bridge=somebr0,firewall=1", NIC{Model: "e1000", MAC: "12:34:56:78:90:12", Bridge: "somebr0", Firewall: true}},                                                                                              // qs
	{KindQEMU, "virtio=BC:24:11:2A:3B:4C,bridge=vmbr0,firewall=1,mtu=1500,rate=12.5,tag=10", NIC{Model: "virtio", MAC: "BC:24:11:2A:3B:4C", Bridge: "vmbr0", Firewall: true, MTU: 1500, Rate: "12.5", Tag: 10}},                                    // built
	{KindQEMU, "virtio=bc:24:11:2a:3b:4c,bridge=vmbr1,firewall=0,link_down=1,trunks=10;20-30", NIC{Model: "virtio", MAC: "bc:24:11:2a:3b:4c", Bridge: "vmbr1", Extra: map[string]string{"firewall": "0", "link_down": "1", "trunks": "10;20-30"}}}, // built
	{KindQEMU, "rtl8139", NIC{Model: "rtl8139"}},                                                                                          // built: user-mode networking, MAC not yet generated
	{KindLXC, "name=eth0,bridge=vmbr0", NIC{Name: "eth0", Bridge: "vmbr0"}},                                                               // bpg
	{KindLXC, "name=eth0,bridge=vmbr0,host-managed=1", NIC{Name: "eth0", Bridge: "vmbr0", Extra: map[string]string{"host-managed": "1"}}}, // bpg
	{KindLXC, "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5E:7B:1C,ip=dhcp,type=veth", NIC{Name: "eth0", Bridge: "vmbr0", Firewall: true, MAC: "BC:24:11:5E:7B:1C", IP: "dhcp", Type: "veth"}},                                                                                                                                                  // built
	{KindLXC, "name=eth1,bridge=vmbr0,gw=192.168.2.1,gw6=fe80::1,hwaddr=2A:31:01:D5:A4:BF,ip=192.168.3.102/20,ip6=2222::1/64,mtu=9000,rate=5,tag=5,type=veth", NIC{Name: "eth1", Bridge: "vmbr0", GW: "192.168.2.1", GW6: "fe80::1", MAC: "2A:31:01:D5:A4:BF", IP: "192.168.3.102/20", IP6: "2222::1/64", MTU: 9000, Rate: "5", Tag: 5, Type: "veth"}}, // built from pve-container test values
	{KindLXC, "name=eth2,bridge=vmbr0,ip6=auto,type=veth", NIC{Name: "eth2", Bridge: "vmbr0", IP6: "auto", Type: "veth"}},                                                                                                                                                                                                                              // built
}

func TestParseNICCanonical(t *testing.T) {
	for _, tc := range canonicalNICs {
		got, err := ParseNIC(tc.kind, tc.value)
		if err != nil {
			t.Errorf("ParseNIC(%s, %q): %v", tc.kind, tc.value, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseNIC(%s, %q)\n got %#v\nwant %#v", tc.kind, tc.value, got, tc.want)
		}
		if f := got.Format(tc.kind); f != tc.value {
			t.Errorf("Format(ParseNIC(%s, %q)) = %q", tc.kind, tc.value, f)
		}
	}
}

func TestParseNICNormalises(t *testing.T) {
	for _, tc := range []struct {
		kind     Kind
		in, want string
	}{
		// The brief's example order; the GUI's printQemuNetwork order.
		{KindQEMU, "virtio=BC:24:11:2A:3B:4C,bridge=vmbr0,firewall=1,tag=10,rate=12.5,mtu=1500", "virtio=BC:24:11:2A:3B:4C,bridge=vmbr0,firewall=1,mtu=1500,rate=12.5,tag=10"},
		// bpg vms_types_test.go: model= and macaddr= spellings.
		{KindQEMU, "model=virtio,bridge=vmbr0,firewall=1", "virtio,bridge=vmbr0,firewall=1"},
		{KindQEMU, "model=e1000,macaddr=BC:24:11:2A:3B:4C,firewall=true,link_down=off", "e1000=BC:24:11:2A:3B:4C,firewall=1,link_down=0"},
		{KindQEMU, "bridge=vmbr0, virtio=BC:24:11:2A:3B:4C ", "virtio=BC:24:11:2A:3B:4C,bridge=vmbr0"},
		{KindQEMU, "virtio,macaddr=BC:24:11:2A:3B:4C", "virtio=BC:24:11:2A:3B:4C"},
		// pve-container test configs, written by hand out of print order.
		{KindLXC, "bridge=vmbr0,hwaddr=12:34:56:78:90:12,ip=dhcp,ip6=dhcp,name=eth0,type=veth", "name=eth0,bridge=vmbr0,hwaddr=12:34:56:78:90:12,ip=dhcp,ip6=dhcp,type=veth"},
		{KindLXC, "bridge=vmbr0,name=eth0,ip=1.2.3.4/24,gw=4.3.2.1,ip6=2000::1/64,gw6=20ff::1", "name=eth0,bridge=vmbr0,gw=4.3.2.1,gw6=20ff::1,ip=1.2.3.4/24,ip6=2000::1/64"},
		{KindLXC, "name=eth0,hwaddr=46:6B:2E:6F:B1:13,bridge=vmbr0,ip6=fc00::89:c:1/96", "name=eth0,bridge=vmbr0,hwaddr=46:6B:2E:6F:B1:13,ip6=fc00::89:c:1/96"},
		{KindLXC, "name=eth0,firewall=yes,link_down=0", "name=eth0,firewall=1,link_down=0"},
	} {
		n, err := ParseNIC(tc.kind, tc.in)
		if err != nil {
			t.Errorf("ParseNIC(%s, %q): %v", tc.kind, tc.in, err)
			continue
		}
		if got := n.Format(tc.kind); got != tc.want {
			t.Errorf("ParseNIC(%s, %q).Format = %q, want %q", tc.kind, tc.in, got, tc.want)
		}
	}
}

func TestParseNICErrors(t *testing.T) {
	for _, tc := range []struct {
		kind    Kind
		in, msg string
	}{
		{"bhyve", "virtio", "guest kind"},
		{KindQEMU, "", "no model"},
		{KindQEMU, "bridge=vmbr0", "no model"},
		{KindQEMU, "macaddr=BC:24:11:2A:3B:4C,bridge=vmbr0", "no model"},
		{KindQEMU, "virtio9=BC:24:11:2A:3B:4C", "no model"},
		{KindQEMU, "virtio9", `unknown model "virtio9"`},
		{KindQEMU, "virtio=BC:24:11:2A:3B:4C,e1000=BC:24:11:2A:3B:4D", "model given twice"},
		{KindQEMU, "virtio,model=e1000", "model given twice"},
		{KindQEMU, "virtio=BC:24:11:2A:3B:4C,macaddr=BC:24:11:2A:3B:4C", "MAC given twice"},
		{KindQEMU, "virtio=01:24:11:2A:3B:4C", "not a unicast MAC"},
		{KindQEMU, "virtio=BC:24:11:2A:3B", "not a unicast MAC"},
		{KindQEMU, "virtio,tag=0", "tag=\"0\" must be an integer from 1 to 4094"},
		{KindQEMU, "virtio,tag=4095", "from 1 to 4094"},
		{KindQEMU, "virtio,tag=-5", "from 1 to 4094"},
		{KindQEMU, "virtio,mtu=65521", "from 1 to 65520"},
		{KindQEMU, "virtio,rate=fast", "not a non-negative number"},
		{KindQEMU, "virtio,rate=-1", "not a non-negative number"},
		{KindQEMU, "virtio,firewall=2", "not a boolean"},
		{KindQEMU, "virtio,bridge=vmbr0,bridge=vmbr1", "duplicate key"},
		{KindLXC, "bridge=vmbr0", "no interface name"},
		{KindLXC, "eth0,bridge=vmbr0", "has no key"},
		{KindLXC, "name=eth0,type=macvlan", "must be veth"},
		{KindLXC, "name=eth0,mtu=63", "from 64 to 65535"},
		{KindLXC, "name=eth0,ip=10.0.0.5", "not dhcp, manual or an IPv4 CIDR"},
		{KindLXC, "name=eth0,ip6=10.0.0.5/24", "IPv6 CIDR"},
		{KindLXC, "name=eth0,gw=fe80::1", "not an IPv4 address"},
		{KindLXC, "name=eth0,hwaddr=zz:24:11:2A:3B:4C", "not a unicast MAC"},
	} {
		_, err := ParseNIC(tc.kind, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseNIC(%s, %q) error = %v, want one containing %q", tc.kind, tc.in, err, tc.msg)
		}
	}
}

// Fields set win over Extra; fields of the other kind are ignored.
func TestNICFormatFieldsWin(t *testing.T) {
	n := NIC{Model: "virtio", Bridge: "vmbr0", Firewall: true, Name: "eth0", IP: "dhcp",
		Extra: map[string]string{"firewall": "0", "bridge": "vmbr9", "model": "e1000", "queues": "4"}}
	if got, want := n.Format(KindQEMU), "virtio,bridge=vmbr0,firewall=1,queues=4"; got != want {
		t.Errorf("QEMU Format = %q, want %q", got, want)
	}
	if got, want := n.Format(KindLXC), "name=eth0,bridge=vmbr0,firewall=1,ip=dhcp,model=e1000,queues=4"; got != want {
		t.Errorf("LXC Format = %q, want %q", got, want)
	}
}

// FuzzParseNIC: whatever ParseNIC accepts formats to a value that parses
// to the same NIC and formats identically.
func FuzzParseNIC(f *testing.F) {
	for _, tc := range canonicalNICs {
		f.Add(tc.kind == KindLXC, tc.value)
	}
	f.Add(false, "model=virtio,macaddr=bc:24:11:2a:3b:4c,tag=010,firewall=TRUE")
	f.Add(true, "name=eth0,hwaddr=BC:24:11:5E:7B:1C,firewall=0,x=a=b")
	f.Fuzz(func(t *testing.T, lxc bool, value string) {
		kind := KindQEMU
		if lxc {
			kind = KindLXC
		}
		n, err := ParseNIC(kind, value)
		if err != nil {
			return
		}
		once := n.Format(kind)
		n2, err := ParseNIC(kind, once)
		if err != nil {
			t.Fatalf("ParseNIC(%q) ok, but its Format %q fails: %v", value, once, err)
		}
		if twice := n2.Format(kind); twice != once {
			t.Fatalf("Format not stable: %q -> %q -> %q", value, once, twice)
		}
		if !reflect.DeepEqual(n, n2) {
			t.Fatalf("ParseNIC(Format(%q)) = %#v, want %#v", value, n2, n)
		}
	})
}

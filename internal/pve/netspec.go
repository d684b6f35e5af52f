package pve

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"

	"github.com/converge-pve/converge/events"
)

// NIC is a guest network device, netN of a QEMU VM (qemu-server
// PVE/QemuServer/Network.pm parse_net/print_net) or of a container
// (pve-container PVE/LXC/Config.pm parse_lxc_network/print_lxc_network).
type NIC struct {
	// Model is the QEMU NIC model (virtio, e1000, ...); unused for LXC.
	Model string
	// MAC is macaddr (QEMU, written "virtio=MAC") or hwaddr (LXC), spelt
	// as stored: Proxmox keeps a given MAC's case and generates upper case.
	MAC    string
	Bridge string
	Tag    int // 0: none
	// Firewall is firewall=1. An explicit firewall=0 is kept in Extra.
	Firewall bool
	Rate     string // rate= as written (a number of MB/s), "" none
	MTU      int    // 0: none
	// Name, IP, GW, IP6, GW6 and Type are the container's (LXC only).
	Name, IP, GW, IP6, GW6, Type string
	// Extra holds every other key (queues, trunks, link_down, ...),
	// booleans as 1/0.
	Extra map[string]string
}

// qemuNICModels are Network.pm's $nic_model_list: each is also a key
// whose value is the MAC ("virtio=BC:24:11:2A:3B:4C").
var qemuNICModels = map[string]bool{
	"e1000": true, "e1000-82540em": true, "e1000-82544gc": true, "e1000-82545em": true, "e1000e": true,
	"i82551": true, "i82557b": true, "i82559er": true, "ne2k_isa": true, "ne2k_pci": true, "pcnet": true,
	"rtl8139": true, "virtio": true, "vmxnet3": true,
}

var (
	nicBools = map[Kind]map[string]bool{
		KindQEMU: {"firewall": true, "link_down": true, "host-tunnel": true},
		KindLXC:  {"firewall": true, "link_down": true, "host-managed": true},
	}
	// macRE is pve-common's pve_verify_mac_addr: unicast only.
	macRE    = regexp.MustCompile(`(?i)^[a-f0-9][02468ace](?::[a-f0-9]{2}){5}$`)
	uintRE   = regexp.MustCompile(`^\d+$`)
	numberRE = regexp.MustCompile(`^\+?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$`)
)

// ParseNIC parses the value of a netN key of a guest of this kind.
func ParseNIC(kind Kind, value string) (NIC, error) {
	what := string(kind) + " net"
	if !kind.Valid() {
		return NIC{}, fmt.Errorf("guest kind %q must be %q or %q", kind, KindQEMU, KindLXC)
	}
	p, err := events.ParsePropString(what, value, nil)
	if err != nil {
		return NIC{}, err
	}
	if err := events.NormaliseBooleans(what, value, p.KV, nicBools[kind]); err != nil {
		return NIC{}, err
	}
	var n NIC
	if kind == KindQEMU {
		err = n.takeQEMUModel(what, value, &p)
	} else {
		err = n.takeLXCFields(what, value, &p)
	}
	if err != nil {
		return NIC{}, err
	}
	if err := n.takeCommon(kind, what, value, p.KV); err != nil {
		return NIC{}, err
	}
	if len(p.KV) > 0 {
		n.Extra = p.KV
	}
	return n, nil
}

// takeQEMUModel reads the model and MAC in any of the spellings print_net
// folds into "model=MAC": "virtio=MAC", "model=virtio,macaddr=MAC",
// a bare "virtio".
func (n *NIC) takeQEMUModel(what, value string, p *events.PropString) error {
	if err := p.TakeDefault(what, value, "model"); err != nil {
		return err
	}
	n.Model = p.Bare
	for k, v := range p.KV {
		if !qemuNICModels[k] {
			continue
		}
		if n.Model != "" {
			return fmt.Errorf("%s %q: model given twice (%s and %s)", what, value, n.Model, k)
		}
		n.Model, n.MAC = k, v
		delete(p.KV, k)
	}
	if mac, ok := p.KV["macaddr"]; ok {
		if n.MAC != "" {
			return fmt.Errorf("%s %q: MAC given twice (%s and macaddr=%s)", what, value, n.MAC, mac)
		}
		n.MAC = mac
		delete(p.KV, "macaddr")
	}
	switch {
	case n.Model == "":
		return fmt.Errorf("%s %q: no model (e.g. virtio=<MAC> or virtio)", what, value)
	case !qemuNICModels[n.Model]:
		return fmt.Errorf("%s %q: unknown model %q", what, value, n.Model)
	}
	return n.checkMAC(what, value)
}

func (n *NIC) takeLXCFields(what, value string, p *events.PropString) error {
	if p.HasBare {
		return fmt.Errorf("%s %q: %q has no key", what, value, p.Bare)
	}
	kv := p.KV
	take := func(k string) string { v := kv[k]; delete(kv, k); return v }
	n.Name, n.MAC, n.Type = take("name"), take("hwaddr"), take("type")
	n.IP, n.GW, n.IP6, n.GW6 = take("ip"), take("gw"), take("ip6"), take("gw6")
	switch {
	case n.Name == "":
		return fmt.Errorf("%s %q: no interface name (name=eth0)", what, value)
	case n.Type != "" && n.Type != "veth":
		return fmt.Errorf("%s %q: type=%q must be veth", what, value, n.Type)
	}
	for _, c := range []struct {
		key, v string
		check  func(string) error
	}{{"ip", n.IP, events.CheckIPv4Config}, {"gw", n.GW, events.CheckIPv4}, {"ip6", n.IP6, events.CheckIPv6Config}, {"gw6", n.GW6, events.CheckIPv6}} {
		if c.v == "" {
			continue
		}
		if err := c.check(c.v); err != nil {
			return fmt.Errorf("%s %q: %s: %w", what, value, c.key, err)
		}
	}
	return n.checkMAC(what, value)
}

func (n *NIC) checkMAC(what, value string) error {
	if n.MAC != "" && !macRE.MatchString(n.MAC) {
		return fmt.Errorf("%s %q: %q is not a unicast MAC address", what, value, n.MAC)
	}
	return nil
}

// takeCommon reads the keys both kinds share.
func (n *NIC) takeCommon(kind Kind, what, value string, kv map[string]string) error {
	n.Bridge = kv["bridge"]
	delete(kv, "bridge")
	if kv["firewall"] == "1" {
		n.Firewall = true
		delete(kv, "firewall")
	}
	if r, ok := kv["rate"]; ok {
		if !numberRE.MatchString(r) {
			return fmt.Errorf("%s %q: rate=%q is not a non-negative number", what, value, r)
		}
		n.Rate = r
		delete(kv, "rate")
	}
	minMTU, maxMTU := 1, 65520
	if kind == KindLXC {
		minMTU, maxMTU = 64, 65535
	}
	for _, c := range []struct {
		key      string
		dst      *int
		min, max int
	}{{"tag", &n.Tag, 1, 4094}, {"mtu", &n.MTU, minMTU, maxMTU}} {
		s, ok := kv[c.key]
		if !ok {
			continue
		}
		v, err := strconv.Atoi(s)
		if !uintRE.MatchString(s) || err != nil || v < c.min || v > c.max {
			return fmt.Errorf("%s %q: %s=%q must be an integer from %d to %d", what, value, c.key, s, c.min, c.max)
		}
		*c.dst = v
		delete(kv, c.key)
	}
	return nil
}

// Format writes n as qemu-server's print_net (kind qemu: "model=MAC"
// first) or pve-container's print_lxc_network (kind lxc: name= first)
// store it, every other key sorted. For every value Proxmox printed,
// ParseNIC(kind, v).Format(kind) == v. Fields of the other kind are
// ignored; a field that is set wins over the same key in Extra.
func (n NIC) Format(kind Kind) string {
	kv := maps.Clone(n.Extra)
	if kv == nil {
		kv = map[string]string{}
	}
	set := func(k, v string) {
		if v != "" {
			kv[k] = v
		}
	}
	set("bridge", n.Bridge)
	set("rate", n.Rate)
	if n.Firewall {
		kv["firewall"] = "1"
	}
	if n.Tag != 0 {
		kv["tag"] = strconv.Itoa(n.Tag)
	}
	if n.MTU != 0 {
		kv["mtu"] = strconv.Itoa(n.MTU)
	}
	if kind != KindLXC {
		delete(kv, "model")
		delete(kv, "macaddr")
		first := n.Model
		if n.MAC != "" {
			first += "=" + n.MAC
		}
		return events.PrintPropString([]string{first}, kv)
	}
	set("name", n.Name)
	set("hwaddr", n.MAC)
	set("ip", n.IP)
	set("gw", n.GW)
	set("ip6", n.IP6)
	set("gw6", n.GW6)
	set("type", n.Type)
	return events.PrintPropString(nil, kv, "name")
}

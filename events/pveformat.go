package events

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Proxmox's own formats for the desired values that reach Proxmox as
// strings. The desired schema admits their shape; these checks refuse
// what Proxmox would refuse (its API schema, or qemu-server when it
// starts the VM), so such a value is rejected at publish and never planned:
// otherwise the simulator, which takes it, would call the guest converged
// where a real cluster reports an error.

// storageIDRe is pve-common's parse_id, used for pve-storage-id and the
// storage part of pve-volume-id (pve-storage src/PVE/Storage/Plugin.pm
// parse_volume_id): at least two characters, case-insensitive.
var storageIDRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]$`)

// MTU bounds by guest kind: a container's NIC takes 64..65535
// (pve-container src/PVE/LXC/Config.pm net schema); a VM's takes 1..65520
// in the API, but qemu-server refuses 2..575 when it starts the VM
// (PVE/QemuServer.pm print_netdevice_full: "smaller than the IP minimum
// MTU"), 1 meaning the bridge's MTU.
const (
	minLXCMTU  = 64
	minQEMUMTU = 576
)

// mtuProblem is why Proxmox refuses mtu on a guest of kind, "" when it
// does not; kind "" refuses only what both kinds refuse.
func mtuProblem(kind GuestKind, mtu int) string {
	lxc := mtu < minLXCMTU
	qemu := mtu > 1 && mtu < minQEMUMTU
	switch {
	case kind == LXC && lxc:
		return fmt.Sprintf("mtu %d is below a container's minimum %d (Proxmox's container net schema: 64..65535)", mtu, minLXCMTU)
	case kind == QEMU && qemu:
		return fmt.Sprintf("mtu %d is below the IP minimum %d: Proxmox refuses to start the VM (1 means the bridge's MTU)", mtu, minQEMUMTU)
	case kind == "" && lxc && qemu:
		return fmt.Sprintf("mtu %d is refused for both kinds: a container's minimum is %d, a VM's 576 (or 1, the bridge's MTU)", mtu, minLXCMTU)
	}
	return ""
}

// kindProblems are the rules that depend on the guest's kind, checked
// with kind "" when the event does not say.
func (d *Desired) kindProblems(kind GuestKind) []FieldError {
	var p []FieldError
	for _, k := range sortedKeys(d.Net) {
		if m := d.Net[k].MTU; m != nil {
			if why := mtuProblem(kind, *m); why != "" {
				p = append(p, FieldError{"net." + k + ".mtu", why})
			}
		}
	}
	return p
}

// CheckKind checks the rules that depend on the guest's kind against a
// guest of kind: the planner calls it once it observes the kind of a
// guest whose desired event did not state it (DecodeDesired checked the
// stated kind already). The error is a *ValidationError.
func (d *Desired) CheckKind(kind GuestKind) error {
	if p := d.kindProblems(kind); len(p) > 0 {
		return &ValidationError{Problems: capProblems(p)}
	}
	return nil
}

// checkProxmox holds the Proxmox format rules of the string fields.
func (d *Desired) checkProxmox() []FieldError {
	var p []FieldError
	add := func(field, format string, err error) {
		if err != nil {
			p = append(p, FieldError{field, fmt.Sprintf("%s (Proxmox format %s)", err, format)})
		}
	}
	kind := GuestKind("")
	if d.Kind != nil {
		kind = *d.Kind
	}
	p = append(p, d.kindProblems(kind)...)
	for _, k := range sortedKeys(d.Net) {
		n := d.Net[k]
		if n.IP != "" {
			_, err := canonIPv4Config(n.IP)
			add("net."+k+".ip", "pve-ipv4-config", err)
		}
		if n.GW != "" {
			_, err := canonIPv4(n.GW)
			add("net."+k+".gw", "ipv4", err)
		}
	}
	ci := d.CloudInit
	if ci == nil {
		return p
	}
	for _, k := range sortedKeys(ci.IPConfig) {
		_, err := ipConfig(ci.IPConfig[k])
		add("cloudinit.ipconfig."+k, "pve-qm-ipconfig", err)
	}
	if ci.Nameserver != nil {
		add("cloudinit.nameserver", "address-list", checkNameservers(*ci.Nameserver))
	}
	if ci.SearchDomain != nil {
		add("cloudinit.searchdomain", "dns-name-list", checkSearchDomains(*ci.SearchDomain))
	}
	if ci.Custom != nil {
		add("cloudinit.custom", "pve-qm-cicustom", checkCICustom(*ci.Custom))
	}
	return p
}

// splitList is pve-common's PVE::Tools::split_list: blanks, commas,
// semicolons and NULs separate entries.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == 0 || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
	})
}

// checkNameservers takes IP addresses only. Proxmox's address-list also
// takes DNS names (pve-common pve_verify_address), where "10.0.0.300"
// passes as a name; a resolver is reached by address, and cloud-init
// writes these entries into resolv.conf, so a name is refused here.
func checkNameservers(s string) error {
	for _, f := range splitList(s) {
		if a, err := netip.ParseAddr(f); err != nil || a.Zone() != "" {
			return fmt.Errorf("nameserver %q is not an IP address", f)
		}
	}
	return nil
}

// checkSearchDomains takes DNS names (pve-common pve_verify_dns_name). A
// VM's searchdomain has no format in qemu-server's schema, but cloud-init
// writes it into resolv.conf, and a container's takes only dns-name-list.
func checkSearchDomains(s string) error {
	for _, f := range splitList(s) {
		if !dnsNameRE.MatchString(f) {
			return fmt.Errorf("search domain %q is not a DNS name", f)
		}
	}
	return nil
}

// checkCICustom is qemu-server's cicustom format: meta=, network=, user=,
// vendor=, each once, each a pve-volume-id (STORAGE:VOLUME).
func checkCICustom(s string) error {
	p, err := ParsePropString("cicustom", s, nil)
	if err != nil {
		return err
	}
	if p.HasBare {
		return fmt.Errorf("%q has no key (meta=, network=, user=, vendor=)", p.Bare)
	}
	for _, k := range sortedKeys(p.KV) {
		switch k {
		case "meta", "network", "user", "vendor":
		default:
			return fmt.Errorf("unknown key %q (meta, network, user, vendor)", k)
		}
		id, vol, ok := strings.Cut(p.KV[k], ":")
		if !ok || vol == "" || !storageIDRe.MatchString(id) {
			return fmt.Errorf("%s %q is not a volume id STORAGE:VOLUME (e.g. local:snippets/user.yaml)", k, p.KV[k])
		}
	}
	return nil
}

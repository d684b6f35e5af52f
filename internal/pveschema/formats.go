package pveschema

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// formatChecks are the named formats checked here, with pve-common's (or
// the registering package's) error texts; each returns "" when valid.
var formatChecks = map[string]func(string) string{
	"pve-vmid":       match(`^[1-9][0-9]{2,8}$`, "value does not look like a valid VM ID"),
	"pve-node":       match(`^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$`, "value does not look like a valid node name"),
	"pve-configid":   matchf(`^(?i:[a-z][a-z0-9_-]+)$`, "invalid configuration ID '%s'"),
	"pve-storage-id": matchf(`^(?i:[a-z][a-z0-9\-_.]*[a-z0-9])$`, "storage ID '%s' contains illegal characters"),
	// Pools may nest up to three levels (pool/sub/sub).
	"pve-poolid":    matchf(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`, "invalid pool ID '%s'"),
	"pve-bridge-id": matchf(`^[-_.\w\d]+$`, "invalid bridge ID '%s'"),
	"pve-tag":       pveTag,
	"pve-tag-list":  tagList,
	"pve-volume-id": matchf(`^(?i:[a-z][a-z0-9\-_.]*[a-z0-9]):.+$`, "unable to parse volume ID '%s'"),
	"mac-addr":      match(`^(?i:[a-f0-9][02468ace](?::[a-f0-9]{2}){5})$`, "value does not look like a valid unicast MAC address"),
	"dns-name":      dnsName,
	"ipv4":          ipv4,
	"ipv6":          ipv6,
	"ip":            ipAny,
	"CIDRv4":        cidrv4,
	"CIDRv6":        cidrv6,
	"CIDR":          cidrAny,
	"IPorCIDR": func(v string) string {
		if ipAny(v) == "" || cidrAny(v) == "" {
			return ""
		}
		return "value does not look like a valid IP address or CIDR network"
	},
	"address": func(v string) string {
		if ipAny(v) == "" || dnsName(v) == "" {
			return ""
		}
		return "value does not look like a valid address: " + v
	},
	"ipv4mask": ipv4Mask,
	// pve-ha-manager src/PVE/HA/Tools.pm pve_verify_ha_resource_or_vm_id:
	// m/^([a-z]+:\S+|\d+)$/; an unknown type (foo:1) or a bad VMID
	// (vm:abc) is the API call's error, not the format's.
	"pve-ha-resource-or-vm-id": match(`^([a-z]+:\S+|\d+)$`, "value does not look like a valid ha resource id"),
	"disk-size":                match(`^\d+(\.\d+)?[KMGT]?$`, "unable to parse size"),
	// pve-common pve_verify_urlencoded: the characters encodeURIComponent
	// leaves alone, and '%'. It does not check that '%' starts a %XX
	// escape: "100%" passes, as in Perl.
	"urlencoded":      matchf(`^[-%a-zA-Z0-9_.!~*'()]*$`, "invalid urlencoded string: %s"),
	"pve-ipv4-config": ipConfig(false),
	"pve-ipv6-config": ipConfig(true),
}

// namedPropStrings are named formats that are property strings (registered
// as a hash in Perl); apidata.js names them without their keys.
var namedPropStrings = map[string]*PropString{
	// qemu-server's ipconfig[n]: [gw=<IPv4>][,gw6=<IPv6>][,ip=<IPv4/CIDR>|dhcp][,ip6=<IPv6/CIDR>|dhcp|auto]
	"pve-qm-ipconfig": {Keys: []Param{
		{Name: "gw", Type: "string", Optional: true, Format: "ipv4", Requires: "ip"},
		{Name: "gw6", Type: "string", Optional: true, Format: "ipv6", Requires: "ip6"},
		{Name: "ip", Type: "string", Optional: true, Format: "pve-ipv4-config"},
		{Name: "ip6", Type: "string", Optional: true, Format: "pve-ipv6-config"},
	}},
	// qemu-server's cicustom: [meta=<volume>][,network=<volume>][,user=<volume>][,vendor=<volume>]
	"pve-qm-cicustom": {Keys: []Param{
		{Name: "meta", Type: "string", Optional: true, Format: "pve-volume-id"},
		{Name: "network", Type: "string", Optional: true, Format: "pve-volume-id"},
		{Name: "user", Type: "string", Optional: true, Format: "pve-volume-id"},
		{Name: "vendor", Type: "string", Optional: true, Format: "pve-volume-id"},
	}},
}

// checkFormat checks a named format, with pve-common's suffixes: X-list is
// a list of X (split on commas, semicolons, spaces), X-opt X or empty.
// Unknown formats pass (UncheckedFormats).
func checkFormat(key, name, v string) string {
	if ps, ok := namedPropStrings[name]; ok {
		return checkPropString(key, ps, v)
	}
	if f, ok := formatChecks[name]; ok {
		return f(v)
	}
	if base, ok := strings.CutSuffix(name, "-list"); ok && known(base) {
		for _, item := range splitList(v) {
			if err := checkFormat(key, base, item); err != "" {
				return err
			}
		}
		return ""
	}
	if base, ok := strings.CutSuffix(name, "-opt"); ok && known(base) && v != "" {
		return checkFormat(key, base, v)
	}
	return ""
}

func known(name string) bool {
	_, f := formatChecks[name]
	_, p := namedPropStrings[name]
	return f || p
}

// UncheckedFormats lists the named formats the rules use that Validate
// accepts unchecked, sorted: the gap, visible.
func UncheckedFormats() []string {
	seen := map[string]bool{}
	var walk func(ps []Param)
	walk = func(ps []Param) {
		for _, p := range ps {
			if p.Format != "" && !known(p.Format) {
				base, list := strings.CutSuffix(p.Format, "-list")
				if b, opt := strings.CutSuffix(p.Format, "-opt"); opt {
					base, list = b, true
				}
				if !list || !known(base) {
					seen[p.Format] = true
				}
			}
			if p.Props != nil {
				walk(p.Props.Keys)
			}
			if p.Items != nil {
				walk([]Param{*p.Items})
			}
		}
	}
	for _, o := range operations {
		walk(o.Params)
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// splitList is PVE::Tools::split_list.
func splitList(v string) []string {
	if strings.Contains(v, "\x00") {
		return strings.Split(v, "\x00")
	}
	return strings.FieldsFunc(v, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
}

func match(re, msg string) func(string) string {
	r := regexp.MustCompile(re)
	return func(v string) string {
		if r.MatchString(v) {
			return ""
		}
		return msg
	}
}

// matchf is match with the value in the message (%s).
func matchf(re, msg string) func(string) string {
	r := regexp.MustCompile(re)
	return func(v string) string {
		if r.MatchString(v) {
			return ""
		}
		return strings.Replace(msg, "%s", v, 1)
	}
}

var (
	pveTag = matchf(`^(?i:[a-z0-9_][a-z0-9_\-+.]*)$`, "invalid tag '%s'")
	ipv4   = addr(func(a netip.Addr) bool { return a.Is4() }, "value does not look like a valid IPv4 address")
	ipv6   = addr(func(a netip.Addr) bool { return a.Is6() }, "value does not look like a valid IPv6 address")
	ipAny  = addr(func(netip.Addr) bool { return true }, "value does not look like a valid IP address")
	cidrv4 = cidr(func(a netip.Addr) bool { return a.Is4() }, 32, "value does not look like a valid IPv4 CIDR network")
	cidrv6 = cidr(func(a netip.Addr) bool { return a.Is6() }, 128, "value does not look like a valid IPv6 CIDR network")
)

func tagList(v string) string {
	for _, t := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		if err := pveTag(t); err != "" {
			return err
		}
	}
	return ""
}

var dnsRE = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?$`)

func dnsName(v string) string {
	if dnsRE.MatchString(v) {
		return ""
	}
	return "value does not look like a valid DNS name"
}

// parseIP takes only plain addresses: no zone, as Perl's IPV4RE/IPV6RE.
func parseIP(v string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(v)
	return a, err == nil && a.Zone() == ""
}

func addr(ok func(netip.Addr) bool, msg string) func(string) string {
	return func(v string) string {
		if a, parsed := parseIP(v); parsed && ok(a) {
			return ""
		}
		return msg
	}
}

// cidr is pve-common's pve_verify_cidrv4/v6: a prefix length of 8 or more.
func cidr(ok func(netip.Addr) bool, maxBits int, msg string) func(string) string {
	return func(v string) string {
		ip, bits, found := strings.Cut(v, "/")
		a, parsed := parseIP(ip)
		n, err := strconv.Atoi(bits)
		if found && parsed && ok(a) && err == nil && n > 7 && n <= maxBits {
			return ""
		}
		return msg
	}
}

func cidrAny(v string) string {
	if cidrv4(v) == "" || cidrv6(v) == "" {
		return ""
	}
	return "value does not look like a valid CIDR network"
}

func ipv4Mask(v string) string {
	a, ok := parseIP(v)
	if ok && a.Is4() {
		b := a.As4()
		m := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		if m != 0 && (^m)&(^m+1) == 0 { // ones then zeros
			return ""
		}
	}
	return "value does not look like a valid IP netmask"
}

// ipConfig is pve-common's pve_verify_ipv4_config / pve_verify_ipv6_config
// (registered there, used by qemu-server's ipconfig and pve-container's
// net): dhcp and manual for both families, auto for IPv6, else a CIDR.
func ipConfig(v6 bool) func(string) string {
	return func(v string) string {
		if v == "dhcp" || v == "manual" || v6 && v == "auto" {
			return ""
		}
		if !v6 && cidrv4(v) == "" {
			return ""
		}
		if v6 && cidrv6(v) == "" {
			return ""
		}
		if v6 {
			return "value does not look like a valid ipv6 network configuration"
		}
		return "value does not look like a valid ipv4 network configuration"
	}
}

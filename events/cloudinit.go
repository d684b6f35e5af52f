package events

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Cloud-init values of a QEMU VM (qemu-server PVE/QemuServer.pm
// $confdesc_cloudinit, PVE/QemuServer/Network.pm pve-qm-ipconfig,
// PVE/QemuServer/Cloudinit.pm). Proxmox stores sshkeys, ipconfigN and
// nameserver exactly as sent (the API checks them against their schema
// but does not re-print them), so a normaliser must be applied to both
// the desired and the observed value before comparing.

// sshKeysSafe are the bytes pve-common's 'urlencoded' format allows
// unescaped (pve_verify_urlencoded: [-%a-zA-Z0-9_.!~*'()]), which are the
// ones JavaScript's encodeURIComponent, used by the PVE GUI
// (www/manager6/qemu/SSHKey.js), leaves alone.
func sshKeysSafe(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.!~*'()", c) >= 0
}

// EncodeSSHKeys is the sshkeys parameter for keys, one key per line (keys
// may themselves hold several lines): lines trimmed, blank ones dropped,
// joined by "\n" with no trailing newline, every byte but
// [A-Za-z0-9-_.!~*'()] written %XX (upper-case hex) as encodeURIComponent
// does. Proxmox stores this string in the config as sent.
func EncodeSSHKeys(keys []string) string {
	lines := sshKeyLines(strings.Join(keys, "\n"))
	s := strings.Join(lines, "\n")
	var b strings.Builder
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if sshKeysSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// DecodeSSHKeys reads a stored sshkeys value: %XX decoded as Perl's
// URI::Escape::uri_unescape (qemu-server's Cloudinit.pm) does it ('+' stays
// '+', a '%' not followed by two hex digits stays), line endings
// normalised, lines trimmed and blank ones dropped. A character the
// 'urlencoded' format forbids (Proxmox refuses such a value) is an error.
func DecodeSSHKeys(s string) ([]string, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !sshKeysSafe(c) && c != '%' {
			return nil, fmt.Errorf("sshkeys: %q at offset %d is not allowed in a URL-encoded value (use EncodeSSHKeys)", rune(c), i)
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return sshKeyLines(b.String()), nil
}

// NormaliseSSHKeys is EncodeSSHKeys(DecodeSSHKeys(s)): the GUI's, bpg's
// (url.QueryEscape with "+" as "%20") and converge's encodings of the same
// keys normalise alike.
func NormaliseSSHKeys(s string) (string, error) {
	keys, err := DecodeSSHKeys(s)
	if err != nil {
		return "", err
	}
	return EncodeSSHKeys(keys), nil
}

func sshKeyLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// NormaliseIPConfig normalises an ipconfigN value (format pve-qm-ipconfig:
// ip, gw, ip6, gw6). Blanks around parts are dropped, addresses are
// written as Go's net/netip prints them (IPv6 lower-case and compressed),
// and the keys come in print_property_string's sorted order, which bpg's
// provider also sends: "gw=10.0.0.1,ip=10.0.0.5/24". ip is dhcp, manual or
// an IPv4 CIDR (/8 to /32); ip6 is auto, dhcp, manual or an IPv6 CIDR (/8
// to /128). Pairs that qemu-server's parse_ipconfig refuses at boot (a
// gateway without an address, gw with ip=dhcp, gw6 without a static ip6)
// are errors. "" stays "" (the key is unset).
func NormaliseIPConfig(s string) (string, error) {
	n, err := ipConfig(s)
	if err != nil {
		return "", fmt.Errorf("ipconfig %q: %w", s, err)
	}
	return n, nil
}

// ipConfig is NormaliseIPConfig with errors that do not repeat the value.
func ipConfig(s string) (string, error) {
	p, err := ParsePropString("ipconfig", s, nil)
	if err != nil {
		return "", err
	}
	if p.HasBare {
		return "", fmt.Errorf("%q has no key (ip=, gw=, ip6=, gw6=)", p.Bare)
	}
	checks := map[string]func(string) (string, error){
		"ip": canonIPv4Config, "gw": canonIPv4, "ip6": canonIPv6Config, "gw6": canonIPv6,
	}
	for _, k := range sortedKeys(p.KV) {
		check, ok := checks[k]
		if !ok {
			return "", fmt.Errorf("unknown key %q (ip, gw, ip6, gw6)", k)
		}
		if p.KV[k], err = check(p.KV[k]); err != nil {
			return "", fmt.Errorf("%s %w", k, err)
		}
	}
	ip, ip6 := p.KV["ip"], p.KV["ip6"]
	switch {
	case p.KV["gw"] != "" && ip == "":
		return "", fmt.Errorf("gw needs ip")
	case p.KV["gw"] != "" && ip == "dhcp":
		return "", fmt.Errorf("gw with ip=dhcp (Proxmox then ignores the whole ipconfig)")
	case p.KV["gw6"] != "" && ip6 == "":
		return "", fmt.Errorf("gw6 needs ip6")
	case p.KV["gw6"] != "" && !strings.Contains(ip6, "/"):
		return "", fmt.Errorf("gw6 with ip6=%s (Proxmox then ignores the whole ipconfig)", ip6)
	}
	return PrintPropString(nil, p.KV), nil
}

var dnsNameRE = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?$`)

// NormaliseNameserver normalises a nameserver value (format address-list):
// entries separated by blanks, commas or semicolons (pve-common's
// split_list) joined by single spaces, the form Cloudinit.pm needs (it
// splits on whitespace only). IP addresses are written as net/netip prints
// them; other entries must be DNS names.
func NormaliseNameserver(s string) (string, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == 0 || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
	})
	for i, f := range fields {
		if a, err := netip.ParseAddr(f); err == nil && a.Zone() == "" {
			fields[i] = a.String()
			continue
		}
		if !dnsNameRE.MatchString(f) {
			return "", fmt.Errorf("nameserver %q: %q is neither an IP address nor a DNS name", s, f)
		}
	}
	return strings.Join(fields, " "), nil
}

// IP config values (pve-common pve-ipv4-config, pve-ipv6-config, ipv4,
// ipv6; pve_verify_cidrv4/v6 take /8 and longer).

func canonIPv4Config(v string) (string, error) {
	if v == "dhcp" || v == "manual" {
		return v, nil
	}
	return canonCIDR(v, false, "dhcp, manual or an IPv4 CIDR")
}

func canonIPv6Config(v string) (string, error) {
	if v == "auto" || v == "dhcp" || v == "manual" {
		return v, nil
	}
	return canonCIDR(v, true, "auto, dhcp, manual or an IPv6 CIDR")
}

func canonCIDR(v string, six bool, want string) (string, error) {
	p, err := netip.ParsePrefix(v)
	if err != nil || p.Addr().Is6() != six || p.Addr().Zone() != "" || p.Bits() < 8 {
		return "", fmt.Errorf("%q is not %s", v, want)
	}
	return p.String(), nil
}

func canonIPv4(v string) (string, error) { return canonAddr(v, false) }
func canonIPv6(v string) (string, error) { return canonAddr(v, true) }

func canonAddr(v string, six bool) (string, error) {
	a, err := netip.ParseAddr(v)
	if err != nil || a.Is6() != six || a.Zone() != "" {
		want := "an IPv4 address"
		if six {
			want = "an IPv6 address"
		}
		return "", fmt.Errorf("%q is not %s", v, want)
	}
	return a.String(), nil
}

func CheckIPv4Config(v string) error { _, err := canonIPv4Config(v); return err }
func CheckIPv6Config(v string) error { _, err := canonIPv6Config(v); return err }
func CheckIPv4(v string) error       { _, err := canonIPv4(v); return err }
func CheckIPv6(v string) error       { _, err := canonIPv6(v); return err }

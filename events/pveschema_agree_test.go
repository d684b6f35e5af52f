package events_test

// This test lives in events (an external test package) and not in
// internal/pveschema: pveschema links only the standard library so other
// tools can vendor it, and a test of its importing events would drag
// events' third-party dependencies into its build. The layering test
// (internal/repocheck) checks non-test imports only, so events' own test
// may import the stdlib-only pveschema.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pveschema"
)

// A field class: the desired body a value goes into, and the Proxmox
// request converge would send for it (built as the planner and executor
// build it, so the check is of what reaches Proxmox).
type fieldClass struct {
	name   string
	body   func(v string) string
	method string
	path   string
	// params is the request's parameters for desired d; raw is the value
	// as written, for a value events refused (there is no d): what a
	// converge without the check would have sent.
	params func(d *events.Desired, raw string) map[string]string
	corpus []string
	// stricter maps a value events refuses but Proxmox's API schema takes
	// to the reason converge refuses it.
	stricter map[string]string
}

// Reasons events is stricter than Proxmox's API schema that hold for
// several fields.
const (
	// A desired field that is present sets its key; there is no value
	// that means "unset", so "" is refused rather than sent.
	emptyIsNoValue = "an empty value sets nothing: leave the field out"
	// Perl's \d+ compared as a number reads /024 as /24; converge takes
	// the one spelling net/netip reads, so what it sends reads back equal.
	leadingZeroPrefix = "a prefix length with a leading zero (Proxmox reads /024 as /24)"
	// The desired schema takes one spelling of a property string: no
	// blanks inside a part, no empty parts (the normalisers take more,
	// for values Proxmox reports).
	oneSpelling = "the desired schema takes one spelling: no blanks inside a part, no empty parts"
	// Cloudinit.pm splits nameserver and searchdomain on whitespace only
	// when it writes resolv.conf, so converge takes blanks as separators,
	// not pve-common's commas and semicolons too.
	blanksOnly = "entries separated by blanks only (cloud-init's resolv.conf writer splits on whitespace)"
	// Proxmox checks only that sshkeys is URL-encoded; converge wants
	// each item to read as a public key, so a typo is refused at publish
	// rather than locking the operator out.
	oneKey = "ssh_keys: one OpenSSH public key line per item"
)

func quote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// trimNorm is planner/whole.go's handling of a cloud-init string: trimmed,
// then normalised when the normaliser takes it.
func trimNorm(v string, norm func(string) (string, error)) string {
	v = strings.TrimSpace(v)
	if norm != nil {
		if n, err := norm(v); err == nil {
			return n
		}
	}
	return v
}

const (
	qemuConfig = "/nodes/pve1/qemu/101/config"
	lxcConfig  = "/nodes/pve1/lxc/101/config"
)

var (
	ipv4Values = []string{"10.0.0.1", "192.168.1.254", "0.0.0.0", "255.255.255.255", "10.0.0.256", "10.0.0", "10.0.0.1.1",
		"010.0.0.1", " 10.0.0.1", "::1", "10.0.0.1/24", "", "host.example.com", "1.2.3.4%eth0"}
	ipv6Values = []string{"2001:db8::1", "::1", "::", "fe80::1", "2001:DB8::1", "::ffff:10.0.0.1", "fe80::1%eth0",
		"2001:db8::1::", "2001:db8:0:0:0:0:0:0:1", "10.0.0.1", "2001:db8::/64", "gggg::1"}
	cidr4Values = []string{"10.0.0.5/24", "10.0.0.5/8", "10.0.0.5/32", "10.0.0.5/7", "10.0.0.5/0", "10.0.0.5/33",
		"10.0.0.5", "10.0.0.300/24", "10.0.0.5/024", "dhcp", "manual", "auto", "static", "2001:db8::5/64"}
	cidr6Values = []string{"2001:db8::5/64", "2001:db8::5/8", "2001:db8::5/128", "2001:db8::5/7", "2001:db8::5/129",
		"2001:db8::5", "fe80::1%eth0/64", "auto", "dhcp", "manual", "slaac", "10.0.0.5/24"}
)

func ipconfigCorpus() []string {
	var c []string
	for _, v := range cidr4Values {
		c = append(c, "ip="+v)
	}
	for _, v := range ipv4Values {
		c = append(c, "ip=10.0.0.5/24,gw="+v)
	}
	for _, v := range cidr6Values {
		c = append(c, "ip6="+v)
	}
	for _, v := range ipv6Values {
		c = append(c, "ip6=2001:db8::5/64,gw6="+v)
	}
	return append(c, "", "ip=dhcp,ip6=auto", "gw=10.0.0.1", "gw6=2001:db8::1", "ip=dhcp,gw=10.0.0.1",
		"ip6=dhcp,gw6=2001:db8::1", "ip6=auto,gw6=2001:db8::1", "ip6=manual,gw6=2001:db8::1", "ip=manual,ip6=manual", "ip=10.0.0.5/24,ip=10.0.0.6/24", "ip=10.0.0.5/24,foo=1",
		"10.0.0.5/24", " ip=10.0.0.5/24 , gw=10.0.0.1 ", "ip=10.0.0.5/24,,gw=10.0.0.1", "ip=", "IP=dhcp", "ip=DHCP")
}

func classes() []fieldClass {
	ci := func(members string) string { return `{"vmid":101,"kind":"qemu","cloudinit":{` + members + `}}` }
	nic := func(kind string) func(string) string {
		return func(members string) string {
			return `{"vmid":101,"kind":"` + kind + `","net":{"net0":{"bridge":"vmbr0",` + members + `}}}`
		}
	}
	// lxcNIC is EditNIC's container value, which the raw value is put into
	// as it is for a refused one.
	lxcNIC := func(key string) func(d *events.Desired, raw string) map[string]string {
		return func(d *events.Desired, raw string) map[string]string {
			if d != nil {
				return map[string]string{"net0": events.EditNIC(events.LXC, "net0", "", d.Net["net0"])}
			}
			w := events.NetWant{Bridge: "vmbr0"}
			if key == "ip" {
				w.IP = raw
			} else {
				w.IP, w.GW = "10.0.0.5/24", raw
			}
			return map[string]string{"net0": events.EditNIC(events.LXC, "net0", "", w)}
		}
	}
	mtu := func(kind events.GuestKind) func(d *events.Desired, raw string) map[string]string {
		return func(d *events.Desired, raw string) map[string]string {
			if d != nil {
				return map[string]string{"net0": events.EditNIC(kind, "net0", "", d.Net["net0"])}
			}
			var n int
			fmt.Sscan(raw, &n)
			return map[string]string{"net0": events.EditNIC(kind, "net0", "", events.NetWant{Bridge: "vmbr0", MTU: &n})}
		}
	}
	mtus := []string{"1", "2", "63", "64", "65", "575", "576", "1280", "1500", "9000", "65520", "65521", "65535", "65536"}
	ciStr := func(key string, norm func(string) (string, error)) func(d *events.Desired, raw string) map[string]string {
		return func(d *events.Desired, raw string) map[string]string {
			return map[string]string{key: trimNorm(raw, norm)}
		}
	}
	return []fieldClass{{
		name:   "ipconfig0",
		body:   func(v string) string { return ci(`"ipconfig":{"ipconfig0":` + quote(v) + `}`) },
		method: "PUT", path: qemuConfig,
		params: ciStr("ipconfig0", events.NormaliseIPConfig),
		corpus: ipconfigCorpus(),
		stricter: map[string]string{
			// qemu-server's parse_ipconfig (at boot) drops the whole
			// ipconfig when a gateway comes with an address it ignores.
			"ip=dhcp,gw=10.0.0.1":            "a gateway with ip=dhcp: qemu-server ignores the whole ipconfig",
			"ip6=dhcp,gw6=2001:db8::1":       "a gateway with ip6=dhcp: qemu-server ignores the whole ipconfig",
			"ip6=auto,gw6=2001:db8::1":       "a gateway with ip6=auto: qemu-server ignores the whole ipconfig",
			"ip6=manual,gw6=2001:db8::1":     "a gateway with ip6=manual: qemu-server ignores the whole ipconfig",
			"ip=10.0.0.5/024":                leadingZeroPrefix,
			"ip=10.0.0.5/24,gw= 10.0.0.1":    oneSpelling,
			" ip=10.0.0.5/24 , gw=10.0.0.1 ": oneSpelling,
			"ip=10.0.0.5/24,,gw=10.0.0.1":    oneSpelling,
			"":                               emptyIsNoValue,
		},
	}, {
		name:   "nameserver",
		body:   func(v string) string { return ci(`"nameserver":` + quote(v)) },
		method: "PUT", path: qemuConfig,
		params: ciStr("nameserver", events.NormaliseNameserver),
		corpus: []string{"10.0.0.1", "10.0.0.1 10.0.0.2", "10.0.0.1,2001:db8::1;::1", " 1.1.1.1 ", "", "10.0.0.300",
			"dns.example.com", "dead beef", "-bad-", "10.0.0.1 -bad-", "fe80::1%eth0", "2001:db8::1::", "a_b", "1.1.1.1/32"},
		stricter: map[string]string{
			// address-list takes DNS names (pve_verify_address); a
			// resolver is reached by address, cloud-init writes these into
			// resolv.conf, and "10.0.0.300" would pass there as a name.
			"10.0.0.300":               "nameserver: IP addresses only (Proxmox's address-list also takes DNS names)",
			"dns.example.com":          "nameserver: IP addresses only (Proxmox's address-list also takes DNS names)",
			"dead beef":                "nameserver: IP addresses only (Proxmox's address-list also takes DNS names)",
			"10.0.0.1,2001:db8::1;::1": blanksOnly,
			"":                         emptyIsNoValue,
		},
	}, {
		name:   "searchdomain",
		body:   func(v string) string { return ci(`"searchdomain":` + quote(v)) },
		method: "PUT", path: qemuConfig,
		params: ciStr("searchdomain", nil),
		corpus: []string{"example.com", "corp.example.com example.com", "a.example.com;b.example.com", "", "localdomain",
			"example..com", "-example.com", "a_b.example.com", "example.com.", "exa mple", "10.0.0.1", "ünï.example"},
		stricter: map[string]string{
			// A VM's searchdomain has no format in qemu-server's schema;
			// cloud-init writes it into resolv.conf, and a container's
			// takes only dns-name-list, so converge holds VMs to it too.
			"example..com":                "VM searchdomain: DNS names only (qemu-server's schema has no format)",
			"-example.com":                "VM searchdomain: DNS names only (qemu-server's schema has no format)",
			"a_b.example.com":             "VM searchdomain: DNS names only (qemu-server's schema has no format)",
			"example.com.":                "VM searchdomain: DNS names only (qemu-server's schema has no format)",
			"ünï.example":                 "VM searchdomain: DNS names only (qemu-server's schema has no format)",
			"a.example.com;b.example.com": blanksOnly,
			"":                            emptyIsNoValue,
		},
	}, {
		name:   "cicustom",
		body:   func(v string) string { return ci(`"custom":` + quote(v)) },
		method: "PUT", path: qemuConfig,
		params: ciStr("cicustom", nil),
		corpus: []string{"user=local:snippets/user.yaml", "user=local:snippets/u.yaml,network=nfs-1:snippets/n.yaml,meta=local:m,vendor=local:v",
			"user=snippets/user.yaml", "user=l:snippets/user.yaml", "meta=local-:snippets/m.yaml", "vendor=local:",
			"user=local:a.yaml,user=local:b.yaml", "local:snippets/user.yaml", "foo=local:x", "", "user=1local:x",
			"user=local:snippets/user.yaml,"},
		stricter: map[string]string{
			"user=local:snippets/user.yaml,": oneSpelling,
			"":                               emptyIsNoValue,
		},
	}, {
		name:   "LXC net ip",
		body:   func(v string) string { return nic("lxc")(`"ip":` + quote(v)) },
		method: "PUT", path: lxcConfig,
		params:   lxcNIC("ip"),
		corpus:   cidr4Values,
		stricter: map[string]string{"10.0.0.5/024": leadingZeroPrefix},
	}, {
		name:   "LXC net gw",
		body:   func(v string) string { return nic("lxc")(`"ip":"10.0.0.5/24","gw":` + quote(v)) },
		method: "PUT", path: lxcConfig,
		params:   lxcNIC("gw"),
		corpus:   ipv4Values,
		stricter: map[string]string{"": emptyIsNoValue},
	}, {
		name:   "QEMU net mtu",
		body:   func(v string) string { return nic("qemu")(`"mtu":` + v) },
		method: "PUT", path: qemuConfig,
		params: mtu(events.QEMU),
		corpus: mtus,
		stricter: map[string]string{
			// qemu-server's print_netdevice_full refuses these when the
			// VM starts ("smaller than the IP minimum MTU").
			"2": "VM mtu 2..575: qemu-server refuses to start the VM", "63": "VM mtu 2..575: qemu-server refuses to start the VM",
			"64": "VM mtu 2..575: qemu-server refuses to start the VM", "65": "VM mtu 2..575: qemu-server refuses to start the VM",
			"575": "VM mtu 2..575: qemu-server refuses to start the VM",
		},
	}, {
		name:   "LXC net mtu",
		body:   func(v string) string { return nic("lxc")(`"mtu":` + v) },
		method: "PUT", path: lxcConfig,
		params: mtu(events.LXC),
		corpus: mtus,
		stricter: map[string]string{
			// The desired schema has one mtu range for both kinds, the
			// VM's maximum.
			"65521": "desired mtu: at most 65520 for both kinds (a VM's maximum)",
			"65535": "desired mtu: at most 65520 for both kinds (a VM's maximum)",
		},
	}, {
		name: "clone storage",
		body: func(v string) string {
			return `{"vmid":101,"clone":{"from":9000,"full":true,"storage":` + quote(v) + `}}`
		},
		method: "POST", path: "/nodes/pve1/qemu/9000/clone",
		params: func(d *events.Desired, raw string) map[string]string {
			return map[string]string{"newid": "101", "full": "1", "storage": raw}
		},
		corpus: []string{"local", "local-lvm", "ceph_pool.1", "LOCAL", "l", "lv", "1local", "local.", "local_", "local-",
			"lo cal", "local:x", "nfs/1", "a.b-c_d", "ünï", ""},
	}, {
		// Each value is one key; EncodeSSHKeys writes the parameter.
		name:   "sshkeys",
		body:   func(v string) string { return ci(`"ssh_keys":[` + quote(v) + `]`) },
		method: "PUT", path: qemuConfig,
		params: func(d *events.Desired, raw string) map[string]string {
			return map[string]string{"sshkeys": events.EncodeSSHKeys([]string{raw})}
		},
		corpus: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ+/x= me@host", "ssh-rsa AAAAB3NzaC1yc2E= a b c",
			"ssh-ed25519 AAAA me@host\nssh-ed25519 BBBB you@host", "ecdsa-sha2-nistp256 AAAA+/= ünï 😀", "  padded  ",
			"100% & <b>\"quoted\"</b> ;,=?#[]", "line\r\nbreak\ttab", "",
			"ssh-ed25519 AAAA+/= 100% & <b>\"q\"</b> ;,=?#[]\t~*'()", "sk-ssh-ed25519@openssh.com AAAA= key\r"},
		stricter: map[string]string{
			"ssh-ed25519 AAAA me@host\nssh-ed25519 BBBB you@host": oneKey,
			"  padded  ":                       oneKey,
			"100% & <b>\"quoted\"</b> ;,=?#[]": oneKey,
			"line\r\nbreak\ttab":               oneKey,
			"":                                 oneKey,
		},
	}}
}

// TestProxmoxFormatsAgreeWithSchema holds events' own Proxmox format
// checks to the rules generated from Proxmox's API schema: a desired
// value events accepts becomes a request pveschema.Validate takes, and a
// value whose request pveschema refuses is refused by events. Where events
// refuses what the schema takes, the value is listed with the reason.
func TestProxmoxFormatsAgreeWithSchema(t *testing.T) {
	n := 0
	for _, c := range classes() {
		used := map[string]bool{}
		accepted := 0
		for _, v := range c.corpus {
			n++
			d, err := events.DecodeDesired([]byte(c.body(v)), 101)
			if err == nil {
				accepted++
			}
			var params map[string]string
			if err == nil {
				params = c.params(d, v)
			} else {
				params = c.params(nil, v)
			}
			problems := pveschema.Validate(c.method, c.path, params)
			why, stricter := c.stricter[v]
			if stricter {
				used[v] = true
			}
			switch {
			case err == nil && len(problems) > 0:
				t.Errorf("%s %q: events accepts it, Proxmox refuses %v: %v", c.name, v, params, problems)
			case err == nil && stricter:
				t.Errorf("%s %q: listed as refused by events (%s), but events accepts it", c.name, v, why)
			case err != nil && len(problems) == 0 && !stricter:
				t.Errorf("%s %q: events refuses it (%v), Proxmox takes %v; refuse it in neither or list why events is stricter", c.name, v, err, params)
			case err != nil && len(problems) > 0 && stricter:
				t.Errorf("%s %q: listed as stricter than Proxmox (%s), but Proxmox refuses it too: %v", c.name, v, why, problems)
			}
		}
		// A body that does not fit its field would refuse every value
		// and check nothing.
		if accepted == 0 || accepted == len(c.corpus) {
			t.Errorf("%s: events accepts %d of %d values; the corpus needs both kinds", c.name, accepted, len(c.corpus))
		}
		for v := range c.stricter {
			if !used[v] {
				t.Errorf("%s: exception %q is not in the corpus", c.name, v)
			}
		}
	}
	t.Logf("%d values checked", n)
}

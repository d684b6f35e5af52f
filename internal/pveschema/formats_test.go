package pveschema

import (
	"slices"
	"strings"
	"testing"
)

func TestNamedFormats(t *testing.T) {
	cases := []struct {
		format, value string
		ok            bool
	}{
		{"pve-vmid", "100", true}, {"pve-vmid", "99", false}, {"pve-vmid", "0100", false},
		{"pve-node", "pve-1", true}, {"pve-node", "pve_1", false}, {"pve-node", "-pve", false},
		{"pve-storage-id", "local-lvm", true}, {"pve-storage-id", "1local", false},
		{"pve-configid", "net0", true}, {"pve-configid", "0net", false},
		{"pve-configid-list", "description,tags;net0", true}, {"pve-configid-list", "tags,0x", false},
		{"pve-poolid", "prod", true}, {"pve-poolid", "prod/web", true}, {"pve-poolid", "a b", false},
		{"ipv4", "10.0.0.1", true}, {"ipv4", "10.0.0.256", false}, {"ipv4", "::1", false},
		{"ipv6", "fe80::1", true}, {"ipv6", "fe80::1%eth0", false}, {"ipv6", "10.0.0.1", false},
		{"ip", "10.0.0.1", true}, {"ip", "::1", true}, {"ip", "host", false},
		{"CIDRv4", "10.0.0.0/8", true}, {"CIDRv4", "10.0.0.0/7", false}, {"CIDRv4", "10.0.0.0", false},
		{"CIDRv6", "fd00::/64", true}, {"CIDRv6", "fd00::/129", false},
		{"CIDR", "fd00::/64", true}, {"CIDR", "10.1.0.0/16", true}, {"CIDR", "10.1.0.0/33", false},
		{"mac-addr", "BC:24:11:AA:bb:01", true}, {"mac-addr", "01:24:11:aa:bb:01", false}, {"mac-addr", "BC-24-11-AA-BB-01", false},
		{"pve-tag-list", "web;prod,db", true}, {"pve-tag-list", "web;pr/od", false},
		{"pve-volume-id", "local-lvm:vm-100-disk-0", true}, {"pve-volume-id", "vm-100-disk-0", false},
		{"pve-qm-ipconfig", "ip=dhcp,ip6=auto", true}, {"pve-qm-ipconfig", "ip=10.0.0.2/24,gw=10.0.0.1", true},
		// pve-common's pve_verify_ipv4/6_config take manual (no address
		// configured), auto for IPv6 only.
		{"pve-ipv4-config", "manual", true}, {"pve-ipv4-config", "auto", false}, {"pve-ipv4-config", "10.0.0.5/024", true},
		{"pve-ipv6-config", "manual", true}, {"pve-ipv6-config", "auto", true}, {"pve-ipv6-config", "static", false},
		{"pve-qm-ipconfig", "ip=manual,ip6=manual", true},
		{"pve-qm-ipconfig", "gw=10.0.0.1", false}, // a gateway requires an address
		{"pve-qm-ipconfig", "ip6=dhcp,gw6=10.0.0.1", false},
		{"pve-qm-cicustom", "user=local:snippets/u.yaml,network=nfs-1:snippets/n.yaml", true},
		{"pve-qm-cicustom", "user=local:snippets/u.yaml,", true}, // an empty part is skipped
		{"pve-qm-cicustom", "user=snippets/u.yaml", false}, {"pve-qm-cicustom", "local:snippets/u.yaml", false},
		{"pve-qm-cicustom", "foo=local:x", false}, {"pve-qm-cicustom", "user=l:x", false},
		{"urlencoded", "ssh-ed25519%20AAAAC3Nz%2B%2F%3D%3D%20me%40host%0A", true}, {"urlencoded", "", true},
		{"urlencoded", "-_.!~*'()", true}, {"urlencoded", "100%", true}, // '%' unchecked, as in pve-common
		{"urlencoded", "ssh-ed25519 AAAA", false}, {"urlencoded", "a+b", false}, {"urlencoded", "a/b", false},
		{"urlencoded", "a=b", false}, {"urlencoded", "k\n", false}, {"urlencoded", "é", false},
		{"address-list", "10.0.0.1 pve.example.com", true}, {"address-list", "10.0.0.1,-bad-", false},
		{"dns-name-list", "a.example.com;b.example.com", true}, {"dns-name-list", "a_b.example.com", false},
		{"ipv4mask", "255.255.255.0", true}, {"ipv4mask", "255.0.255.0", false},
		{"pve-ha-resource-or-vm-id", "vm:100", true}, {"pve-ha-resource-or-vm-id", "100", true},
		{"pve-ha-resource-or-vm-id", "foo:1", true}, {"pve-ha-resource-or-vm-id", "vm:abc", true},
		{"pve-ha-resource-or-vm-id", "VM:100", false}, {"pve-ha-resource-or-vm-id", "vm:", false},
		{"disk-size", "32G", true}, {"disk-size", "32GiB", false},
		{"email-or-username", "anything at all", true}, // unchecked: see TestUncheckedFormats
	}
	for _, c := range cases {
		err := checkFormat("x", c.format, c.value)
		if (err == "") != c.ok {
			t.Errorf("format %s, value %q: error %q, want ok=%v", c.format, c.value, err, c.ok)
		}
	}
}

// TestUncheckedFormats keeps the gap visible: the named formats the
// schema uses that Validate accepts unchecked. Checking one more removes
// it from here; a regenerated schema with a new format adds it.
func TestUncheckedFormats(t *testing.T) {
	want := []string{
		"IPorCIDRorAlias", "backup-fleecing", "backup-performance", "bridge-pair-list", "email-list",
		"email-opt", "email-or-username", "email-or-username-list", "graphite-path",
		"ldap-simple-attr", "ldap-simple-attr-list", "lxc-ip-with-ll-iface-list", "mac-prefix",
		"pem-certificate-chain", "pem-string", "proxmox-remote", "prune-backups", "pve-acme-alias",
		"pve-acme-domain", "pve-acme-domain-list", "pve-calendar-event", "pve-command-batch",
		"pve-cpuset", "pve-ct-timezone", "pve-day-of-week-list", "pve-dir-override-list",
		"pve-fw-addr-spec", "pve-fw-conntrack-helper", "pve-fw-dport-spec", "pve-fw-icmp-type-spec",
		"pve-fw-protocol-spec", "pve-fw-sport-spec", "pve-groupid", "pve-groupid-list",
		"pve-ha-node-list", "pve-ha-resource-id-list", "pve-hotplug-features", "pve-iface",
		"pve-iface-list", "pve-lxc-dev-string", "pve-lxc-mp-string", "pve-priv-list",
		"pve-qemu-sev-fmt", "pve-qemu-tdx-fmt", "pve-qm-boot", "pve-qm-bootdisk",
		"pve-qm-hostpci", "pve-qm-ide", "pve-qm-rng", "pve-qm-smbios1", "pve-qm-watchdog",
		"pve-realm", "pve-replication-job-id", "pve-roleid", "pve-roleid-list", "pve-sdn-bgp-rt-list",
		"pve-sdn-controller-id", "pve-sdn-dhcp-range", "pve-sdn-dns-id", "pve-sdn-fabric-id",
		"pve-sdn-ipam-id", "pve-sdn-isis-net", "pve-sdn-subnet-id", "pve-sdn-vnet-id",
		"pve-sdn-zone-id", "pve-startup-order", "pve-storage-content", "pve-storage-content-list",
		"pve-storage-options", "pve-storage-path", "pve-storage-path-in-property-string",
		"pve-storage-portal-dns", "pve-storage-portal-dns-list", "pve-storage-server",
		"pve-storage-vgname", "pve-task-status-type-list", "pve-tfa-config", "pve-tokenid-list",
		"pve-userid", "pve-userid-list", "pve-vlan-id-or-range-list", "pve-vm-cpu-conf",
		"pve-volume-id-or-absolute-path", "pve-volume-id-or-qm-path", "realm-sync-options",
		"storage-pair-list", "string-list",
	}
	if got := UncheckedFormats(); !slices.Equal(got, want) {
		t.Errorf("unchecked formats changed:\n got %q\nwant %q", got, want)
	}
}

// TestUncheckablePatterns lists the schema's patterns Go's regexp cannot
// compile (RE2 caps a repeat at 1000): those values pass unchecked.
func TestUncheckablePatterns(t *testing.T) {
	var got []string
	var walk func(ps []Param)
	walk = func(ps []Param) {
		for _, p := range ps {
			if p.Pattern != "" && compiled(p.Pattern) == nil && !slices.Contains(got, p.Name+" "+p.Pattern) {
				got = append(got, p.Name+" "+p.Pattern)
			}
			if p.Props != nil {
				walk(p.Props.Keys)
			}
		}
	}
	for _, o := range Operations() {
		walk(o.Params)
	}
	want := []string{"keys [0-9a-zA-Z!=]{0,4096}"}
	if !slices.Equal(got, want) {
		t.Errorf("uncheckable patterns:\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDecodeDesiredRejectsWhatProxmoxRefuses: desired values that pass the
// schema's shape but that Proxmox refuses are rejected at publish, each
// problem naming its field and Proxmox's rule.
func TestDecodeDesiredRejectsWhatProxmoxRefuses(t *testing.T) {
	ci := func(members string) string { return `{"vmid":101,"kind":"qemu","cloudinit":{` + members + `}}` }
	lxcNet := func(members string) string { return `{"vmid":101,"kind":"lxc","net":{"net0":{` + members + `}}}` }
	cases := []struct {
		name, body, field, message string
	}{
		// NIC mtu by kind (pve-container net schema; qemu-server at start).
		{"container mtu below 64", lxcNet(`"mtu":63`), "net.net0.mtu", "below a container's minimum 64"},
		{"container mtu 1", lxcNet(`"mtu":1`), "net.net0.mtu", "below a container's minimum 64"},
		{"VM mtu below 576", `{"vmid":101,"kind":"qemu","net":{"net0":{"mtu":575}}}`, "net.net0.mtu", "IP minimum 576"},
		{"mtu no kind takes", `{"vmid":101,"net":{"net0":{"mtu":10}}}`, "net.net0.mtu", "refused for both kinds"},
		// A container NIC's addresses (pve-ipv4-config, ipv4).
		{"container ip not an address", lxcNet(`"ip":"300.0.0.1/24"`), "net.net0.ip", "Proxmox format pve-ipv4-config"},
		{"container ip prefix under 8", lxcNet(`"ip":"10.0.0.5/7"`), "net.net0.ip", "IPv4 CIDR"},
		{"container gw not an address", lxcNet(`"gw":"10.0.0.256"`), "net.net0.gw", "Proxmox format ipv4"},
		// ipconfigN (pve-qm-ipconfig).
		{"ipconfig gw not an address", ci(`"ipconfig":{"ipconfig0":"ip=10.0.0.5/24,gw=10.0.0.300"}`), "cloudinit.ipconfig.ipconfig0", `gw "10.0.0.300" is not an IPv4 address (Proxmox format pve-qm-ipconfig)`},
		{"ipconfig ip not an address", ci(`"ipconfig":{"ipconfig1":"ip=10.0.0.999/24"}`), "cloudinit.ipconfig.ipconfig1", "not dhcp, manual or an IPv4 CIDR"},
		{"ipconfig ip without prefix", ci(`"ipconfig":{"ipconfig0":"ip=10.0.0.5"}`), "cloudinit.ipconfig.ipconfig0", "IPv4 CIDR"},
		{"ipconfig gw without ip", ci(`"ipconfig":{"ipconfig0":"gw=10.0.0.1"}`), "cloudinit.ipconfig.ipconfig0", "gw needs ip"},
		{"ipconfig gw6 not IPv6", ci(`"ipconfig":{"ipconfig0":"ip6=2001:db8::5/64,gw6=10.0.0.1"}`), "cloudinit.ipconfig.ipconfig0", "not an IPv6 address"},
		{"ipconfig ip6 not IPv6", ci(`"ipconfig":{"ipconfig0":"ip6=10.0.0.5/24"}`), "cloudinit.ipconfig.ipconfig0", "IPv6 CIDR"},
		{"ipconfig key twice", ci(`"ipconfig":{"ipconfig0":"ip=dhcp,ip=manual"}`), "cloudinit.ipconfig.ipconfig0", "duplicate key"},
		// cicustom (pve-volume-id per key).
		{"cicustom not a volume", ci(`"custom":"user=snippets/user.yaml"`), "cloudinit.custom", "STORAGE:VOLUME"},
		{"cicustom storage one letter", ci(`"custom":"user=l:snippets/user.yaml"`), "cloudinit.custom", "pve-qm-cicustom"},
		{"cicustom storage ends in dash", ci(`"custom":"meta=local-:snippets/m.yaml"`), "cloudinit.custom", "STORAGE:VOLUME"},
		{"cicustom empty volume", ci(`"custom":"vendor=local:"`), "cloudinit.custom", "STORAGE:VOLUME"},
		{"cicustom key twice", ci(`"custom":"user=local:a.yaml,user=local:b.yaml"`), "cloudinit.custom", "duplicate key"},
		// nameserver (address-list), searchdomain (dns-name-list).
		{"nameserver not an address", ci(`"nameserver":"10.0.0.300"`), "cloudinit.nameserver", `"10.0.0.300" is not an IP address (Proxmox format address-list)`},
		{"nameserver second entry", ci(`"nameserver":"1.1.1.1 ::1::"`), "cloudinit.nameserver", `"::1::"`},
		{"nameserver hex word", ci(`"nameserver":"dead beef"`), "cloudinit.nameserver", "not an IP address"},
		{"searchdomain empty label", ci(`"searchdomain":"example..com"`), "cloudinit.searchdomain", "not a DNS name (Proxmox format dns-name-list)"},
		{"searchdomain leading dash", ci(`"searchdomain":"corp.example -example.com"`), "cloudinit.searchdomain", `"-example.com"`},
		// Storage ids (pve-storage-id).
		{"clone storage one letter", `{"vmid":101,"clone":{"from":9000,"full":true,"storage":"l"}}`, "clone.storage", "pve-storage-id"},
		{"clone storage ends in dot", `{"vmid":101,"clone":{"from":9000,"full":true,"storage":"local."}}`, "clone.storage", "ending in a letter or digit"},
		{"disk storage ends in underscore", `{"vmid":101,"disks":{"scsi1":{"size_gib":8,"storage":"local_"}}}`, "disks.scsi1.storage", "pve-storage-id"},
		{"disk storage starts with digit", `{"vmid":101,"disks":{"scsi1":{"size_gib":8,"storage":"1local"}}}`, "disks.scsi1.storage", "pve-storage-id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeDesired([]byte(tc.body), 101)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("DecodeDesired(%s) = %+v, %v; want a ValidationError", tc.body, d, err)
			}
			for _, p := range ve.Problems {
				if p.Field == tc.field && strings.Contains(p.Message, tc.message) {
					return
				}
			}
			t.Errorf("DecodeDesired(%s): %v; want a problem on %s containing %q", tc.body, err, tc.field, tc.message)
		})
	}
}

// TestDecodeDesiredTakesWhatProxmoxTakes: the rules refuse nothing Proxmox
// takes, including the mtu a kind not yet known may take.
func TestDecodeDesiredTakesWhatProxmoxTakes(t *testing.T) {
	for _, body := range []string{
		`{"vmid":101,"kind":"qemu","net":{"net0":{"mtu":1},"net1":{"mtu":576},"net2":{"mtu":9000}}}`,
		`{"vmid":101,"kind":"lxc","net":{"net0":{"mtu":64,"ip":"10.0.0.5/24","gw":"10.0.0.1"},"net1":{"ip":"dhcp"},"net2":{"ip":"manual"}}}`,
		`{"vmid":101,"net":{"net0":{"mtu":1}, "net1":{"mtu":64}, "net2":{"mtu":1500}}}`,
		`{"vmid":101,"kind":"qemu","cloudinit":{"ipconfig":{"ipconfig0":"ip=10.0.0.5/24,gw=10.0.0.1","ipconfig1":"ip=dhcp","ipconfig2":"ip6=auto","ipconfig3":"ip6=2001:DB8::5/64 , gw6=2001:db8::1"}}}`,
		`{"vmid":101,"cloudinit":{"nameserver":"1.1.1.1 2606:4700::1111","searchdomain":"example.com corp.example.com"}}`,
		`{"vmid":101,"cloudinit":{"custom":"user=local:snippets/user.yaml,network=Ceph.fs1:snippets/net.yaml,meta=local:m,vendor=local:v"}}`,
		`{"vmid":101,"clone":{"from":9000,"full":true,"storage":"local-lvm"},"disks":{"scsi1":{"size_gib":8,"storage":"ZFS_pool.2"}}}`,
	} {
		if _, err := DecodeDesired([]byte(body), 101); err != nil {
			t.Errorf("DecodeDesired(%s): %v", body, err)
		}
	}
}

// TestCheckKind: a kind-dependent rule the event could not be held to at
// publish (no kind) is checked against the kind observed.
func TestCheckKind(t *testing.T) {
	d, err := DecodeDesired([]byte(`{"vmid":101,"net":{"net0":{"mtu":100},"net1":{"mtu":1}}}`), 101)
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	if err := d.CheckKind(LXC); !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != "net.net1.mtu" {
		t.Errorf("CheckKind(lxc) = %v; want one mtu problem on net.net1", err)
	}
	if err := d.CheckKind(QEMU); !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != "net.net0.mtu" {
		t.Errorf("CheckKind(qemu) = %v; want one mtu problem on net.net0", err)
	}
	if err := (&Desired{VMID: 101}).CheckKind(LXC); err != nil {
		t.Errorf("CheckKind without NICs = %v", err)
	}
}

// TestProxmoxProblemsBounded: one problem per NIC and ipconfig still makes
// a bounded reason.
func TestProxmoxProblemsBounded(t *testing.T) {
	var ip []string
	for i := range 32 {
		ip = append(ip, fmt.Sprintf(`"ipconfig%d":"gw=10.0.0.1"`, i))
	}
	_, err := DecodeDesired([]byte(`{"vmid":101,"cloudinit":{"ipconfig":{`+strings.Join(ip, ",")+`}}}`), 101)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != MaxProblems+1 || !strings.Contains(err.Error(), "and 22 more problems") {
		t.Errorf("32 bad ipconfigs: %d problems, %v", len(ve.Problems), err)
	}
}

package events

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The whole guest: where it runs, its disks, network interfaces,
// cloud-init, pool and protective snapshots. Each is an optional field of
// desired schema v1; an event that omits one leaves that part as Proxmox
// has it.

// DiskWant is a desired disk: its size, and for a disk that does not exist
// yet the storage it is allocated on. Disks only grow: Proxmox cannot
// shrink them, and converge never removes one.
type DiskWant struct {
	SizeGiB int    `json:"size_gib"`
	Storage string `json:"storage,omitempty"`
}

// NetWant is a desired network interface. Fields left out are left as
// Proxmox has them; the MAC address is never changed (a new interface
// gets the one Proxmox generates).
type NetWant struct {
	Model    string   `json:"model,omitempty"`  // QEMU: virtio, e1000, …
	Bridge   string   `json:"bridge,omitempty"` // vmbr0
	Tag      *int     `json:"tag,omitempty"`    // VLAN tag; 0 removes it
	Firewall *bool    `json:"firewall,omitempty"`
	Rate     *float64 `json:"rate,omitempty"` // MB/s; 0 removes the limit
	MTU      *int     `json:"mtu,omitempty"`
	// LXC only: the interface's name in the container, its addresses.
	Name string `json:"name,omitempty"`
	IP   string `json:"ip,omitempty"`
	GW   string `json:"gw,omitempty"`
}

// CloudInit is a QEMU guest's desired cloud-init settings. Passwords are
// not accepted: events are journalled.
type CloudInit struct {
	User         *string           `json:"user,omitempty"`
	SSHKeys      *[]string         `json:"ssh_keys,omitempty"`
	IPConfig     map[string]string `json:"ipconfig,omitempty"` // ipconfig0 → "ip=10.0.0.5/24,gw=10.0.0.1" or "ip=dhcp"
	Nameserver   *string           `json:"nameserver,omitempty"`
	SearchDomain *string           `json:"searchdomain,omitempty"`
	Custom       *string           `json:"custom,omitempty"` // cicustom
}

// Disk is an observed disk.
type Disk struct {
	// Volume is the storage volume ("local-lvm:vm-101-disk-0"), "none"
	// or "cdrom" for a drive without one, or a path.
	Volume string `json:"volume"`
	// SizeBytes is the size= Proxmox records, -1 for a value that does not
	// read as a disk (Volume then holds it).
	SizeBytes int64 `json:"size_bytes"`
	// Media is "cdrom" for CD-ROM drives (never resized).
	Media string `json:"media,omitempty"`
}

// Storage is the storage id of the disk's volume, "" for a drive
// without one ("none", "cdrom") or a path.
func (d Disk) Storage() string {
	s, _, ok := strings.Cut(d.Volume, ":")
	if !ok || strings.HasPrefix(d.Volume, "/") {
		return ""
	}
	return s
}

// GiB is the bytes in a GiB.
const GiB = int64(1) << 30

// SizeGiB is bytes in whole GiB, rounded up: the size to ask of
// PUT …/resize ("32G") so that the disk is at least bytes big.
func SizeGiB(bytes int64) int64 {
	if bytes <= 0 {
		return 0
	}
	return (bytes-1)/GiB + 1
}

// Actions desired snapshot_before may name.
const (
	SnapshotRestart = "restart"
	SnapshotMigrate = "migrate"
	SnapshotResize  = "resize"
)

// IsDiskKey reports whether key names a disk of kind (QEMU: ide0-3,
// sata0-5, scsi0-30, virtio0-15, efidisk0, tpmstate0; LXC: rootfs,
// mp0-255); kind "" accepts either.
func IsDiskKey(key string, kind GuestKind) bool {
	type bus struct {
		prefix string
		max    int
		kind   GuestKind
	}
	for _, b := range []bus{{"ide", 3, QEMU}, {"sata", 5, QEMU}, {"scsi", 30, QEMU}, {"virtio", 15, QEMU},
		{"efidisk", 0, QEMU}, {"tpmstate", 0, QEMU}, {"mp", 255, LXC}} {
		if kind != "" && kind != b.kind {
			continue
		}
		if n, ok := strings.CutPrefix(key, b.prefix); ok && isIndex(n, b.max) {
			return true
		}
	}
	return key == "rootfs" && kind != QEMU
}

// checkWhole holds the rules of the whole-guest fields that JSON Schema
// cannot express.
func (d *Desired) checkWhole() []FieldError {
	var p []FieldError
	kind := GuestKind("")
	if d.Kind != nil {
		kind = *d.Kind
	}
	for _, k := range sortedKeys(d.Disks) {
		if !IsDiskKey(k, kind) {
			p = append(p, FieldError{"disks." + k, fmt.Sprintf("not a disk key of a %s guest (scsi0-30, virtio0-15, sata0-5, ide0-3, efidisk0, tpmstate0; rootfs, mp0-255 for containers)", kindOr(kind))})
		}
	}
	for _, k := range sortedKeys(d.Net) {
		n := d.Net[k]
		if kind == QEMU && (n.Name != "" || n.IP != "" || n.GW != "") {
			p = append(p, FieldError{"net." + k, "name, ip and gw are container settings; a VM's addresses come from cloud-init (cloudinit.ipconfig)"})
		}
		if kind == LXC && n.Model != "" {
			p = append(p, FieldError{"net." + k, "model is a VM setting; a container's interfaces are veth"})
		}
	}
	if d.CloudInit != nil && kind == LXC {
		p = append(p, FieldError{"cloudinit", "cloud-init is for VMs (kind qemu)"})
	}
	if d.CloudInit != nil {
		for _, k := range sortedKeys(d.CloudInit.IPConfig) {
			if !IsIndexed(k, "ipconfig", 31) {
				p = append(p, FieldError{"cloudinit.ipconfig." + k, "keys are ipconfig0..ipconfig31, one per net interface"})
			}
		}
	}
	return p
}

// Snapshots reports whether the desired state asks for a protective
// snapshot before action (SnapshotRestart, …).
func (d *Desired) Snapshots(action string) bool {
	for _, s := range d.SnapshotBefore {
		if s == action {
			return true
		}
	}
	return false
}

func kindOr(k GuestKind) string {
	if k == "" {
		return "QEMU or LXC"
	}
	return string(k)
}

func isIndex(s string, max int) bool {
	i, err := strconv.Atoi(s)
	return err == nil && i >= 0 && i <= max && strconv.Itoa(i) == s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IsCloudInitKey reports whether key is one of the cloud-init config keys
// converge writes (ciuser, sshkeys, ipconfig0-31, nameserver,
// searchdomain, cicustom; never a password: events are journalled).
func IsCloudInitKey(key string) bool {
	switch key {
	case "ciuser", "sshkeys", "nameserver", "searchdomain", "cicustom":
		return true
	}
	return IsIndexed(key, "ipconfig", 31)
}

// HasCloudInitKey reports whether a config write sets a cloud-init key:
// the drive is regenerated after it.
func HasCloudInitKey(set map[string]string) bool {
	for k := range set {
		if IsCloudInitKey(k) {
			return true
		}
	}
	return false
}

// IsIndexed reports whether key is prefix followed by an index 0..max
// written without leading zeros ("net3").
func IsIndexed(key, prefix string, max int) bool {
	n, ok := strings.CutPrefix(key, prefix)
	return ok && isIndex(n, max)
}

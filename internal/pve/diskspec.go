package pve

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// Disk is one guest disk as its config key holds it: a QEMU drive
// (qemu-server PVE/QemuServer/Drive.pm parse_drive/print_drive) or an LXC
// rootfs/mount point (pve-container PVE/LXC/Config.pm parse_volume,
// print_ct_mountpoint).
type Disk struct {
	// Key is the config key: scsi0, ide2, efidisk0, rootfs, mp1, ...
	Key string
	// Volume is the backing volume as written: "local-lvm:vm-101-disk-0",
	// "local:iso/debian.iso", "none" or "cdrom" (empty CD drives), a path
	// ("/dev/sdb", bind mounts), or "local-lvm:32" (a new disk to allocate).
	Volume string
	// Storage is the volume's storage ID ("local-lvm"), empty for "none",
	// "cdrom" and paths.
	Storage string
	// SizeBytes is size= in bytes, 0 when absent (Proxmox's size=0 too).
	SizeBytes int64
	// Options holds every other key, canonical: aliases resolved
	// (volume= is file, bps_rd_length is bps_rd_max_length), booleans 1/0.
	// "media" is "cdrom" for CD drives; "mp" is an LXC mount point's path.
	Options map[string]string
}

var (
	// storageVolRE is pve-storage's parse_volume_id.
	storageVolRE = regexp.MustCompile(`(?i)^([a-z][a-z0-9._-]*[a-z0-9]):(.+)$`)
	// cloudInitVolRE is qemu-server's drive_is_cloudinit.
	cloudInitVolRE = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow|qcow2|qed|vmdk|cloop))?$`)
	sizeRE         = regexp.MustCompile(`^(\d+(\.\d+)?)([KMGT](?:iB)?)?$`)
)

// qemuDriveAlias are Drive.pm's alias keys.
var qemuDriveAlias = map[string]string{
	"volume":         "file",
	"bps_rd_length":  "bps_rd_max_length",
	"bps_wr_length":  "bps_wr_max_length",
	"iops_rd_length": "iops_rd_max_length",
	"iops_wr_length": "iops_wr_max_length",
}

// qemuDriveDropped are the keys parse_drive skips ($DROPPED_PROPERTIES).
var qemuDriveDropped = []string{"cyls", "heads", "secs", "trans"}

var qemuDriveBools = map[string]bool{
	"backup": true, "detect_zeroes": true, "iothread": true, "pre-enrolled-keys": true,
	"replicate": true, "ro": true, "scsiblock": true, "shared": true, "snapshot": true, "ssd": true,
}

var lxcMountBools = map[string]bool{
	"acl": true, "backup": true, "keepattrs": true, "quota": true, "replicate": true, "ro": true, "shared": true,
}

// IsDiskKey reports whether key names a disk of a guest of this kind:
// QEMU ide0-3, sata0-5, scsi0-30, virtio0-15, efidisk0, tpmstate0; LXC
// rootfs, mp0-255. unusedN is not a disk.
func IsDiskKey(kind Kind, key string) bool {
	return kind.Valid() && events.IsDiskKey(key, events.GuestKind(kind))
}

// diskKind is the kind of guest whose disk key is key.
func diskKind(key string) (Kind, bool) {
	switch {
	case IsDiskKey(KindQEMU, key):
		return KindQEMU, true
	case IsDiskKey(KindLXC, key):
		return KindLXC, true
	}
	return "", false
}

// ParseDisk parses the value of disk key (see IsDiskKey).
func ParseDisk(key, value string) (Disk, error) {
	kind, ok := diskKind(key)
	if !ok {
		return Disk{}, fmt.Errorf("%q is not a disk key", key)
	}
	var alias map[string]string
	defKey, bools := "volume", lxcMountBools
	if kind == KindQEMU {
		alias, defKey, bools = qemuDriveAlias, "file", qemuDriveBools
	}
	p, err := events.ParsePropString(key, value, alias)
	if err != nil {
		return Disk{}, err
	}
	if err := p.TakeDefault(key, value, defKey); err != nil {
		return Disk{}, err
	}
	if !p.HasBare {
		return Disk{}, fmt.Errorf("%s %q: no volume", key, value)
	}
	if strings.Contains(p.Bare, "=") {
		return Disk{}, fmt.Errorf("%s %q: volume %q contains '='", key, value, p.Bare)
	}
	if err := events.NormaliseBooleans(key, value, p.KV, bools); err != nil {
		return Disk{}, err
	}
	d := Disk{Key: key, Volume: p.Bare, Options: p.KV}
	if m := storageVolRE.FindStringSubmatch(d.Volume); m != nil {
		d.Storage = m[1]
	}
	if s, ok := p.KV["size"]; ok {
		n, err := ParseSize(s)
		if err != nil {
			return Disk{}, fmt.Errorf("%s %q: %w", key, value, err)
		}
		d.SizeBytes = n
		delete(p.KV, "size")
	}
	switch kind {
	case KindQEMU:
		for _, k := range qemuDriveDropped {
			delete(p.KV, k)
		}
		if m, ok := p.KV["media"]; ok && m != "cdrom" && m != "disk" {
			return Disk{}, fmt.Errorf("%s %q: media=%q must be cdrom or disk", key, value, m)
		}
	case KindLXC:
		_, hasMP := p.KV["mp"]
		if key == "rootfs" && hasMP {
			return Disk{}, fmt.Errorf("rootfs %q: rootfs takes no mp= (it is mounted at /)", value)
		}
		if key != "rootfs" && !hasMP {
			return Disk{}, fmt.Errorf("%s %q: no mount point path (mp=)", key, value)
		}
	}
	if len(d.Options) == 0 {
		d.Options = nil
	}
	return d, nil
}

// Format writes d as Proxmox stores it: the volume bare, an LXC mount
// point's mp= next, then every other key sorted, size= through FormatSize.
// For every value Proxmox printed, Format(ParseDisk(key, v)) == v.
// Options' default key (QEMU "file" and its alias "volume", LXC "volume")
// is ignored, and so is "size" when SizeBytes > 0.
func (d Disk) Format() string {
	kv := maps.Clone(d.Options)
	if kv == nil {
		kv = map[string]string{}
	}
	var required []string
	if kind, _ := diskKind(d.Key); kind == KindLXC {
		delete(kv, "volume")
		if d.Key != "rootfs" {
			required = []string{"mp"}
		}
	} else {
		delete(kv, "file")
		delete(kv, "volume")
	}
	if d.SizeBytes > 0 {
		kv["size"] = FormatSize(d.SizeBytes)
	}
	return events.PrintPropString([]string{d.Volume}, kv, required...)
}

// IsCDROM reports a CD drive (media=cdrom), cloud-init drives included.
func (d Disk) IsCDROM() bool { return d.Options["media"] == "cdrom" }

// IsEmpty reports an empty CD drive: volume "none" ("cdrom" is the
// host's physical drive).
func (d Disk) IsEmpty() bool { return d.Volume == "none" }

// IsCloudInit reports a cloud-init drive ("local-lvm:vm-101-cloudinit"),
// as qemu-server's drive_is_cloudinit.
func (d Disk) IsCloudInit() bool { return cloudInitVolRE.MatchString(d.Volume) }

// ParseSize is pve-common's parse_size: a decimal number with an optional
// unit K, M, G, T (or KiB, MiB, GiB, TiB), powers of 1024; a bare number
// is bytes; fractions are truncated to whole bytes ("1.5K" is 1536).
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("size %q is not a number with an optional unit K, M, G or T", s)
	}
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[strings.TrimSuffix(m[3], "iB")]
	if m[2] == "" {
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > math.MaxInt64>>shift {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n << shift, nil
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a number", s)
	}
	// Perl multiplies by 1024 once per unit step, in doubles.
	for i := uint(0); i < shift; i += 10 {
		f *= 1024
	}
	if f >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(f), nil
}

// FormatSize is pve-common's format_size: the largest unit of K, M, G, T
// that divides n exactly, else bare bytes ("32G", "528K", "1000").
func FormatSize(n int64) string {
	units := []string{"K", "M", "G", "T"}
	unit := ""
	for _, u := range units {
		if n%1024 != 0 {
			break
		}
		n /= 1024
		unit = u
	}
	return strconv.FormatInt(n, 10) + unit
}

// SizeGiB is events.SizeGiB: bytes in whole GiB, rounded up.
func SizeGiB(bytes int64) int64 { return events.SizeGiB(bytes) }

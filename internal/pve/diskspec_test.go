package pve

import (
	"reflect"
	"strings"
	"testing"
)

// Canonical disk values: each is what Proxmox stores and returns. Unless
// noted they come from the config files of qemu-server's tests
// (src/test/cfg2cmd/*.conf, src/test/snapshot-test, qemu-server e6352be6)
// whose keys are already in print_drive's order; the pve-container ones
// from its src/test configs (94f55852); "bpg" from
// bpg/terraform-provider-proxmox (d6bd1ffe)
// proxmox/nodes/vms/vms_types_test.go.
var canonicalDisks = []struct {
	key, value string
	want       Disk
}{
	{"scsi0", "local-lvm:vm-8006-disk-0,discard=on,size=104858K", Disk{Volume: "local-lvm:vm-8006-disk-0", Storage: "local-lvm", SizeBytes: 104858 << 10, Options: map[string]string{"discard": "on"}}},
	{"scsi0", "myfs:179/vm-179-disk-4.qcow2,cache=none,discard=on,size=32G,ssd=1", Disk{Volume: "myfs:179/vm-179-disk-4.qcow2", Storage: "myfs", SizeBytes: 32 << 30, Options: map[string]string{"cache": "none", "discard": "on", "ssd": "1"}}},
	{"scsi0", "nfs:120/vm-120-disk-0.qcow2,iothread=1,size=4G", Disk{Volume: "nfs:120/vm-120-disk-0.qcow2", Storage: "nfs", SizeBytes: 4 << 30, Options: map[string]string{"iothread": "1"}}},
	{"scsi0", "/dev/sdg,scsiblock=1,size=32G", Disk{Volume: "/dev/sdg", SizeBytes: 32 << 30, Options: map[string]string{"scsiblock": "1"}}},
	{"scsi1", "/mnt/file.raw", Disk{Volume: "/mnt/file.raw"}},
	{"ide2", "none,media=cdrom", Disk{Volume: "none", Options: map[string]string{"media": "cdrom"}}},
	{"ide2", "cdrom,media=cdrom", Disk{Volume: "cdrom", Options: map[string]string{"media": "cdrom"}}},
	{"ide2", "lvm:vm-120-cloudinit,media=cdrom", Disk{Volume: "lvm:vm-120-cloudinit", Storage: "lvm", Options: map[string]string{"media": "cdrom"}}},
	{"ide2", "sani:iso/Win2016-1616-evaluation.ISO,media=cdrom,size=5198078K", Disk{Volume: "sani:iso/Win2016-1616-evaluation.ISO", Storage: "sani", SizeBytes: 5198078 << 10, Options: map[string]string{"media": "cdrom"}}},
	{"ide0", "local:iso/zero.iso,media=cdrom,size=112M", Disk{Volume: "local:iso/zero.iso", Storage: "local", SizeBytes: 112 << 20, Options: map[string]string{"media": "cdrom"}}},
	{"efidisk0", "local:100/vm-100-disk-0.raw,efitype=4m,pre-enrolled-keys=1,size=528K", Disk{Volume: "local:100/vm-100-disk-0.raw", Storage: "local", SizeBytes: 528 << 10, Options: map[string]string{"efitype": "4m", "pre-enrolled-keys": "1"}}},
	{"efidisk0", "rbd:vm-111-disk-0,efitype=4m,pre-enrolled-keys=1,size=1M", Disk{Volume: "rbd:vm-111-disk-0", Storage: "rbd", SizeBytes: 1 << 20, Options: map[string]string{"efitype": "4m", "pre-enrolled-keys": "1"}}},
	// bpg: a disk with most options.
	{"scsi0", "local-lvm:vm-100-disk-0,aio=io_uring,backup=1,cache=none,discard=ignore,replicate=1,size=8G,ssd=1", Disk{Volume: "local-lvm:vm-100-disk-0", Storage: "local-lvm", SizeBytes: 8 << 30, Options: map[string]string{"aio": "io_uring", "backup": "1", "cache": "none", "discard": "ignore", "replicate": "1", "ssd": "1"}}},
	// Constructed in print_drive order (not copied from a payload).
	{"tpmstate0", "local-lvm:vm-100-disk-1,size=4M,version=v2.0", Disk{Volume: "local-lvm:vm-100-disk-1", Storage: "local-lvm", SizeBytes: 4 << 20, Options: map[string]string{"version": "v2.0"}}},
	{"virtio15", "local-zfs:vm-101-disk-0,iothread=1,size=32G", Disk{Volume: "local-zfs:vm-101-disk-0", Storage: "local-zfs", SizeBytes: 32 << 30, Options: map[string]string{"iothread": "1"}}},
	// LXC: print_ct_mountpoint writes mp= right after the volume. The first
	// two are pve-container test configs; the rest constructed in print order.
	{"rootfs", "local:snapshotable-disk-1", Disk{Volume: "local:snapshotable-disk-1", Storage: "local"}},
	{"rootfs", "local-lvm:vm-101-disk-0,size=8G", Disk{Volume: "local-lvm:vm-101-disk-0", Storage: "local-lvm", SizeBytes: 8 << 30}},
	{"mp0", "local:snapshotable-disk-2,mp=/invalid/mp0", Disk{Volume: "local:snapshotable-disk-2", Storage: "local", Options: map[string]string{"mp": "/invalid/mp0"}}},
	{"mp1", "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=32G", Disk{Volume: "local-lvm:vm-101-disk-1", Storage: "local-lvm", SizeBytes: 32 << 30, Options: map[string]string{"mp": "/data", "backup": "1"}}},
	{"mp255", "/srv/share,mp=/mnt/share,ro=1,shared=1", Disk{Volume: "/srv/share", Options: map[string]string{"mp": "/mnt/share", "ro": "1", "shared": "1"}}},
	{"rootfs", "local-zfs:subvol-200-disk-0,acl=0,mountoptions=noatime;nodev,size=4G", Disk{Volume: "local-zfs:subvol-200-disk-0", Storage: "local-zfs", SizeBytes: 4 << 30, Options: map[string]string{"acl": "0", "mountoptions": "noatime;nodev"}}},
}

func TestParseDiskCanonical(t *testing.T) {
	for _, tc := range canonicalDisks {
		got, err := ParseDisk(tc.key, tc.value)
		if err != nil {
			t.Errorf("ParseDisk(%q, %q): %v", tc.key, tc.value, err)
			continue
		}
		want := tc.want
		want.Key = tc.key
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ParseDisk(%q, %q)\n got %#v\nwant %#v", tc.key, tc.value, got, want)
		}
		if f := got.Format(); f != tc.value {
			t.Errorf("Format(ParseDisk(%q, %q)) = %q", tc.key, tc.value, f)
		}
	}
}

// Values Proxmox accepts in other spellings, and what it stores after
// parse_drive/print_drive (or parse_volume/print_ct_mountpoint).
func TestParseDiskNormalises(t *testing.T) {
	for _, tc := range []struct{ key, in, want string }{
		// qemu-server test configs written by hand, not in print order.
		{"scsi0", "local-zfs:vm-$vmid-disk-1,size=8G,replicate=0", "local-zfs:vm-$vmid-disk-1,replicate=0,size=8G"},
		{"scsi0", "local:8006/vm-8006-disk-0.raw,discard=on,size=104858K,aio=threads", "local:8006/vm-8006-disk-0.raw,aio=threads,discard=on,size=104858K"},
		{"scsi0", "local-zfs:vm-$vmid-disk-1,size=8G    ", "local-zfs:vm-$vmid-disk-1,size=8G"},
		// bpg vms_types_test.go: options in creation order.
		{"scsi0", "local-lvm:vm-2041-disk-0,discard=on,ssd=1,iothread=1,size=8G,cache=writeback", "local-lvm:vm-2041-disk-0,cache=writeback,discard=on,iothread=1,size=8G,ssd=1"},
		// file=/volume= are the default key; sizes re-printed by format_size.
		{"scsi1", "file=local-lvm:vm-101-disk-1,size=32768M", "local-lvm:vm-101-disk-1,size=32G"},
		{"virtio0", "iothread=on,volume=local-lvm:vm-101-disk-0,size=1024K", "local-lvm:vm-101-disk-0,iothread=1,size=1M"},
		{"sata0", "local:vm-1-disk-0,ssd=yes,backup=false,size=1.5G", "local:vm-1-disk-0,backup=0,size=1536M,ssd=1"},
		{"scsi2", "local:vm-1-disk-0,bps_rd_length=5,cyls=2", "local:vm-1-disk-0,bps_rd_max_length=5"},
		{"ide2", "media=cdrom,none", "none,media=cdrom"},
		{"mp0", "size=8192M,mp=/data,backup=1,local-lvm:vm-101-disk-1", "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G"},
		{"rootfs", "volume=local-lvm:vm-101-disk-0,size=8G,ro=off", "local-lvm:vm-101-disk-0,ro=0,size=8G"},
	} {
		d, err := ParseDisk(tc.key, tc.in)
		if err != nil {
			t.Errorf("ParseDisk(%q, %q): %v", tc.key, tc.in, err)
			continue
		}
		if got := d.Format(); got != tc.want {
			t.Errorf("ParseDisk(%q, %q).Format() = %q, want %q", tc.key, tc.in, got, tc.want)
		}
	}
}

func TestParseDiskErrors(t *testing.T) {
	for _, tc := range []struct{ key, in, msg string }{
		{"unused0", "local-lvm:vm-101-disk-2", `"unused0" is not a disk key`},
		{"scsi31", "local-lvm:vm-101-disk-2", "not a disk key"},
		{"scsi0", "", "no volume"},
		{"scsi0", "iothread=1,size=8G", "no volume"},
		{"scsi0", "a:b,c:d", "two values without a key"},
		{"scsi0", "a:b,file=c:d", "file given twice"},
		{"scsi0", "file=a:b,volume=c:d", `duplicate key "file"`},
		{"scsi0", "a:b,size=8G,size=9G", `duplicate key "size"`},
		{"scsi0", "a:b,size=8X", `size "8X" is not a number`},
		{"scsi0", "a:b,size=", `key "size" has no value`},
		{"scsi0", "a:b,=1", "has no key"},
		{"scsi0", "a:b,Io thread=1", "invalid key"},
		{"scsi0", "a:b,iothread=maybe", `iothread="maybe" is not a boolean`},
		{"scsi0", "a:b,media=floppy", "must be cdrom or disk"},
		{"rootfs", "local:x,mp=/", "rootfs takes no mp="},
		{"mp0", "local:x,size=8G", "no mount point path (mp=)"},
		{"scsi0", "a:b,size=99999999T", "too large"},
	} {
		_, err := ParseDisk(tc.key, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseDisk(%q, %q) error = %v, want one containing %q", tc.key, tc.in, err, tc.msg)
		}
	}
}

func TestIsDiskKey(t *testing.T) {
	yes := map[Kind][]string{
		KindQEMU: {"ide0", "ide3", "sata0", "sata5", "scsi0", "scsi9", "scsi10", "scsi30", "virtio0", "virtio15", "efidisk0", "tpmstate0"},
		KindLXC:  {"rootfs", "mp0", "mp9", "mp10", "mp99", "mp100", "mp199", "mp255"},
	}
	no := map[Kind][]string{
		KindQEMU: {"ide4", "sata6", "scsi31", "scsi01", "virtio16", "efidisk1", "tpmstate1", "unused0", "rootfs", "mp0", "net0", ""},
		KindLXC:  {"mp256", "mp01", "unused0", "scsi0", "rootfs0", ""},
	}
	for kind, keys := range yes {
		for _, k := range keys {
			if !IsDiskKey(kind, k) {
				t.Errorf("IsDiskKey(%s, %q) = false", kind, k)
			}
		}
	}
	for kind, keys := range no {
		for _, k := range keys {
			if IsDiskKey(kind, k) {
				t.Errorf("IsDiskKey(%s, %q) = true", kind, k)
			}
		}
	}
	if IsDiskKey("bhyve", "scsi0") {
		t.Error("IsDiskKey of an unknown kind")
	}
}

func TestDiskPredicates(t *testing.T) {
	d, _ := ParseDisk("ide2", "local-lvm:vm-101-cloudinit,media=cdrom")
	if !d.IsCDROM() || !d.IsCloudInit() || d.IsEmpty() {
		t.Errorf("cloud-init drive: %+v", d)
	}
	d, _ = ParseDisk("ide2", "none,media=cdrom")
	if !d.IsCDROM() || d.IsCloudInit() || !d.IsEmpty() {
		t.Errorf("empty CD drive: %+v", d)
	}
	d, _ = ParseDisk("scsi1", "local:101/vm-101-cloudinit.qcow2,media=cdrom")
	if !d.IsCloudInit() {
		t.Errorf("qcow2 cloud-init drive: %+v", d)
	}
	d, _ = ParseDisk("scsi0", "local-lvm:vm-101-disk-0,size=32G")
	if d.IsCDROM() || d.IsCloudInit() || d.IsEmpty() {
		t.Errorf("plain disk: %+v", d)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1000", 1000}, {"1K", 1024}, {"1KiB", 1024}, {"32G", 32 << 30}, {"32GiB", 32 << 30},
		{"104858K", 104858 << 10}, {"2T", 2 << 40}, {"1.5G", 1536 << 20}, {"0.1K", 102}, {"1.0M", 1 << 20},
		{"8191T", 8191 << 40},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	// parse_size's regex: no sign, blank, lower-case unit, bytes suffix, "P".
	for _, bad := range []string{"", "-1G", " 1G", "1g", "1GB", "1P", "1.G", ".5G", "1e3", "9223372036854775808", "8388608T", "8388608.0T"} {
		if n, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, n)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{1, "1"}, {1000, "1000"}, {1024, "1K"}, {1536, "1536"}, {528 << 10, "528K"}, {1 << 20, "1M"},
		{1536 << 20, "1536M"}, {32 << 30, "32G"}, {1 << 40, "1T"}, {1 << 50, "1024T"}, {0, "0T"},
		{104858 << 10, "104858K"},
	} {
		if got := FormatSize(tc.in); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSizeGiB(t *testing.T) {
	for in, want := range map[int64]int64{0: 0, -5: 0, 1: 1, 1 << 30: 1, 1<<30 + 1: 2, 32 << 30: 32, 1536 << 20: 2} {
		if got := SizeGiB(in); got != want {
			t.Errorf("SizeGiB(%d) = %d, want %d", in, got, want)
		}
	}
}

// FuzzParseDisk: whatever ParseDisk accepts formats to a value that parses
// to the same Disk and formats identically (Format is canonical).
func FuzzParseDisk(f *testing.F) {
	keys := []string{"scsi0", "ide2", "virtio1", "sata3", "efidisk0", "tpmstate0", "rootfs", "mp0"}
	for _, tc := range canonicalDisks {
		for i, k := range keys {
			if k == tc.key {
				f.Add(uint8(i), tc.value)
			}
		}
	}
	f.Add(uint8(0), "file=local:vm-1-disk-0,size=0,iothread=TRUE")
	f.Add(uint8(7), "size=1.5G,mp=/a=b,backup=no,x:y")
	f.Fuzz(func(t *testing.T, k uint8, value string) {
		key := keys[int(k)%len(keys)]
		d, err := ParseDisk(key, value)
		if err != nil {
			return
		}
		once := d.Format()
		d2, err := ParseDisk(key, once)
		if err != nil {
			t.Fatalf("ParseDisk(%q, %q) ok, but its Format %q fails: %v", key, value, once, err)
		}
		if twice := d2.Format(); twice != once {
			t.Fatalf("Format not stable: %q -> %q -> %q", value, once, twice)
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("ParseDisk(Format(%q)) = %#v, want %#v", value, d2, d)
		}
	})
}

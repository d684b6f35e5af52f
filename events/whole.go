package events

import "strings"

// Disk is an observed disk.
type Disk struct {
	// Volume is the storage volume ("local-lvm:vm-101-disk-0"), "none"
	// or "cdrom" for a drive without one, or a path.
	Volume    string `json:"volume"`
	SizeBytes int64  `json:"size_bytes"`
	// Media is "cdrom" for CD-ROM drives.
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

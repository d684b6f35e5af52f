package pvesim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ---- detached volumes ---------------------------------------------------------
//
// A disk removed from a guest's config (delete, or a new volume written
// over its key) is not destroyed: qemu-server's
// vmconfig_register_unused_drive and pve-container's mount point deletion
// keep a volume the guest owns as unusedN (add_unused_volume: the lowest
// free N, once). A CD-ROM or a volume of another guest is just dropped; a
// cloud-init drive is freed.

// ownerRe reads the owner vmid of a volume name (vm-<id>-…, base-<id>-…,
// subvol-<id>-…, <id>/vm-<id>-… on directory storages).
var ownerRe = regexp.MustCompile(`^[^:]+:(?:\d+/)?(?:vm|base|subvol|basevol)-(\d+)-`)

// detachDrive registers the volume of drive key's old value v as unused
// when the guest owns it. Caller holds the sim's lock.
func (g *guest) detachDrive(key, v string) {
	if !driveKeyRe.MatchString(key) {
		return
	}
	vol := volid(v)
	if strings.Contains(v, "media=cdrom") || vol == "none" || vol == "cdrom" || ciDriveRe.MatchString(vol) {
		return
	}
	m := ownerRe.FindStringSubmatch(vol)
	if m == nil || m[1] != strconv.Itoa(g.vmid) {
		return
	}
	for k, u := range g.conf {
		if strings.HasPrefix(k, "unused") && volid(u) == vol {
			return
		}
	}
	for n := 0; ; n++ {
		k := fmt.Sprintf("unused%d", n)
		if _, used := g.conf[k]; !used {
			g.conf[k] = vol
			return
		}
	}
}

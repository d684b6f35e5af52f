package pvesim

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Volumes a guest's removal frees (vdisk_free, each under its storage's
// lock: storagelock.go).

// volOwnerRe reads the owner vmid from a volume id's last component (a
// linked clone's base-<id>-…/vm-<owner>-…, a directory storage's
// <id>/vm-<owner>-….raw), as the plugins' parse_volname give it.
var volOwnerRe = regexp.MustCompile(`(?:^[^:]+:|/)(?:vm|base|subvol|basevol)-(\d+)-[^/]*$`)

// volumeOwner is the vmid owning volume id vol, 0 for none.
func volumeOwner(vol string) int {
	m := volOwnerRe.FindStringSubmatch(vol)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// unusedKeys are conf's unusedN keys by N. (foreach_unused_volume takes
// them in Perl's hash order.)
func unusedKeys(conf map[string]string) []string {
	var keys []string
	for k := range conf {
		if strings.HasPrefix(k, "unused") {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		x, _ := strconv.Atoi(strings.TrimPrefix(a, "unused"))
		y, _ := strconv.Atoi(strings.TrimPrefix(b, "unused"))
		return x - y
	})
	return keys
}

// destroyVolumes are the volumes a destroy visits, in its order.
// qemu-server's destroy_vm: the config's drives in valid_drive_names
// order (CD-ROMs not, a cloud-init drive too), vmstate, unusedN, each
// snapshot's vmstate, then the pending section's. pve-container's
// destroy_lxc_container: rootfs, mp0, …, unusedN, then the pending
// section's. Each volume on a storage, once.
func destroyVolumes(g *guest) []string {
	var vols []string
	seen := map[string]bool{}
	visit := func(conf map[string]string, extra ...string) {
		var keys []string
		for k, v := range conf {
			if driveKeyRe.MatchString(k) && (g.kind == LXC || !strings.Contains(v, "media=cdrom") || ciDriveRe.MatchString(volid(v))) {
				keys = append(keys, k)
			}
		}
		driveOrder(keys)
		for _, k := range append(append(keys, extra...), unusedKeys(conf)...) {
			vol := volid(conf[k])
			if sid, ok := volumeStorage(vol); ok && storageByName(sid) != nil && !seen[vol] {
				seen[vol] = true
				vols = append(vols, vol)
			}
		}
	}
	if g.kind == QEMU {
		visit(g.conf, "vmstate")
		for _, name := range sortedKeys(g.snaps) {
			visit(map[string]string{"vmstate": g.snaps[name].vmstate}, "vmstate")
		}
		visit(g.pending, "vmstate")
	} else {
		visit(g.conf)
		visit(g.pending)
	}
	return vols
}

// volFrees is the outcome of a destroy's frees under their storages'
// locks.
type volFrees struct {
	run      *lockRun
	notes    []string // lines printed
	warnings []string // QEMU: frees that failed (log_warn)
	freed    []string // LXC: the volumes freed before one failed
	err      error    // LXC: the free that failed
}

// destroyLocks takes the storage lock of each volume a destroy frees:
// those of destroyVolumes the guest owns (qemu-server skips the others;
// pve-container's delete_mountpoint_volume warns "ignore deletion of
// '<volid>', CT <vmid> isn't the owner!"). qemu-server's destroy_vm frees
// each in an eval and warns of a failure (`log_warn("Could not remove
// disk '$volid', check manually: $@")`) and goes on; pve-container's
// destroy_lxc_container calls vdisk_free bare, so the first failure fails
// the task. Caller holds s.mu.
func (s *Sim) destroyLocks(g *guest) volFrees {
	fr := volFrees{run: s.lockRun(g.node)}
	for _, vol := range destroyVolumes(g) {
		if volumeOwner(vol) != g.vmid {
			if g.kind == LXC {
				fr.notes = append(fr.notes, fmt.Sprintf("ignore deletion of '%s', CT %d isn't the owner!", vol, g.vmid))
			}
			continue
		}
		sid, _ := volumeStorage(vol)
		err := fr.run.take(sid)
		switch {
		case err == nil:
			fr.freed = append(fr.freed, vol)
		case g.kind == QEMU:
			fr.warnings = append(fr.warnings, fmt.Sprintf("Could not remove disk '%s', check manually: %s", vol, err))
		default:
			fr.err = err
			return fr
		}
	}
	return fr
}

// markFreed records volumes freed while g's config still names them
// (volumes.go volFreed). Caller holds s.mu.
func (s *Sim) markFreed(g *guest, vols []string) {
	for _, vol := range vols {
		if s.freedVols == nil {
			s.freedVols = map[string]*guest{}
		}
		s.freedVols[vol] = g
	}
}

package pvesim

import (
	"fmt"
	"strings"
)

// A guest's disks leaving its config or its storage: qemu-server's unlink
// and move_disk (volumes.go registers the routes).

// unlink is qemu-server's API2/Qemu.pm "unlink": idlist becomes the
// delete list of the synchronous config update (update_vm), force and all,
// so a listed disk is kept as unusedN or, with force, freed, and on a
// running VM unplugged or left pending as any deletion is.
func (s *Sim) unlink(q *req, g *guest) (any, error) {
	q.params["delete"] = q.params["idlist"]
	delete(q.params, "idlist")
	return s.putConfig(q, g)
}

// ---- move_disk ----------------------------------------------------------------

// qemuDriveNamesWithUnused is valid_drive_names_with_unused, move_disk's
// "disk" enumeration.
var qemuDriveNamesWithUnused = func() []string {
	out := append([]string(nil), qemuDriveNames...)
	for i := 0; i < 256; i++ {
		out = append(out, fmt.Sprintf("unused%d", i))
	}
	return out
}()

type moveReq struct {
	disk, storage, format, digest string
	del                           bool
}

// moveDisk is qemu-server's API2/Qemu.pm move_vm_disk with a target
// storage: $load_and_check_move before forking (errors answer 500, the
// storage's lack of images 400), then a "qmmove" task that checks again,
// copies the volume to a new vm-<vmid>-disk-<n> on the target (clone_disk:
// format= dropped, size= kept, a format the storage lacks warned about)
// and keeps the source as unusedN (add_unused_volume) or, with delete=1,
// frees it. A running VM's disk moves too (drive-mirror). Reassigning a
// disk to another VM (target-vmid) is not implemented.
func (s *Sim) moveDisk(q *req, g *guest) (any, error) {
	if !q.has("disk") {
		return nil, paramErr1("disk", "property is missing and it is not optional")
	}
	if err := enumParam("disk", q.str("disk"), qemuDriveNamesWithUnused); err != nil {
		return nil, err
	}
	if q.has("format") {
		if err := enumParam("format", q.str("format"), []string{"raw", "qcow2", "vmdk"}); err != nil {
			return nil, err
		}
	}
	del, err := q.boolParam("delete")
	if err != nil {
		return nil, err
	}
	if d := q.str("digest"); len(d) > 40 {
		return nil, paramErr1("digest", "value may only be 40 characters long")
	}
	switch {
	case q.has("target-vmid") && q.has("storage"):
		msg := "either set 'storage' or 'target-vmid', but not both"
		return nil, paramErr(map[string]string{"target-vmid": msg, "storage": msg})
	case q.has("target-vmid"):
		return nil, &apiError{status: 501, msg: "pvesim: move_disk with target-vmid (reassigning a disk) is not implemented"}
	case !q.has("storage"):
		msg := "both 'storage' and 'target-vmid' missing, either needs to be set"
		return nil, paramErr(map[string]string{"target-vmid": msg, "storage": msg})
	}
	r := &moveReq{disk: q.str("disk"), storage: q.str("storage"), format: q.str("format"), digest: q.str("digest"), del: del}
	if _, err := s.checkMove(g, r); err != nil {
		if _, ok := err.(*apiError); ok {
			return nil, err
		}
		return nil, fail500("%s", err)
	}
	old := volid(g.conf[r.disk])
	locks, lockErr := s.moveLocks(g, r, old)
	d := locks.taskDelay("qmmove", lockErr)
	t := s.startTaskIn(d, g.node, "qmmove", g.kind, g.vmid, q.user, nil, func(print func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		snapshotted, err := s.checkMove(g, r)
		if err != nil {
			return nil, taskError(err.Error())
		}
		if lockErr != nil {
			oldsid, _, _ := strings.Cut(old, ":")
			print(fmt.Sprintf("copying volume '%s' from current storage '%s' to target storage '%s'", old, oldsid, r.storage))
			for _, m := range locks.cleanup {
				print(m)
			}
			return nil, taskFail("storage migration failed: %s", lockErr)
		}
		warnings := s.doMove(g, r, snapshotted, print)
		if locks.freeErr != "" {
			print(locks.freeErr) // the source's vdisk_free: `warn $@ if $@`
		}
		return warnings, nil
	}, nil)
	return t.upid, nil
}

// moveLocks is a move's storage locks (storagelock.go): move_vm_disk's
// clone_disk allocates the new volume on the target (vdisk_alloc), a
// template's is then made a base volume there (template_create:
// vdisk_create_base; if that fails the new volume is freed again), and
// with delete the source is freed after the copy (vdisk_free, whose
// failure is only printed: the volume stays on its storage). Caller holds
// s.mu.
func (s *Sim) moveLocks(g *guest, r *moveReq, old string) (*moveLockRun, error) {
	m := &moveLockRun{lockRun: s.lockRun(g.node)}
	if _, _, err := m.alloc([]string{r.storage}); err != nil {
		return m, err
	}
	if g.template() {
		if err := m.take(r.storage); err != nil {
			m.cleanup = m.free([]string{r.storage})
			return m, err
		}
	}
	if r.del {
		oldsid, _, _ := strings.Cut(old, ":")
		if failed := m.free([]string{oldsid}); len(failed) > 0 {
			m.freeErr = failed[0]
		}
	}
	return m, nil
}

// moveLockRun is a move's lockRun with what its task prints of it.
type moveLockRun struct {
	*lockRun
	cleanup []string // the new volume's free after a failure, if it failed
	freeErr string   // the source's free, if it failed
}

// checkMove is move_vm_disk's $load_and_check_move; it reports whether a
// snapshot uses the volume (PVE::QemuServer::Drive::is_volume_in_use).
// Caller holds s.mu.
func (s *Sim) checkMove(g *guest, r *moveReq) (bool, error) {
	if g.lock() != "" {
		return false, fmt.Errorf("%s", lockedErr(g))
	}
	if r.digest != "" && r.digest != g.digest {
		//lint:ignore ST1005 Proxmox's own message (PVE::Tools::assert_if_modified), which clients match
		return false, fmt.Errorf("detected modified configuration - file changed by other user? Try again.")
	}
	v := g.conf[r.disk]
	if v == "" {
		return false, fmt.Errorf("disk '%s' does not exist", r.disk)
	}
	old := volid(v)
	if old == "" {
		return false, fmt.Errorf("disk '%s' has no associated volume", r.disk)
	}
	if strings.Contains(","+v+",", ",media=cdrom,") || old == "cdrom" || old == "none" {
		return false, fmt.Errorf("you can't move a cdrom")
	}
	oldsid, _, _ := strings.Cut(old, ":")
	if oldsid == r.storage && (r.format == "" || r.format == "raw") {
		// The simulated storages hold raw volumes only.
		return false, fmt.Errorf("you can't move to the same storage with same format")
	}
	st := storageByName(r.storage)
	if st == nil {
		return false, fmt.Errorf("storage '%s' does not exist", r.storage)
	}
	if !st.hasContent("images") {
		return false, paramErr1("storage", "storage '%s' does not support vm images", r.storage)
	}
	snapshotted := false
	for _, sn := range g.snaps {
		for k, sv := range sn.conf {
			if (driveKeyRe.MatchString(k) || strings.HasPrefix(k, "unused")) && volid(sv) == old {
				snapshotted = true
			}
		}
	}
	if snapshotted && r.del {
		return false, fmt.Errorf("you can't move a disk with snapshots and delete the source")
	}
	return snapshotted, nil
}

// doMove is move_vm_disk's $move_updatefn after its checks. Caller holds
// s.mu.
func (s *Sim) doMove(g *guest, r *moveReq, snapshotted bool, print func(string)) []string {
	var warnings []string
	v := g.conf[r.disk]
	old := volid(v)
	oldsid, _, _ := strings.Cut(old, ":")
	print(fmt.Sprintf("copying volume '%s' from current storage '%s' to target storage '%s'", old, oldsid, r.storage))
	if snapshotted {
		warnings = append(warnings, "moving disk with snapshots, snapshots will not be moved!")
	}
	if r.format != "" && r.format != "raw" {
		warnings = append(warnings, fmt.Sprintf("format '%s' is not supported by the target storage '%s' - using 'raw' instead", r.format, r.storage))
	}
	used := s.usedDiskNames()
	n := 0
	for used[fmt.Sprintf("%s:vm-%d-disk-%d", r.storage, g.vmid, n)] || used[fmt.Sprintf("%s:base-%d-disk-%d", r.storage, g.vmid, n)] {
		n++
	}
	prefix := "vm"
	if g.template() { // template_create renames the copy
		prefix = "base"
	}
	name := fmt.Sprintf("%s:%s-%d-disk-%d", r.storage, prefix, g.vmid, n)
	delete(s.freedVols, name)
	if strings.HasPrefix(r.disk, "unused") {
		g.conf[r.disk] = name
	} else {
		if m, ok := propList(v, "file"); ok {
			m["file"] = name
			delete(m, "format")
			g.conf[r.disk] = printProps(m, "=file")
		} else {
			g.conf[r.disk] = strings.Replace(v, old, name, 1)
		}
	}
	if r.del {
		print(fmt.Sprintf("removing source volume '%s' after successful copy", old))
	} else {
		for i := 0; ; i++ {
			k := fmt.Sprintf("unused%d", i)
			if u, ok := g.conf[k]; ok {
				if u == old {
					break
				}
				continue
			}
			g.conf[k] = old
			print(fmt.Sprintf("adding source volume '%s' as '%s' to config", old, k))
			break
		}
	}
	g.touch()
	return warnings
}

package pvesim

import (
	"fmt"
	"strings"
)

// ---- template, destroy ------------------------------------------------------------

// template is POST …/{vmid}/template: a "qmtemplate"/"vztemplate" task
// that turns each volume into a base volume (vdisk_create_base, under its
// storage's lock: templateVolumes). qemu-server (src/PVE/API2/Qemu.pm
// template, PVE::QemuServer::template_create) writes template: 1 first
// and the config again after each volume, so a volume whose lock times
// out leaves a template whose volumes before it are converted;
// pve-container (PVE::LXC::template_create) writes the config once all
// are, so it leaves the config as it was.
func (s *Sim) template(q *req, g *guest) (any, error) {
	if len(g.snaps) > 0 {
		return nil, fail500("unable to create template, because %s contains snapshots", g.typeWord())
	}
	if g.template() {
		return nil, fail500("you can't convert a template to a template")
	}
	if g.running() {
		if g.kind == LXC {
			return nil, fail500("you can't convert a CT to template if the CT is running")
		}
		return nil, fail500("you can't convert a VM to template if VM is running")
	}
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	typ := map[Kind]string{QEMU: "qmtemplate", LXC: "vztemplate"}[g.kind]
	keys := templateVolumes(g)
	r := s.lockRun(g.node)
	done, lockErr := len(keys), error(nil)
	for i, k := range keys {
		sid, _ := volumeStorage(g.conf[k])
		if lockErr = r.take(sid); lockErr != nil {
			done = i
			break
		}
	}
	d := r.taskDelay(typ, lockErr)
	t := s.startTaskIn(d, g.node, typ, g.kind, g.vmid, q.user, nil, func(func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if g.kind == LXC && lockErr != nil {
			return nil, lockErr
		}
		g.conf["template"] = "1"
		for _, k := range keys[:done] {
			// create_base: vm- becomes base-, a ZFS subvol- basevol-.
			v := strings.Replace(g.conf[k], fmt.Sprintf("vm-%d-disk-", g.vmid), fmt.Sprintf("base-%d-disk-", g.vmid), 1)
			g.conf[k] = strings.Replace(v, fmt.Sprintf("subvol-%d-disk-", g.vmid), fmt.Sprintf("basevol-%d-disk-", g.vmid), 1)
		}
		g.touch()
		return nil, lockErr
	}, nil)
	return t.upid, nil
}

// templateVolumes are the keys of g's volumes a template conversion
// passes to vdisk_create_base, in its order: QEMU drives other than
// CD-ROMs and cloud-init drives (template_create: foreach_volume over
// valid_drive_names, `return if drive_is_cdrom($drive)`), a container's
// rootfs and mount points (foreach_volume); each a volume on a storage.
func templateVolumes(g *guest) []string {
	var keys []string
	for _, k := range g.volumeKeys(g.conf) {
		v := g.conf[k]
		if strings.Contains(v, "media=cdrom") { // as before: anywhere in the option, not only as one of its options
			continue
		}
		if sid, _ := volumeStorage(v); storageByName(sid) != nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// destroy is DELETE …/{vmid}, qemu-server's and pve-container's destroy_vm:
// the early checks (protection, for LXC the lock, HA without purge, for
// QEMU a running VM) answer at the call and are repeated by the worker
// under the config lock; the worker then removes the guest and, with purge,
// its HA resource.
func (s *Sim) destroy(q *req, g *guest) (any, error) {
	skiplock, err := q.boolParam("skiplock")
	if err != nil {
		return nil, err
	}
	force, err := q.boolParam("force")
	if err != nil {
		return nil, err
	}
	purge, err := q.boolParam("purge")
	if err != nil {
		return nil, err
	}
	if _, err := q.boolParam("destroy-unreferenced-disks"); err != nil {
		return nil, err
	}
	word := g.typeWord()
	early := func() error {
		if g.conf["protection"] == "1" {
			return taskFail("can't remove %s %d - protection mode enabled", word, g.vmid)
		}
		if g.kind == LXC && g.lock() != "" {
			return taskError(lockedErr(g)) // pve-container checks the lock early
		}
		if !purge && s.haOf(g) != nil {
			return taskFail("unable to remove %s %d - used in HA resources and purge parameter not set.", word, g.vmid)
		}
		if g.kind == QEMU && g.running() {
			return taskFail("VM %d is running - destroy failed", g.vmid)
		}
		return nil
	}
	if err := early(); err != nil {
		return nil, fail500("%s", err.Error())
	}
	if g.kind == LXC && g.running() && !force {
		return nil, fail500("unable to destroy CT %d - container is running", g.vmid)
	}
	typ := map[Kind]string{QEMU: "qmdestroy", LXC: "vzdestroy"}[g.kind]
	fr := volFrees{run: s.lockRun(g.node)}
	if g.kind == LXC || g.lock() == "" || skiplock {
		fr = s.destroyLocks(g) // a VM's lock fails the task before (check_lock)
	}
	d := fr.run.taskDelay(typ, fr.err)
	t := s.startTaskIn(d, g.node, typ, g.kind, g.vmid, q.user, nil, func(print func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if err := early(); err != nil {
			return nil, err
		}
		if g.kind == QEMU && g.lock() != "" && !skiplock {
			return nil, taskError(lockedErr(g)) // destroy_vm's check_lock
		}
		if g.running() {
			if !force {
				return nil, taskFail("unable to destroy CT %d - container is running", g.vmid)
			}
			print(fmt.Sprintf("forced to stop CT %d before destroying!", g.vmid))
			g.status = "stopped"
		}
		for _, l := range fr.notes {
			print(l)
		}
		if fr.err != nil {
			// destroy_lxc_container: vdisk_free dies; the volumes freed
			// before stay freed, the config stays.
			s.markFreed(g, fr.freed)
			return nil, fr.err
		}
		ha := s.haOf(g)
		delete(s.guests, g.vmid)
		s.setVMPool(g.vmid, "") // remove_vm_access, with or without purge
		delete(s.noACPI, g.vmid)
		if purge {
			print(fmt.Sprintf("purging %s %d from related configurations..", word, g.vmid))
			if ha != nil {
				s.deleteHAService(ha.sid, true)
				print(fmt.Sprintf("NOTE: removed %s %d from HA resource configuration.", word, g.vmid))
			}
		}
		return fr.warnings, nil
	}, nil)
	return t.upid, nil
}

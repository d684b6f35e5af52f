package pvesim

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
)

// ---- clone --------------------------------------------------------------------

// volRe is a guest disk's volume: storage, name (a linked clone's with
// its base), its last component's prefix and disk number, options.
var volRe = regexp.MustCompile(`^([^:]+):((?:(?:base|basevol)-\d+-disk-\d+/)?(vm|base|subvol|basevol)-\d+-disk-(\d+))(,.*)?$`)

// baseVolRe matches a template's base volume, the only kind a linked clone
// can be made of (volume_has_feature 'clone' on lvmthin, rbd, zfspool, …;
// a ZFS container template's is a basevol-).
var baseVolRe = regexp.MustCompile(`^[^:]+:(base|basevol)-\d+-disk-\d+(,|$)`)

// driveKeyRe matches the config keys that hold volumes: QEMU drives
// (PVE::QemuServer::Drive::valid_drive_names) and LXC mount points.
var driveKeyRe = regexp.MustCompile(`^((ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0|rootfs|mp\d+)$`)

// clonePlan is a clone as the API call's checks leave it: what the task
// will create and what it logs.
type clonePlan struct {
	src            *guest
	newid          int
	full           bool
	target, pool   string
	conf           map[string]string // the target's config at the call
	vols           map[string]string // LXC: volumes the task adds to it
	first          []string          // the task's first log lines
	targetStorages []string          // where full-cloned volumes go
	// lockStorages are the storages whose lock the task takes, one per
	// volume: the target of an allocation, the base's for a linked clone.
	lockStorages []string
}

// clone is POST …/{vmid}/clone: qemu-server's and pve-container's clone_vm,
// with their checks in their order (pool, target node, storage, then the
// source's lock, the clone mode, the volumes, the new id).
func (s *Sim) clone(q *req, g *guest) (any, error) {
	if !q.has("newid") {
		return nil, paramErr1("newid", "property is missing and it is not optional")
	}
	newid, err := strconv.Atoi(q.str("newid"))
	if err != nil || newid < 100 || newid > 999999999 {
		return nil, paramErr1("newid", "type check ('integer') failed - got '%s'", q.str("newid"))
	}
	nameKey := "name"
	if g.kind == LXC {
		nameKey = "hostname"
	}
	errs := map[string]string{}
	if q.has(nameKey) {
		if _, msg := canonical(g.kind, nameKey, q.str(nameKey)); msg != "" {
			errs[nameKey] = msg
		}
	}
	if f := q.str("format"); g.kind == QEMU && q.has("format") && f != "raw" && f != "qcow2" && f != "vmdk" {
		errs["format"] = fmt.Sprintf("value '%s' does not have a value in the enumeration 'raw, qcow2, vmdk'", f)
	}
	fullParam, err := q.boolParam("full")
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	p := &clonePlan{src: g, newid: newid}
	if p.pool, err = s.poolParam(q); err != nil {
		return nil, err
	}
	if tn := q.str("target"); tn != "" && tn != g.node && tn != "localhost" {
		if s.nodeByName(tn) == nil {
			return nil, fail500("no such cluster node '%s'", tn)
		}
		p.target = tn
	}
	storage := q.str("storage")
	if storage != "" {
		st := storageByName(storage)
		if st == nil {
			return nil, fail500("storage '%s' does not exist", storage)
		}
		if g.kind == QEMU && !st.hasContent("images") {
			return nil, paramErr1("storage", "storage '%s' does not support vm images", storage)
		}
		if p.target != "" && !st.shared {
			return nil, fail500("can't clone to non-shared storage '%s'", storage)
		}
	}
	if l := g.lock(); l != "" {
		return nil, fail500("%s", lockedErr(g)) // QEMU check_lock; LXC set_lock 'disk'
	}
	if g.kind == LXC {
		// create_and_lock_config: PVE::Cluster::check_vmid_unused
		if o := s.guests[newid]; o != nil {
			return nil, fail500("%s %d already exists on node '%s'", o.typeWord(), newid, o.node)
		}
	}
	p.full = fullParam
	if !q.has("full") {
		p.full = !g.template()
	}
	if storage != "" && !p.full {
		return nil, fail500("parameter 'storage' not allowed for linked clones")
	}
	if q.has("format") && !p.full {
		return nil, fail500("parameter 'format' not allowed for linked clones")
	}
	if sn := q.str("snapname"); sn != "" {
		return nil, fail500("snapshot '%s' does not exist", sn)
	}
	if err := s.planVolumes(p, storage); err != nil {
		return nil, err
	}
	if g.kind == QEMU && s.guests[newid] != nil {
		return nil, fail500("unable to create VM %d: config file already exists", newid)
	}
	s.planConfig(p, q, nameKey)
	return s.startClone(q, p), nil
}

// planVolumes checks every volume of the source the way clone_vm's loop
// does (linked clones need base volumes; a running CT cannot be fully
// cloned; another node needs shared storage) and plans the target's
// volumes and log lines.
func (s *Sim) planVolumes(p *clonePlan, storage string) error {
	g := p.src
	word := map[Kind]string{QEMU: "VM", LXC: "container"}[g.kind]
	p.first = []string{fmt.Sprintf("creating a clone of %s %d with ID %d", word, g.vmid, p.newid)}
	p.conf = map[string]string{}
	p.vols = map[string]string{}
	shared := true
	seen := map[string]bool{}
	for _, k := range sortedKeys(g.conf) {
		v := g.conf[k]
		if k == "template" || strings.HasPrefix(k, "unused") || snapshotOnlyKeys[k] {
			continue
		}
		drive := driveKeyRe.MatchString(k)
		lxcVol := g.kind == LXC && drive
		qemuDisk := g.kind == QEMU && drive && !strings.Contains(v, "media=cdrom")
		if !lxcVol && !qemuDisk {
			if g.kind == QEMU && drive { // a CD-ROM: copied as it is
				if sid, ok := volumeStorage(v); ok && !storageByName(sid).isShared() {
					shared = false
				}
			}
			p.conf[k] = v
			if strings.HasPrefix(k, "net") {
				p.conf[k] = s.withMAC(g.kind, v)
			}
			continue
		}
		volid, _, _ := strings.Cut(v, ",")
		sid, _ := volumeStorage(v)
		if lxcVol && storage != "" {
			sid = storage // pve-container judges sharing by the target storage
		}
		if !storageByName(sid).isShared() {
			shared = false
		}
		if p.full {
			if lxcVol && g.running() {
				return fail500("Full clone of a running container is only possible from a snapshot")
			}
		} else if !baseVolRe.MatchString(v) {
			if lxcVol {
				return fail500("Linked clone feature for '%s' is not available", volid)
			}
			return fail500("Linked clone feature is not supported for '%s' (%s)", volid, k)
		}
		m := volRe.FindStringSubmatch(v)
		if m == nil {
			p.conf[k] = v
			continue
		}
		dst := m[1]
		if p.full && storage != "" {
			dst = storage
		}
		p.lockStorages = append(p.lockStorages, dst) // vdisk_alloc's target, or vdisk_clone's base
		// clone_image names the clone as the base's format: a ZFS
		// basevol's a subvol (ZFSPoolPlugin), any other base's a vm-.
		prefix := map[bool]string{false: "vm", true: "subvol"}[m[3] == "basevol"]
		nv := fmt.Sprintf("%s:%s/%s-%d-disk-%s%s", m[1], m[2], prefix, p.newid, m[4], m[5])
		mode := "linked"
		if p.full {
			// vdisk_alloc on the target: a container's subvol on a
			// zfspool (alloc_disk), else raw.
			nv = fmt.Sprintf("%s:%s-%d-disk-%s%s", dst, volPrefix(storageByName(dst), g.kind, false), p.newid, m[4], m[5])
			mode = "full"
			if !seen[dst] {
				seen[dst] = true
				p.targetStorages = append(p.targetStorages, dst)
			}
		}
		switch {
		case qemuDisk:
			p.conf[k] = nv
			p.first = append(p.first, fmt.Sprintf("create %s clone of drive %s (%s)", mode, k, volid))
		case p.full:
			p.vols[k] = nv
			p.first = append(p.first, fmt.Sprintf("create full clone of mountpoint %s (%s)", k, volid))
		default:
			p.vols[k] = nv
			p.first = append(p.first, fmt.Sprintf("create linked clone of mount point %s (%s)", k, volid))
		}
	}
	if p.target != "" && !shared {
		w := g.typeWord()
		return fail500("can't clone %s to node '%s' (%s uses local storage)", w, p.target, w)
	}
	return nil
}

func (st *storageDef) isShared() bool { return st != nil && st.shared }

// planConfig completes the target's config: new ids, name, description and
// the lock the target carries while the task runs ("clone" for QEMU,
// "create" for LXC).
func (s *Sim) planConfig(p *clonePlan, q *req, nameKey string) {
	g := p.src
	if g.kind == QEMU {
		p.conf["smbios1"] = "uuid=" + s.uuid()
		if _, ok := p.conf["vmgenid"]; ok {
			p.conf["vmgenid"] = s.uuid()
		}
		name := g.conf["name"]
		if name == "" {
			name = strconv.Itoa(g.vmid)
		}
		p.conf["name"] = "Copy-of-VM-" + name
	}
	if v := q.str(nameKey); v != "" {
		p.conf[nameKey] = v
	}
	if d := q.str("description"); d != "" {
		p.conf["description"] = d
	}
	p.conf["lock"] = map[Kind]string{QEMU: "clone", LXC: "create"}[g.kind]
}

// startClone creates the locked target on the source's node (an LXC
// source is locked "disk" meanwhile) and starts the task that finishes it:
// volumes, pool, unlock, and the move to the target node.
func (s *Sim) startClone(q *req, p *clonePlan) string {
	g := p.src
	conf := p.conf
	if g.kind == QEMU {
		// qemu-server writes "# qmclone temporary file\nlock: clone\n"
		// at once and the clone's config only once its disks are copied
		// (PVE/API2/Qemu.pm clone_vm): until then nothing in the guest
		// says whose clone it is.
		conf = map[string]string{"description": "qmclone temporary file", "lock": "clone"}
	}
	ng := s.newGuest(p.newid, g.kind, g.node, conf)
	if g.kind == LXC {
		g.conf["lock"] = "disk"
		g.touch()
	}
	unlockSource := func() {
		if g.kind == LXC && s.guests[g.vmid] == g && g.lock() == "disk" {
			delete(g.conf, "lock")
			g.touch()
		}
	}
	drop := func() {
		if s.guests[p.newid] == ng {
			delete(s.guests, p.newid)
		}
	}
	contended := s.contendedStorage(p.targetStorages)
	release := func() {}
	if p.full && contended == nil {
		release = s.takeCloneSlots(p.targetStorages)
	}
	typ := map[Kind]string{QEMU: "qmclone", LXC: "vzclone"}[g.kind]
	// The volumes' storage locks come first, then the copy (storagelock.go);
	// a lock that times out fails the clone once the volumes made before
	// it are freed again.
	r := s.lockRun(g.node)
	_, cleanup, lockErr := r.alloc(p.lockStorages)
	d := r.taskDelay(typ, lockErr)
	t := s.startTaskIn(d, g.node, typ, g.kind, g.vmid, q.user, p.first, func(print func(string)) ([]string, error) {
		defer release()
		defer unlockSource()
		if err := s.gone(ng); err != nil {
			return nil, err
		}
		if contended != nil {
			drop()
			return nil, taskFail("clone failed: %s", storageLockTimeout(contended))
		}
		if lockErr != nil {
			for _, m := range cleanup {
				print(m) // vdisk_free's failure, warned
			}
			drop() // clone_vm's cleanup: the target's volumes and config go
			return nil, taskFail("clone failed: %s", lockErr)
		}
		if g.kind == QEMU {
			clear(ng.conf)
			maps.Copy(ng.conf, p.conf)
		}
		maps.Copy(ng.conf, p.vols)
		if p.pool != "" {
			s.setVMPool(ng.vmid, p.pool) // add_vm_to_pool
		}
		delete(ng.conf, "lock")
		if p.target != "" {
			ng.node = p.target
		}
		ng.touch()
		return nil, nil
	}, func() {
		release()
		unlockSource()
		drop()
	})
	return t.upid
}

package pvesim

import (
	"fmt"
	"iter"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Disk allocation, volume attributes and appliance downloads: what
// other Proxmox clients expect of storage (see compat.go).

// ---- disks ------------------------------------------------------------------

// newDiskRe is qemu-server's $NEW_DISK_RE: "STORAGE:SIZE_GiB" (or a bare
// size with a default storage) asks for a new volume.
var newDiskRe = regexp.MustCompile(`^(([^/:\s]+):)?(\d+(\.\d+)?)$`)

// allocDriveKeyRe are the drives allocated here: QEMU ide/scsi/virtio/sata
// (efidisk0 and tpmstate0 have fixed sizes, see allocVolume) and container
// mount points.
var allocDriveKeyRe = map[Kind]*regexp.Regexp{
	QEMU: regexp.MustCompile(`^(ide|scsi|virtio|sata)(\d+)$`),
	LXC:  regexp.MustCompile(`^(rootfs|mp(\d+))$`),
}

// driveOrder sorts drive keys as qemu-server's valid_drive_names (ide,
// scsi, virtio, sata, efidisk0, tpmstate0) and pve-container (rootfs,
// mp0, mp1, …) visit them.
func driveOrder(keys []string) {
	rank := func(k string) (int, int) {
		for i, p := range []string{"rootfs", "ide", "scsi", "virtio", "sata", "efidisk", "tpmstate", "mp"} {
			if rest, ok := strings.CutPrefix(k, p); ok {
				n, _ := strconv.Atoi(rest)
				return i, n
			}
		}
		return 99, 0
	}
	sort.Slice(keys, func(i, j int) bool {
		a, an := rank(keys[i])
		b, bn := rank(keys[j])
		if a != b {
			return a < b
		}
		return an < bn
	})
}

// usedDiskNames are the volume names (storage:name) of vmid's disks that
// exist on the storages: every guest's config, pending section included.
// Caller holds s.mu.
func (s *Sim) usedDiskNames() map[string]bool {
	used := map[string]bool{}
	add := func(v string) {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimPrefix(strings.TrimPrefix(part, "file="), "volume=")
			if sid, name, ok := strings.Cut(part, ":"); ok && sid != "" && !strings.HasPrefix(part, "/") {
				if i := strings.LastIndexByte(name, '/'); i >= 0 {
					used[sid+":"+name[:i]] = true
					name = name[i+1:]
				}
				used[sid+":"+name] = true
				return
			}
		}
	}
	for _, g := range s.guests {
		for _, v := range g.conf {
			add(v)
		}
		for _, v := range g.pending {
			add(v)
		}
	}
	return used
}

// allocDisks allocates the new volumes a create or config write asks for
// ("scsi0=local-lvm:8", "scsi0=file=local-lvm:8,size=…", "mp0=ceph:2,mp=/x"),
// as qemu-server's create_disks and pve-container's create_disks do: a
// volume vm-<vmid>-disk-<n> (the lowest n free on that storage; base- for
// a template; a container's subvol- on a zfspool, volPrefix) of SIZE GiB,
// the drive re-printed with size= and without format=. defStorage is the
// create's "storage" parameter. allocs gets the key and storage of each
// volume allocated (vdisk_alloc, under the storage's lock). Caller holds
// s.mu.
func (s *Sim) allocDisks(kind Kind, vmid int, template bool, set, allocs map[string]string, defStorage string) error {
	if kind == QEMU {
		if err := s.allocCloudInit(vmid, set, allocs); err != nil {
			return err
		}
	}
	var keys []string
	for k := range set {
		if allocDriveKeyRe[kind].MatchString(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil // most config writes allocate nothing: skip the scan of every guest
	}
	driveOrder(keys)
	used := s.usedDiskNames()
	for _, k := range keys {
		defKey := "file"
		if kind == LXC {
			defKey = "volume"
		}
		m, ok := propList(set[k], defKey)
		if !ok || m["media"] == "cdrom" {
			continue
		}
		nd := newDiskRe.FindStringSubmatch(m[defKey])
		if nd == nil {
			continue
		}
		sid := nd[2]
		if sid == "" {
			sid = defStorage
		}
		if sid == "" {
			return fmt.Errorf("no storage ID specified (and no default storage)")
		}
		st := storageByName(sid)
		if st == nil {
			return fmt.Errorf("storage '%s' does not exist", sid)
		}
		gib, _ := strconv.ParseFloat(nd[3], 64)
		kib := int64(gib*1024*1024 + 0.999999) // vdisk_alloc takes KiB
		n := freeDiskIndex(used, sid, vmid)
		name := fmt.Sprintf("%s:%s-%d-disk-%d", sid, volPrefix(st, kind, template), vmid, n)
		used[name] = true
		delete(s.freedVols, name)
		allocs[k] = sid
		m[defKey] = name
		m["size"] = formatSize(kib << 10)
		delete(m, "format")
		if kind == LXC && k != "rootfs" {
			set[k] = printProps(m, "="+defKey, "mp")
		} else {
			if kind == LXC {
				delete(m, "mp")
			}
			set[k] = printProps(m, "="+defKey)
		}
	}
	return nil
}

// freeDiskIndex is the lowest n no volume of vmid on storage sid uses,
// whatever its prefix (pve-storage Plugin.pm get_next_vm_diskname:
// vm-, base-, subvol- and basevol- names all count).
func freeDiskIndex(used map[string]bool, sid string, vmid int) int {
	n := 0
	for ; ; n++ {
		taken := false
		for _, p := range []string{"vm", "base", "subvol", "basevol"} {
			taken = taken || used[fmt.Sprintf("%s:%s-%d-disk-%d", sid, p, vmid, n)]
		}
		if !taken {
			return n
		}
	}
}

// canonicalWrite applies the rewrites Proxmox makes to a config write's
// values: NICs (qemu-server's update_vm_api prints every netN through
// parse_net/print_net; pve-container's apply/hotplug of pending net
// through parse_lxc_network/print_lxc_network) and new disks (allocDisks,
// which records them in allocs). Caller holds s.mu.
func (s *Sim) canonicalWrite(g *guest, set, allocs map[string]string) error {
	for k, v := range set {
		if strings.HasPrefix(k, "net") {
			set[k] = s.canonicalNIC(g.kind, v)
		}
	}
	return s.allocDisks(g.kind, g.vmid, g.template(), set, allocs, "")
}

// ---- volume attributes ------------------------------------------------------

// volumeOf reads the node, the volume id and its storage of a request on
// …/storage/{storage}/content/{volume}, with the errors Proxmox gives for
// an unknown node, a volume id that does not parse or name the storage,
// and an unknown storage. Caller holds s.mu.
func (s *Sim) volumeOf(q *req) (*node, string, *storageDef, error) {
	n, err := s.needNode(q)
	if err != nil {
		return nil, "", nil, err
	}
	volid, storeid, err := realVolumeID(q.path("storage"), q.path("volume"))
	if err != nil {
		return nil, "", nil, err
	}
	st := storageByName(storeid)
	if st == nil {
		return nil, "", nil, fail500("storage '%s' does not exist", storeid)
	}
	return n, volid, st, nil
}

// volumeInfo is pve-storage's API2/Storage/Content.pm "info": path, size,
// used and format of a volume that exists (a guest's disk or mount point,
// a downloaded ISO image or appliance template), and the storage layer's
// error for one that does not. check_volume_access first runs the
// plugin's parse_volname, so a name the plugin cannot parse fails with
// its error before volume_size_info looks for the volume.
func (s *Sim) volumeInfo(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, volid, st, err := s.volumeOf(q)
	if err != nil {
		return nil, err
	}
	_, volname, _ := strings.Cut(volid, ":")
	switch st.typ {
	case "lvmthin", "rbd":
		// LvmThinPlugin / RBDPlugin parse_volname.
		re := `^((vm|base)-(\d+)-\S+)$`
		if st.typ == "rbd" {
			re = `^((base-(\d+)-\S+)/)?((base)?(vm)?-(\d+)-\S+)$`
		}
		m := regexp.MustCompile(re).FindStringSubmatch(volname)
		if m == nil {
			return nil, fail500("unable to parse %s volume name '%s'", map[string]string{"lvmthin": "lvm", "rbd": "rbd"}[st.typ], volname)
		}
		name := m[1]
		path := "/dev/pve/" + name // vgname pve, as a default install
		if st.typ == "rbd" {
			name = m[4]
			path = fmt.Sprintf("rbd:%s/%s:conf=/etc/pve/ceph.conf", st.name, name)
		}
		size, ok := s.volumeSize(n.name, st, volid)
		if !ok {
			if st.typ == "rbd" {
				return nil, fail500("rbd error: rbd: error opening image %s: (2) No such file or directory", name)
			}
			// LVMPlugin::volume_size_info: lvs fails, run_command's errmsg.
			return nil, fail500("can't get size of '%s':   Failed to find logical volume \"pve/%s\"", path, name)
		}
		return map[string]any{"path": path, "size": size, "used": 0, "format": "raw"}, nil
	case "zfspool":
		return s.zfsVolumeInfo(n.name, st, volid, volname)
	default: // dir ("local"): downloaded ISO images and templates
		vtype, _, _, err := parseDirVolname(volname) // check_volume_access
		if err != nil {
			return nil, fail500("%s", err)
		}
		if (vtype == "iso" && s.isos[volid]) || (vtype == "vztmpl" && s.templates[volid]) {
			// Plugin.pm volume_size_info: file_size_info with the format
			// parse_volname gives ISOs and templates, "raw", as qemu-img
			// info reports it: virtual-size the file's size, actual-size
			// its allocated blocks (the same: the simulated sizes are
			// whole 4 KiB blocks).
			_, name, _ := strings.Cut(volname, "/")
			size := applianceSize(name)
			return map[string]any{"path": dirPath(volname), "size": size, "used": size, "format": "raw"}, nil
		}
		// Plugin::file_size_info warns "failed to stat" and returns undef.
		return nil, fail500("volume_size_info on '%s' failed - no format", volid)
	}
}

// volumeSize finds a guest volume volid (on a local storage: of a guest on
// node) and returns its size= in bytes. Caller holds s.mu.
func (s *Sim) volumeSize(node string, st *storageDef, volid string) (int64, bool) {
	for vol, opts := range s.guestVolumes(node, st) {
		if vol == volid {
			return optSize(opts, 0), true
		}
	}
	return 0, false
}

// guestVolumes yields the volume id and the drive options of every drive
// and unused volume, current or pending, of the guests whose volumes st
// holds as seen from node (a local storage: the node's guests only), once
// per drive key. Caller holds s.mu.
func (s *Sim) guestVolumes(node string, st *storageDef) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, g := range s.guests {
			if !st.shared && g.node != node {
				continue
			}
			for _, conf := range []map[string]string{g.conf, g.pending} {
				for k, v := range conf {
					if !driveKeyRe.MatchString(k) && !strings.HasPrefix(k, "unused") {
						continue
					}
					vol, opts, _ := strings.Cut(v, ",")
					vol = strings.TrimPrefix(strings.TrimPrefix(vol, "file="), "volume=")
					if s.volFreed(vol) {
						continue
					}
					if !yield(vol, opts) {
						return
					}
				}
			}
		}
	}
}

// optSize is the size= of drive options in bytes, or def without one.
func optSize(opts string, def int64) int64 {
	for _, o := range strings.Split(opts, ",") {
		if sz, ok := strings.CutPrefix(o, "size="); ok {
			return parseSize(sz)
		}
	}
	return def
}

// applianceSize is a downloaded template's file size: stable per name.
func applianceSize(name string) int64 {
	var h int64 = 120 << 20
	for _, c := range name {
		h += int64(c) << 12
	}
	return h
}

// ---- appliance download -----------------------------------------------------

// aplDownload is pve-manager's API2/Nodes.pm apl_download: 400 "no such
// template" for a name not in the appliance index, the storage's errors,
// else a "download" task (id: the template) whose end puts the template
// into the storage's vztmpl content, logged as
// PVE::Tools::download_file_from_url logs.
func (s *Sim) aplDownload(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	// The schema check in serve has refused a missing storage or template.
	name, storeid := q.str("template"), q.str("storage")
	var app map[string]any
	for _, a := range appliances {
		if a["template"] == name {
			app = a
		}
	}
	if app == nil {
		return nil, paramErr1("template", "no such template")
	}
	st := storageByName(storeid)
	if st == nil {
		return nil, fail500("storage '%s' does not exist", storeid)
	}
	if !st.hasContent("vztmpl") {
		return nil, fail500("storage '%s' does not support templates", storeid)
	}
	url := app["location"].(string)
	dest := "/var/lib/vz/template/cache/" + name
	volid := storeid + ":vztmpl/" + name
	t := s.startLoggedTask(n.name, "download", "", 0, q.user, []string{fmt.Sprintf("downloading %s to %s", url, dest)},
		func(print func(string)) ([]string, error) {
			if s.templates[volid] {
				print("calculating checksum of existing file...OK, got correct file already, no need to download")
				return nil, nil
			}
			print("calculating checksum...OK, checksum verified")
			print(fmt.Sprintf("download of '%s' to '%s' finished", url, dest))
			s.downloaded(volid, "vztmpl")
			return nil, nil
		}, nil)
	s.renameTask(t, name)
	return t.upid, nil
}

// renameTask gives a task that is not about a guest its PVE id (the
// appliance of a download) in its UPID. Caller holds s.mu.
func (s *Sim) renameTask(t *task, id string) {
	delete(s.taskIdx, t.upid)
	t.id = id
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", t.node, t.pid, t.pstart, t.start.Unix(), t.typ, t.id, t.user)
	s.taskIdx[t.upid] = t
}

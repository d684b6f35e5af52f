package pvesim

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Volume operations beyond a guest's own config writes: freeing a volume
// through the storage API and moving a disk to another storage.

// volumeRoutes registers the endpoints of this file.
func (s *Sim) volumeRoutes(mux *http.ServeMux) {
	s.handle(mux, "DELETE /nodes/{node}/storage/{storage}/content/{volume...}", s.deleteVolume)
}

// storeIDRe is PVE::JSONSchema's pve-storage-id, as parse_volume_id checks it.
var storeIDRe = regexp.MustCompile(`^[a-z][a-z0-9\-_.]*[a-z0-9]$`)

// realVolumeID is pve-storage's API2/Storage/Content.pm $real_volume_id:
// the volume parameter is a full volume id (whose storage must match the
// path's) or a volume name on the path's storage.
func realVolumeID(storeid, volume string) (string, string, error) {
	sid, _, ok := strings.Cut(volume, ":")
	if !ok {
		if storeid == "" {
			return "", "", paramErr1("volume", "no storage specified - incomplete volume ID")
		}
		return storeid + ":" + volume, storeid, nil
	}
	if !storeIDRe.MatchString(sid) {
		return "", "", paramErr1("volume", "unable to parse volume ID '%s'", volume)
	}
	if storeid != "" && sid != storeid {
		return "", "", paramErr1("volume", "storage ID mismatch (%s != %s)", sid, storeid)
	}
	return volume, sid, nil
}

// volOwner is the owner vmid the plugin's parse_volname gives a volume
// name, 0 for none (an ISO, a template), or the plugin's error for a
// name it cannot parse.
func volOwner(st *storageDef, volname string) (int, error) {
	switch st.typ {
	case "lvmthin":
		m := regexp.MustCompile(`^(vm|base)-(\d+)-\S+$`).FindStringSubmatch(volname)
		if m == nil {
			return 0, fmt.Errorf("unable to parse lvm volume name '%s'", volname)
		}
		n, _ := strconv.Atoi(m[2])
		return n, nil
	case "rbd":
		m := regexp.MustCompile(`^((base-(\d+)-\S+)/)?((base)?(vm)?-(\d+)-\S+)$`).FindStringSubmatch(volname)
		if m == nil {
			return 0, fmt.Errorf("unable to parse rbd volume name '%s'", volname)
		}
		n, _ := strconv.Atoi(m[7])
		return n, nil
	default: // Plugin.pm parse_volname, the dir plugin's content types
		switch {
		case regexp.MustCompile(`^(iso|vztmpl|snippets|import)/[^/]+$`).MatchString(volname):
			return 0, nil
		case regexp.MustCompile(`^backup/vzdump-(openvz|lxc|qemu)-(\d+)-`).MatchString(volname):
			m := regexp.MustCompile(`-(\d+)-`).FindStringSubmatch(volname)
			n, _ := strconv.Atoi(m[1])
			return n, nil
		case regexp.MustCompile(`^backup/[^/]+$`).MatchString(volname):
			return 0, nil
		}
		if m := regexp.MustCompile(`^(\d+)/[^/\s]+\.(raw|qcow2|vmdk|subvol)$`).FindStringSubmatch(volname); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n, nil
		}
		return 0, fmt.Errorf("unable to parse directory volume name '%s'", volname)
	}
}

// volFreed reports whether volid was freed through the storage API while a
// guest's config still names it: Proxmox frees the volume and leaves the
// config alone, so the name dangles until the config drops it. The mark
// holds only for the guest that named it (a guest destroyed and created
// again under its vmid starts afresh). Caller holds s.mu.
func (s *Sim) volFreed(volid string) bool {
	g, ok := s.freedVols[volid]
	return ok && s.guests[g.vmid] == g
}

// deleteVolume is pve-storage's API2/Storage/Content.pm "delete": an
// "imgdel" task (id "<owner>@<storage>", or the storage alone for a
// volume no guest owns) whose worker is PVE::Storage::vdisk_free. It does
// not look at guest configs: a volume a guest still uses is freed all the
// same. vdisk_free refuses a base volume linked clones still use; a
// volume that is not there is a no-op on LVM thin (LvmThinPlugin
// free_image), a warning on a directory (Plugin.pm free_image) and an
// error on RBD ("rbd snap ls" fails).
func (s *Sim) deleteVolume(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	volid, storeid, err := realVolumeID(q.path("storage"), q.path("volume"))
	if err != nil {
		return nil, err
	}
	st := storageByName(storeid)
	if st == nil {
		return nil, fail500("storage '%s' does not exist", storeid)
	}
	_, volname, _ := strings.Cut(volid, ":")
	owner, err := volOwner(st, volname) // PVE::Storage::path
	if err != nil {
		return nil, fail500("%s", err)
	}
	id := storeid
	if owner != 0 {
		id = fmt.Sprintf("%d@%s", owner, storeid)
	}
	node := n.name
	t := s.startLoggedTask(node, "imgdel", "", 0, q.user, nil, func(print func(string)) ([]string, error) {
		var warnings []string
		if err := s.freeVolume(node, st, volid, &warnings); err != nil {
			return nil, err
		}
		print(fmt.Sprintf("Removed volume '%s'", volid))
		return warnings, nil
	}, nil)
	s.renameTask(t, id)
	return t.upid, nil
}

// freeVolume is PVE::Storage::vdisk_free of volid on st as node sees it.
// Caller holds s.mu.
func (s *Sim) freeVolume(node string, st *storageDef, volid string, warnings *[]string) error {
	_, volname, _ := strings.Cut(volid, ":")
	if st.typ == "rbd" && strings.HasPrefix(volname, "base-") && !strings.Contains(volname, "/") {
		// volume_is_base_and_used: RBDPlugin's list_images names a linked
		// clone base-…/vm-…. LVM thin's parse_volname gives no base name,
		// so there the check never fires.
		for vol := range s.guestVolumes(node, st) {
			if strings.HasPrefix(vol, volid+"/") {
				return taskFail("base volume '%s' is still in use by linked clones", volname)
			}
		}
	}
	if s.templates[volid] {
		delete(s.templates, volid)
		return nil
	}
	for vol := range s.guestVolumes(node, st) {
		if vol != volid {
			continue
		}
		var holder *guest
		for _, g := range s.guests {
			if (st.shared || g.node == node) && namesVolume(g, volid) {
				holder = g
				break
			}
		}
		if holder != nil {
			if s.freedVols == nil {
				s.freedVols = map[string]*guest{}
			}
			s.freedVols[volid] = holder
		}
		return nil
	}
	switch st.typ {
	case "lvmthin":
		return nil // lvremove only runs for an LV that exists
	case "rbd":
		name := volname
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		return taskFail("rbd error: rbd: error opening image %s: (2) No such file or directory", name)
	default:
		*warnings = append(*warnings, fmt.Sprintf("disk image '%s' does not exist", dirPath(volname)))
		return nil
	}
}

// namesVolume reports whether g's config (current or pending) names vol.
func namesVolume(g *guest, vol string) bool {
	for _, conf := range []map[string]string{g.conf, g.pending} {
		for k, v := range conf {
			if (driveKeyRe.MatchString(k) || strings.HasPrefix(k, "unused")) && volid(v) == vol {
				return true
			}
		}
	}
	return false
}

// dirPath is the path of a volume name on the "local" directory storage
// (Plugin.pm filesystem_path under /var/lib/vz).
func dirPath(volname string) string {
	sub, rest, _ := strings.Cut(volname, "/")
	switch sub {
	case "iso":
		return "/var/lib/vz/template/iso/" + rest
	case "vztmpl":
		return "/var/lib/vz/template/cache/" + rest
	case "backup":
		return "/var/lib/vz/dump/" + rest
	case "snippets":
		return "/var/lib/vz/snippets/" + rest
	case "import":
		return "/var/lib/vz/import/" + rest
	}
	return "/var/lib/vz/images/" + volname
}

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
	s.handle(mux, "POST /nodes/{node}/qemu/{vmid}/move_disk", s.guestHandler(QEMU, s.moveDisk))
	s.handle(mux, "PUT /nodes/{node}/qemu/{vmid}/unlink", s.guestHandler(QEMU, s.unlink))
	s.handle(mux, "POST /nodes/{node}/storage/{storage}/download-url", s.downloadURL)
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
	case "zfspool":
		_, owner, _, err := zfsVolume(volname)
		return owner, err
	default:
		_, owner, _, err := parseDirVolname(volname)
		return owner, err
	}
}

// The volume names of a directory storage, as pve-storage's
// src/PVE/Storage/Plugin.pm parse_volname reads them, with the file name
// extensions of src/PVE/Storage.pm ($ISO_EXT_RE_0, $VZTMPL_EXT_RE_1,
// $BACKUP_EXT_RE_2 over KNOWN_COMPRESSION_FORMATS, $IMPORT_EXT_RE_1,
// $OVA_CONTENT_RE_1 over $SAFE_CHAR_WITH_WHITESPACE_CLASS_RE).
var (
	dirLinkedRe    = regexp.MustCompile(`^(\d+)/(\S+)/(\d+)/(\S+)$`)
	dirImageRe     = regexp.MustCompile(`^(\d+)/(\S+)$`)
	dirISORe       = regexp.MustCompile(`^iso/[^/]+\.(?i:iso|img)$`)
	dirVztmplRe    = regexp.MustCompile(`^vztmpl/[^/]+\.(?i:tar|tar\.(?:gz|xz|zst|bz2))$`)
	dirBackupRe    = regexp.MustCompile(`^backup/([^/]+\.(?:tgz|(?:tar|vma)(?:\.(?:gz|lzo|zst|bz2))?))$`)
	dirVzdumpRe    = regexp.MustCompile(`^vzdump-(?:openvz|lxc|qemu)-(\d+)-.+`)
	dirSnippetsRe  = regexp.MustCompile(`^snippets/[^/]+$`)
	dirImportOVARe = regexp.MustCompile(`^import/[ a-zA-Z0-9\-.+=_]+\.ova/[ a-zA-Z0-9\-.+=_]+\.(qcow2|raw|vmdk)$`)
	dirImportRe    = regexp.MustCompile(`^import/[ a-zA-Z0-9\-.+=_]+\.(ova|ovf|qcow2|raw|vmdk)$`)
	// parse_name_dir: an image file name.
	dirOwnedNameRe = regexp.MustCompile(`^(?:vm-|base-|subvol-)\d+-[^/\s]+\.(raw|qcow2|vmdk|subvol)$`)
	dirSnapNameRe  = regexp.MustCompile(`^snap-.*\.qcow2$`)
	dirAnyNameRe   = regexp.MustCompile(`^(?:base-)?[^/\s]+\.(raw|qcow2|vmdk|subvol)$`)
)

// parseDirVolname is Plugin.pm parse_volname on a directory storage: the
// volume's content type, its owner vmid (0 for none) and its format, or
// the error it dies with. An ISO needs an .iso/.img name, a template a
// .tar[.gz|.xz|.zst|.bz2] one; "iso/doesnt-exist" is "unable to parse
// directory volume name".
func parseDirVolname(volname string) (vtype string, owner int, format string, err error) {
	if m := dirLinkedRe.FindStringSubmatch(volname); m != nil {
		if _, err := parseNameDir(m[2]); err != nil {
			return "", 0, "", err
		}
		format, err := parseNameDir(m[4])
		if err != nil {
			return "", 0, "", err
		}
		n, _ := strconv.Atoi(m[3])
		return "images", n, format, nil
	}
	if m := dirImageRe.FindStringSubmatch(volname); m != nil {
		format, err := parseNameDir(m[2])
		if err != nil {
			return "", 0, "", err
		}
		n, _ := strconv.Atoi(m[1])
		return "images", n, format, nil
	}
	switch {
	case dirISORe.MatchString(volname):
		return "iso", 0, "raw", nil
	case dirVztmplRe.MatchString(volname):
		return "vztmpl", 0, "raw", nil
	case dirBackupRe.MatchString(volname):
		fn := dirBackupRe.FindStringSubmatch(volname)[1]
		if m := dirVzdumpRe.FindStringSubmatch(fn); m != nil {
			n, _ := strconv.Atoi(m[1])
			return "backup", n, "raw", nil
		}
		return "backup", 0, "raw", nil
	case dirSnippetsRe.MatchString(volname):
		return "snippets", 0, "raw", nil
	}
	if m := dirImportOVARe.FindStringSubmatch(volname); m != nil {
		return "import", 0, "ova+" + m[1], nil
	}
	if m := dirImportRe.FindStringSubmatch(volname); m != nil {
		return "import", 0, m[1], nil
	}
	return "", 0, "", fmt.Errorf("unable to parse directory volume name '%s'", volname)
}

// parseNameDir is Plugin.pm parse_name_dir: the format of an image file
// name.
func parseNameDir(name string) (string, error) {
	if m := dirOwnedNameRe.FindStringSubmatch(name); m != nil {
		return m[1], nil
	}
	if dirSnapNameRe.MatchString(name) {
		//lint:ignore ST1005 Proxmox's own message
		return "", fmt.Errorf("'%s' is a snapshot filename, not a volume!", name)
	}
	if m := dirAnyNameRe.FindStringSubmatch(name); m != nil {
		return m[1], nil
	}
	return "", fmt.Errorf("unable to parse volume filename '%s'", name)
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
// volume no guest owns) whose worker is PVE::Storage::vdisk_free, under
// the storage's lock (a timeout fails the task). It does not look at
// guest configs: a volume a guest still uses is freed all the
// same. vdisk_free refuses a base volume linked clones still use; a
// volume that is not there is a no-op on LVM thin (LvmThinPlugin
// free_image) and ZFS (ZFSPoolPlugin zfs_delete_zvol), a warning on a
// directory (Plugin.pm free_image) and an error on RBD ("rbd snap ls"
// fails).
func (s *Sim) deleteVolume(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, volid, st, err := s.volumeOf(q)
	if err != nil {
		return nil, err
	}
	storeid, volname, _ := strings.Cut(volid, ":")
	owner, err := volOwner(st, volname) // PVE::Storage::path
	if err != nil {
		return nil, fail500("%s", err)
	}
	id := storeid
	if owner != 0 {
		id = fmt.Sprintf("%d@%s", owner, storeid)
	}
	node := n.name
	// vdisk_free runs under the storage's lock (storagelock.go).
	r := s.lockRun(node)
	lockErr := r.take(storeid)
	d := r.taskDelay("imgdel", lockErr)
	t := s.startTaskIn(d, node, "imgdel", "", 0, q.user, nil, func(print func(string)) ([]string, error) {
		if lockErr != nil {
			return nil, lockErr
		}
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
	base := strings.HasPrefix(volname, "base-") || st.typ == "zfspool" && strings.HasPrefix(volname, "basevol-")
	if (st.typ == "rbd" || st.typ == "zfspool") && base && !strings.Contains(volname, "/") {
		// volume_is_base_and_used: RBDPlugin's and ZFSPoolPlugin's
		// list_images name a linked clone base-…/vm-… (basevol-…/subvol-…
		// on ZFS). LVM thin's parse_volname gives no base name, so there
		// the check never fires.
		for vol := range s.guestVolumes(node, st) {
			if strings.HasPrefix(vol, volid+"/") {
				return taskFail("base volume '%s' is still in use by linked clones", volname)
			}
		}
	}
	if s.templates[volid] || s.isos[volid] {
		delete(s.templates, volid)
		delete(s.isos, volid)
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
	case "zfspool":
		return nil // zfs_delete_zvol: "dataset does not exist" is no error
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

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
// volume no guest owns) whose worker is PVE::Storage::vdisk_free. It does
// not look at guest configs: a volume a guest still uses is freed all the
// same. vdisk_free refuses a base volume linked clones still use; a
// volume that is not there is a no-op on LVM thin (LvmThinPlugin
// free_image), a warning on a directory (Plugin.pm free_image) and an
// error on RBD ("rbd snap ls" fails).
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
	t := s.startLoggedTask(g.node, "qmmove", g.kind, g.vmid, q.user, nil, func(print func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		snapshotted, err := s.checkMove(g, r)
		if err != nil {
			return nil, taskError(err.Error())
		}
		return s.doMove(g, r, snapshotted, print), nil
	}, nil)
	return t.upid, nil
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

// ---- download-url -------------------------------------------------------------

var (
	isoExtRe    = regexp.MustCompile(`(?i)[^/]+\.(?:iso|img)$`)                    // $ISO_EXT_RE_0
	vztmplExtRe = regexp.MustCompile(`(?i)[^/]+\.(?:tar|tar\.(?:gz|xz|zst|bz2))$`) // $VZTMPL_EXT_RE_1
	unsafeRe    = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)                            // normalize_content_filename
	urlRe       = regexp.MustCompile(`^https?://.*$`)                              // the url parameter's pattern
)

// downloadURL is pve-storage's API2/Storage/Status.pm download_url: the
// storage must be file based and hold the content type, the filename
// (normalised: directories dropped, unsafe characters replaced by '_') must
// carry the type's extension, then a "download" task (id the filename)
// whose end puts the file into the storage's content. "import" content is
// refused by the simulated "local", which does not hold it.
func (s *Sim) downloadURL(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	errs := map[string]string{}
	for _, k := range []string{"url", "content", "filename"} {
		if !q.has(k) {
			errs[k] = "property is missing and it is not optional"
		}
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	if !urlRe.MatchString(q.str("url")) {
		return nil, paramErr1("url", "value does not match the regex pattern")
	}
	content := q.str("content")
	if err := enumParam("content", content, []string{"iso", "vztmpl", "import"}); err != nil {
		return nil, err
	}
	storeid := q.path("storage")
	st := storageByName(storeid)
	if st == nil {
		return nil, fail500("storage '%s' does not exist", storeid)
	}
	if st.typ != "dir" {
		return nil, fail500("can't upload to storage type '%s', not a file based storage!", st.typ)
	}
	if !st.hasContent(content) {
		return nil, fail500("storage '%s' is not configured for content-type '%s'", storeid, content)
	}
	filename := strings.TrimRight(q.str("filename"), "\n")
	if i := strings.LastIndexAny(filename, `/\`); i >= 0 {
		filename = filename[i+1:]
	}
	filename = unsafeRe.ReplaceAllString(filename, "_")
	re := isoExtRe
	if content == "vztmpl" {
		re = vztmplExtRe
	}
	if !re.MatchString(filename) {
		return nil, paramErr1("filename", "wrong file extension")
	}
	url := q.str("url")
	volid := storeid + ":" + content + "/" + filename
	dest := dirPath(content + "/" + filename)
	checksum := q.has("checksum")
	t := s.startLoggedTask(n.name, "download", "", 0, q.user, []string{fmt.Sprintf("downloading %s to %s", url, dest)},
		func(print func(string)) ([]string, error) {
			if checksum {
				print("calculating checksum...OK, checksum verified")
			}
			print(fmt.Sprintf("download of '%s' to '%s' finished", url, dest))
			if content == "vztmpl" {
				if s.templates == nil {
					s.templates = map[string]bool{}
				}
				s.templates[volid] = true
			} else {
				if s.isos == nil {
					s.isos = map[string]bool{}
				}
				s.isos[volid] = true
			}
			return nil, nil
		}, nil)
	s.renameTask(t, filename)
	return t.upid, nil
}

package pvesim

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Storage content: pve-storage's API2/Storage/Content.pm "index" over
// PVE::Storage::volume_list and the plugins' list_volumes/list_images.

// contentTypes are pve-storage's content types in the order volume_list
// visits them (PVE::Storage::volume_list's @ctypes).
var contentTypes = []string{"rootdir", "images", "vztmpl", "iso", "backup", "snippets", "import"}

// validContent is Plugin.pm's verify_content: the dir plugin's content
// types ("none" included) and "import".
func validContent(ct string) bool {
	switch ct {
	case "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import", "none":
		return true
	}
	return false
}

// imageOwnerRe is the owner a guest image's volume name carries: the vmid of
// its last vm-/base- component (list_images' m/^(vm|base)-(\d+)-/), or
// subvol-/basevol- on ZFS (ZFSPoolPlugin zfs_parse_zvol_list).
var imageOwnerRe = regexp.MustCompile(`(?:^|/)(?:vm|base|subvol|basevol)-(\d+)-[^/]*$`)

// ciDefaultSize is the size of a cloud-init volume whose drive has no
// size=: qemu-server's API2/Qemu.pm allocates $ci_size, 4 MiB.
const ciDefaultSize = 4 << 20

// listContent is GET /nodes/{node}/storage/{storage}/content.
func (s *Sim) listContent(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range q.params {
		switch k {
		case "content", "vmid":
		default:
			return nil, paramErr1(k, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	if ct := q.str("content"); q.has("content") && !validContent(ct) {
		return nil, paramErr1("content", "invalid content type '%s'", ct)
	}
	vmid := -1
	if q.has("vmid") {
		v, err := q.intParam("vmid", 0)
		if err != nil {
			return nil, err
		}
		if v < 100 {
			return nil, paramErr1("vmid", "value must have a minimum value of 100")
		}
		if v > 999999999 {
			return nil, paramErr1("vmid", "value must have a maximum value of 999999999")
		}
		vmid = v
	}
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	st := storageByName(q.path("storage"))
	if st == nil {
		// PVE::Storage::storage_config.
		return nil, fail500("storage '%s' does not exist", q.path("storage"))
	}
	cts := contentTypes
	if q.has("content") {
		cts = []string{q.str("content")}
	}
	out := []map[string]any{}
	for _, ct := range cts {
		if !st.hasContent(ct) {
			continue
		}
		switch ct {
		case "images", "rootdir":
			out = append(out, s.listImages(n.name, st, vmid, ct)...)
		case "iso":
			if vmid >= 0 {
				continue
			}
			for volid := range s.isos {
				if sid, name, _ := strings.Cut(volid, ":"); sid == st.name {
					out = append(out, map[string]any{"volid": volid, "format": "iso", "content": "iso",
						"size": applianceSize(strings.TrimPrefix(name, "iso/"))})
				}
			}
		case "vztmpl":
			if vmid >= 0 {
				continue // list_volumes lists templates only without vmid
			}
			for volid := range s.templates {
				sid, name, _ := strings.Cut(volid, ":")
				if sid != st.name {
					continue
				}
				format := "tar"
				if i := strings.LastIndex(name, ".tar."); i >= 0 {
					format = "t" + name[i+len(".tar."):]
				}
				out = append(out, map[string]any{"volid": volid, "format": format, "content": "vztmpl",
					"size": applianceSize(strings.TrimPrefix(name, "vztmpl/"))})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.ToLower(out[i]["volid"].(string)) < strings.ToLower(out[j]["volid"].(string))
	})
	return out, nil
}

// listImages lists the guest volumes on st that node sees (on a local
// storage, those of guests on node): LvmThinPlugin/RBDPlugin/ZFSPoolPlugin
// list_images (format raw, a ZFS filesystem's subvol), with the content
// Plugin.pm's list_volumes gives each (rootdir for a container's, images
// for the others'), keeping those of type ct. An RBD or ZFS linked clone
// is listed as base-…/vm-… (basevol-…/subvol-…), as those plugins name
// it; an LVM thin volume by its LV name. Caller holds s.mu.
func (s *Sim) listImages(node string, st *storageDef, vmid int, ct string) []map[string]any {
	seen := map[string]bool{}
	var out []map[string]any
	for vol, opts := range s.guestVolumes(node, st) {
		sid, name, ok := strings.Cut(vol, ":")
		if !ok || sid != st.name {
			continue
		}
		if st.typ == "lvmthin" {
			if i := strings.LastIndexByte(name, '/'); i >= 0 {
				name = name[i+1:]
			}
		}
		m := imageOwnerRe.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		owner, _ := strconv.Atoi(m[1])
		volid := sid + ":" + name
		if seen[volid] || (vmid >= 0 && owner != vmid) {
			continue
		}
		seen[volid] = true
		content := "images"
		if og := s.guests[owner]; og != nil && og.kind == LXC {
			content = "rootdir"
		}
		if content != ct {
			continue
		}
		var size int64
		if strings.Contains(name, "-cloudinit") {
			size = ciDefaultSize
		}
		format := "raw"
		if st.typ == "zfspool" {
			_, _, format, _ = zfsVolume(name) // a filesystem lists as "subvol"
		}
		out = append(out, map[string]any{"volid": volid, "format": format, "vmid": owner, "content": content, "size": optSize(opts, size)})
	}
	return out
}

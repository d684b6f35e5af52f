package pvesim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ---- storages ---------------------------------------------------------------

// storageDef is one entry of storage.cfg. Every node sees every storage;
// shared ones (Ceph RBD here) hold the same volumes on all nodes, which is
// what lets a guest be cloned to another node.
type storageDef struct {
	name, typ, content string
	shared             bool
	total, used        int64
}

// storages are the simulated storage.cfg: the two of a fresh install, a
// shared Ceph pool, and a local ZFS pool for guests (zfspool, named as
// the installer names its own on a ZFS root: pool rpool/data, sparse),
// so that guests can go to two local and one shared storage.
var storages = []storageDef{
	{name: "local", typ: "dir", content: "backup,iso,snippets,vztmpl", total: 100 << 30, used: 10 << 30},
	{name: "local-lvm", typ: "lvmthin", content: "images,rootdir", total: 800 << 30, used: 120 << 30},
	{name: "ceph", typ: "rbd", content: "images,rootdir", shared: true, total: 4 << 40, used: 600 << 30},
	{name: "local-zfs", typ: "zfspool", content: "images,rootdir", total: 1800 << 30, used: 200 << 30},
}

// zfsPool is local-zfs's dataset (storage.cfg "pool"); its subvols are
// mounted under "/" + zfsPool (ZFSPoolPlugin path: mountpoint defaults
// to "/$pool").
const zfsPool = "rpool/data"

// volPrefix is how a new volume of a guest of kind is named on st: a
// container's root disk or mount point on a zfspool is a ZFS filesystem,
// "subvol-" ("basevol-" for a template's), as pve-container's alloc_disk
// allocates format "subvol" there and ZFSPoolPlugin names it
// (find_free_diskname; create_base renames subvol- to basevol-); any
// other volume is "vm-" ("base-" for a template's).
func volPrefix(st *storageDef, kind Kind, template bool) string {
	switch {
	case st != nil && st.typ == "zfspool" && kind == LXC && template:
		return "basevol"
	case st != nil && st.typ == "zfspool" && kind == LXC:
		return "subvol"
	case template:
		return "base"
	}
	return "vm"
}

func storageByName(name string) *storageDef {
	for i := range storages {
		if storages[i].name == name {
			return &storages[i]
		}
	}
	return nil
}

// hasContent reports whether the storage holds content of type c (images,
// rootdir, vztmpl, …).
func (st storageDef) hasContent(c string) bool {
	for _, x := range strings.Split(st.content, ",") {
		if x == c {
			return true
		}
	}
	return false
}

func (st storageDef) json() map[string]any {
	return map[string]any{"storage": st.name, "type": st.typ, "content": st.content, "enabled": 1, "active": 1,
		"shared": boolInt(st.shared), "total": st.total, "used": st.used, "avail": st.total - st.used,
		"used_fraction": float64(st.used) / float64(st.total)}
}

func (s *Sim) listStorage(q *req) (any, error) {
	if _, err := s.needNode(q); err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, st := range storages {
		out = append(out, st.json())
	}
	return out, nil
}

func (s *Sim) storageStatus(q *req) (any, error) {
	if _, err := s.needNode(q); err != nil {
		return nil, err
	}
	st := storageByName(q.path("storage"))
	if st == nil {
		return nil, paramErr1("storage", "No such storage.")
	}
	return st.json(), nil
}

// volumeStorage is the storage id of a disk or mount point option's volume
// ("local-lvm:vm-100-disk-0,size=32G" → local-lvm); ok is false for
// volumes on no storage ("none", "cdrom", a device path, a bind mount).
func volumeStorage(v string) (string, bool) {
	vol, _, _ := strings.Cut(v, ",")
	if i := strings.IndexByte(vol, '='); i >= 0 && !strings.Contains(vol[:i], ":") {
		vol = vol[i+1:] // "file=local:iso/x.iso"
	}
	sid, rest, ok := strings.Cut(vol, ":")
	if !ok || sid == "" || rest == "" || strings.HasPrefix(vol, "/") {
		return "", false
	}
	return sid, true
}

// storageLockTimeout is the error of an allocation that waited in vain for
// the storage's lock: PVE::Storage::vdisk_alloc runs under
// cluster_lock_storage, a pmxcfs lock for shared storages
// (PVE::Cluster::cfs_lock_storage) and a local flock for the others
// (PVE::Tools::lock_file, /var/lock/pve-manager/pve-storage-<id>).
func storageLockTimeout(st *storageDef) string {
	if st.shared {
		return fmt.Sprintf("cfs-lock 'storage-%s' error: got lock request timeout", st.name)
	}
	return fmt.Sprintf("can't lock file '/var/lock/pve-manager/pve-storage-%s' - got timeout", st.name)
}

// takeCloneSlots reserves the target storages of a running full clone; the
// returned release gives them back (once, however often it is called).
// Caller holds s.mu.
func (s *Sim) takeCloneSlots(ids []string) (release func()) {
	for _, id := range ids {
		s.cloneSlots[id]++
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		for _, id := range ids {
			if s.cloneSlots[id]--; s.cloneSlots[id] <= 0 {
				delete(s.cloneSlots, id)
			}
		}
	}
}

// contendedStorage returns the first of ids on which the StorageCloneLimit
// fault makes a new full clone time out, or nil. Caller holds s.mu.
func (s *Sim) contendedStorage(ids []string) *storageDef {
	limit := s.faults.StorageCloneLimit
	if limit <= 0 {
		return nil
	}
	for _, id := range ids {
		if s.cloneSlots[id] >= limit {
			return storageByName(id)
		}
	}
	return nil
}

// zfsVolRe is ZFSPoolPlugin parse_volname: an optional base (a linked
// clone's origin) and the dataset's name, whose prefix gives the format
// (subvol-/basevol-: a filesystem, "subvol"; vm-/base-: a zvol, "raw")
// and whether it is a base.
var zfsVolRe = regexp.MustCompile(`^(((base|basevol)-(\d+)-\S+)/)?((base|basevol|vm|subvol)-(\d+)-\S+)$`)

// zfsVolume parses a zfspool volume name: the dataset, its owner and its
// format, or parse_volname's error.
func zfsVolume(volname string) (name string, owner int, format string, err error) {
	m := zfsVolRe.FindStringSubmatch(volname)
	if m == nil {
		return "", 0, "", fmt.Errorf("unable to parse zfs volume name '%s'", volname)
	}
	owner, _ = strconv.Atoi(m[7])
	format = "raw"
	if m[6] == "subvol" || m[6] == "basevol" {
		format = "subvol"
	}
	return m[5], owner, format, nil
}

// zfsVolumeInfo is Content.pm "info" on a zfspool: ZFSPoolPlugin path
// (a zvol's device node, a filesystem's mount point under "/$pool") and
// volume_size_info (the zvol's volsize or the filesystem's refquota, in
// the format parse_volname gives; "zfs get" on a dataset that is not
// there fails). Caller holds s.mu.
func (s *Sim) zfsVolumeInfo(node string, st *storageDef, volid, volname string) (any, error) {
	name, _, format, err := zfsVolume(volname)
	if err != nil {
		return nil, fail500("%s", err)
	}
	path := "/dev/zvol/" + zfsPool + "/" + name
	if format == "subvol" {
		path = "/" + zfsPool + "/" + name
	}
	size, ok := s.volumeSize(node, st, volid)
	if !ok {
		return nil, fail500("zfs error: cannot open '%s/%s': dataset does not exist", zfsPool, name)
	}
	return map[string]any{"path": path, "size": size, "used": 0, "format": format}, nil
}

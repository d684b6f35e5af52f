package pvesim

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"
	"time"
)

// ---- snapshots (…/{vmid}/snapshot) ------------------------------------------
//
// qemu-server's and pve-container's snapshot API over pve-guest-common's
// AbstractConfig: snapshot_create (prepare: template, lock, name checks,
// lock "snapshot", a [snapname] section with snapstate "prepare"; commit:
// parent set, lock dropped), snapshot_delete (lock "snapshot-delete",
// parent references relinked) and snapshot_rollback (guest stopped, lock
// "rollback", the section's config applied). Every check runs in the
// worker, so a refusal is a failed task, not an HTTP error.

// snapshot is one [snapname] section of a guest's config.
type snapshot struct {
	conf        map[string]string // the config at snapshot time, parent included
	description string
	snaptime    int64
	vmstate     string // QEMU: the RAM state volume, "" for none
	snapstate   string // "prepare" or "delete" while a task works on it
}

// snapshotOnlyKeys are what __snapshot_copy_config, clone_vm and rollback
// do not carry over from one config to another.
var snapshotOnlyKeys = map[string]bool{"parent": true, "snaptime": true, "vmstate": true,
	"snapstate": true, "runningmachine": true, "runningcpu": true}

// configIDRe is pve-common's $CONFIGID_RE (format pve-configid), which
// pve-snapshot-name uses with maxLength 40.
var configIDRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]+$`)

func snapNameErr(name string) error {
	switch {
	case !configIDRe.MatchString(name):
		return paramErr1("snapname", "invalid format - invalid configuration ID '%s'", name)
	case len(name) > 40:
		return paramErr1("snapname", "value may only be 40 characters long")
	}
	return nil
}

// SnapshotInfo is a snapshot as a test sees it.
type SnapshotInfo struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	SnapTime    time.Time         `json:"snaptime"`
	Parent      string            `json:"parent,omitempty"`
	VMState     string            `json:"vmstate,omitempty"`
	State       string            `json:"snapstate,omitempty"` // prepare / delete while a task runs
	Config      map[string]string `json:"config"`
}

// Snapshots lists a guest's snapshots by creation time (nil if the guest
// does not exist).
func (s *Sim) Snapshots(vmid int) []SnapshotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil {
		return nil
	}
	out := []SnapshotInfo{}
	for _, name := range g.snapOrder() {
		sn := g.snaps[name]
		out = append(out, SnapshotInfo{Name: name, Description: sn.description, SnapTime: time.Unix(sn.snaptime, 0),
			Parent: sn.conf["parent"], VMState: sn.vmstate, State: sn.snapstate, Config: maps.Clone(sn.conf)})
	}
	return out
}

// snapOrder is the snapshots by snaptime, then by their place in the
// parent chain, then name. Proxmox lists them in Perl hash order (no
// order at all); this one is stable.
func (g *guest) snapOrder() []string {
	depth := func(name string) int {
		d := 0
		for p := g.snaps[name].conf["parent"]; p != "" && g.snaps[p] != nil && d < len(g.snaps); p = g.snaps[p].conf["parent"] {
			d++
		}
		return d
	}
	names := sortedKeys(g.snaps)
	sort.SliceStable(names, func(i, j int) bool {
		a, b := g.snaps[names[i]], g.snaps[names[j]]
		if a.snaptime != b.snaptime {
			return a.snaptime < b.snaptime
		}
		return depth(names[i]) < depth(names[j])
	})
	return names
}

// appendSections appends the [snapname] sections and [special:cloudinit]
// to the serialised config the digest is taken of.
func (g *guest) appendSections(b []byte) []byte {
	for _, name := range sortedKeys(g.snaps) {
		sn := g.snaps[name]
		b = fmt.Appendf(b, "\n[%s]\n", name)
		if sn.description != "" {
			b = append(append(append(b, '#'), sn.description...), '\n')
		}
		for _, k := range sortedKeys(sn.conf) {
			b = appendLine(b, k, sn.conf[k])
		}
		b = fmt.Appendf(b, "snaptime: %d\nsnapstate: %s\nvmstate: %s\n", sn.snaptime, sn.snapstate, sn.vmstate)
	}
	if len(g.ci.recorded) > 0 && g.cloudInitDrive() != "" {
		b = append(b, "\n[special:cloudinit]\n"...)
		for _, k := range sortedKeys(g.ci.recorded) {
			b = appendLine(b, k, g.ci.recorded[k])
		}
	}
	return b
}

func snapTaskType(kind Kind, verb string) string {
	return map[Kind]string{QEMU: "qm", LXC: "vz"}[kind] + verb
}

// listSnapshots is GET …/snapshot: every section plus "current".
func (s *Sim) listSnapshots(q *req, g *guest) (any, error) {
	out := []map[string]any{}
	for _, name := range g.snapOrder() {
		sn := g.snaps[name]
		e := map[string]any{"name": name, "snaptime": sn.snaptime, "description": ""}
		if sn.description != "" {
			e["description"] = s.typed(g.kind, "description", sn.description)
		}
		if g.kind == QEMU {
			e["vmstate"] = boolInt(sn.vmstate != "")
		}
		if p := sn.conf["parent"]; p != "" {
			e["parent"] = p
		}
		if sn.snapstate != "" {
			e["snapstate"] = sn.snapstate
		}
		out = append(out, e)
	}
	cur := map[string]any{"name": "current", "digest": g.digest, "running": boolInt(g.running()),
		"description": "You are here!"}
	if p := g.conf["parent"]; p != "" {
		cur["parent"] = p
	}
	return append(out, cur), nil
}

// vmstateStorage is where a RAM snapshot goes (QemuConfig's
// find_vmstate_storage): vmstatestorage, else the first shared storage
// of the disks, else the first storage of the disks, else local.
func (g *guest) vmstateStorage() string {
	if v := g.conf["vmstatestorage"]; v != "" {
		return v
	}
	var first string
	for _, k := range g.volumeKeys(g.conf) {
		sid, _ := volumeStorage(g.conf[k])
		if storageByName(sid).isShared() {
			return sid
		}
		if first == "" {
			first = sid
		}
	}
	if first == "" {
		return "local"
	}
	return first
}

// volumeKeys are the keys of conf holding volumes that snapshots cover:
// disks and mount points, not CD-ROMs (cloud-init drives included).
func (g *guest) volumeKeys(conf map[string]string) []string {
	var keys []string
	for k, v := range conf {
		if !driveKeyRe.MatchString(k) || strings.Contains(","+v+",", ",media=cdrom,") {
			continue
		}
		if _, ok := volumeStorage(v); ok {
			keys = append(keys, k)
		}
	}
	driveOrder(keys)
	return keys
}

// volid is the volume of a drive or mount point option string.
func volid(v string) string {
	first, _, _ := strings.Cut(v, ",")
	first = strings.TrimPrefix(strings.TrimPrefix(first, "file="), "volume=")
	return first
}

// createSnapshot is POST …/snapshot.
func (s *Sim) createSnapshot(q *req, g *guest) (any, error) {
	if !q.has("snapname") {
		return nil, paramErr1("snapname", "property is missing and it is not optional")
	}
	name := q.str("snapname")
	if err := snapNameErr(name); err != nil {
		return nil, err
	}
	if g.kind == LXC && q.has("vmstate") {
		return nil, paramErr1("vmstate", "property is not defined in schema and the schema does not allow additional properties")
	}
	withState, err := q.boolParam("vmstate")
	if err != nil {
		return nil, err
	}
	if name == "current" {
		return nil, fail500("unable to use snapshot name 'current' (reserved name)")
	}
	if g.kind == QEMU && strings.ToLower(name) == "pending" {
		return nil, fail500("unable to use snapshot name 'pending' (reserved name)")
	}
	if g.kind == LXC && name == "vzdump" {
		return nil, fail500("unable to use snapshot name 'vzdump' (reserved name)")
	}
	typ := snapTaskType(g.kind, "snapshot")
	// __snapshot_prepare's checks, in its order.
	var refuse error
	switch {
	case g.template():
		refuse = taskFail("you can't take a snapshot if it's a template")
	case g.lock() != "":
		refuse = taskError(lockedErr(g))
	case g.snaps[name] != nil:
		refuse = taskFail("snapshot name '%s' already used", name)
	}
	if refuse != nil {
		t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) { return nil, refuse }, nil)
		return t.upid, nil
	}
	var warnings []string
	for other, sn := range g.snaps {
		if sn.conf["parent"] == name { // cannot happen unless edited by hand
			warnings = append(warnings, fmt.Sprintf("deleting parent '%s' reference from '%s' to avoid bogus snapshot cycle.", name, other))
			delete(sn.conf, "parent")
		}
	}
	sn := &snapshot{conf: map[string]string{}, snaptime: time.Now().Unix(), snapstate: "prepare", description: q.str("description")}
	for k, v := range g.conf {
		if k == "lock" || k == "description" || strings.HasPrefix(k, "unused") ||
			k == "snaptime" || k == "vmstate" || k == "snapstate" {
			continue
		}
		sn.conf[k] = v
	}
	var first []string
	if withState && g.kind == QEMU && g.running() {
		st := g.vmstateStorage()
		sn.vmstate = fmt.Sprintf("%s:vm-%d-state-%s", st, g.vmid, name)
		// __snapshot_save_vmstate, as for a hibernation (pve9.go).
		sn.conf["runningmachine"] = s.runningMachine(g.conf)
		sn.conf["runningcpu"] = "kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+lahf_lm,+sep"
		if v := s.netsHostMTU(g.conf); v != "" && s.pve9() {
			sn.conf["running-nets-host-mtu"] = v
		}
		first = append(first, fmt.Sprintf("saving VM state and RAM using storage '%s'", st))
	}
	if g.kind == QEMU {
		for _, k := range g.volumeKeys(sn.conf) {
			first = append(first, fmt.Sprintf("snapshotting 'drive-%s' (%s)", k, volid(sn.conf[k])))
		}
	}
	if g.snaps == nil {
		g.snaps = map[string]*snapshot{}
	}
	g.snaps[name] = sn
	g.conf["lock"] = "snapshot"
	g.touch()
	// An interrupted snapshot_create cleans up after itself (snapshot_delete
	// with force, which also drops the lock).
	undo := func() {
		if g.snaps[name] == sn {
			delete(g.snaps, name)
		}
		if g.lock() == "snapshot" {
			delete(g.conf, "lock")
		}
		g.touch()
	}
	t := s.startLoggedTask(g.node, typ, g.kind, g.vmid, q.user, first, func(func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		// __snapshot_commit
		if g.lock() != "snapshot" {
			return nil, taskFail("missing snapshot lock")
		}
		if g.snaps[name] != sn {
			return nil, taskFail("snapshot '%s' does not exist", name)
		}
		sn.snapstate = ""
		delete(g.conf, "lock")
		g.conf["parent"] = name
		g.touch()
		return warnings, nil
	}, undo)
	return t.upid, nil
}

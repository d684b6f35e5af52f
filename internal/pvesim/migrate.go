package pvesim

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// ---- migration (POST …/{vmid}/migrate) -----------------------------------------
//
// qemu-server's migrate_vm / PVE::QemuMigrate and pve-container's
// migrate_vm / PVE::LXC::Migrate, within one cluster. The API call checks
// early (target is the local node: 400; unknown node; QEMU: lock, running
// without online; LXC: running without online or restart) and forks a
// qmigrate/vzmigrate task. Its worker sets lock "migrate" in phase 1 (set
// here as the task starts) and moves the config to the target when it ends;
// a failure in phase 1 clears the lock and ends "migration aborted". An
// HA-managed guest gets an "hamigrate" task that only requests the move
// from the HA stack.

// migrateLog is a line of AbstractMigrate::log: time stamp, then the text;
// errors prefixed "ERROR: ".
func migrateLog(err bool, format string, a ...any) string {
	msg := fmt.Sprintf(format, a...)
	if err {
		msg = "ERROR: " + msg
	}
	return time.Now().Format("2006-01-02 15:04:05") + " " + msg
}

// storageMap is a parsed pve-targetstorage idmap: "sid" for all, or
// "src:dst,…" pairs with an optional bare default; "1" keeps every id.
type storageMap struct {
	def     string
	entries map[string]string
}

func (m *storageMap) target(sid string) string {
	if m == nil {
		return sid
	}
	if t, ok := m.entries[sid]; ok {
		return t
	}
	if m.def != "" {
		return m.def
	}
	return sid
}

func parseStorageMap(param, v string) (*storageMap, error) {
	m := &storageMap{entries: map[string]string{}}
	if v == "1" {
		return m, nil
	}
	for _, e := range splitList(v) {
		src, dst, pair := strings.Cut(e, ":")
		if !pair {
			if m.def != "" {
				return nil, paramErr1(param, "failed to parse storage map: default target specified more than once")
			}
			m.def = e
			continue
		}
		m.entries[src] = dst
	}
	var targets []string
	if m.def != "" {
		targets = append(targets, m.def)
	}
	for _, d := range m.entries {
		targets = append(targets, d)
	}
	sort.Strings(targets)
	for _, t := range targets {
		st := storageByName(t)
		if st == nil {
			return nil, fail500("storage '%s' does not exist", t)
		}
		if !st.hasContent("images") {
			return nil, fail500("storage '%s' does not support vm images", t)
		}
	}
	return m, nil
}

// localVolumes lists a guest's disk/mount point options on non-shared
// storage, by key.
func localVolumes(g *guest) []string {
	var out []string
	for _, k := range sortedKeys(g.conf) {
		if !driveKeyRe.MatchString(k) {
			continue
		}
		v := g.conf[k]
		if strings.Contains(v, "media=cdrom") {
			continue
		}
		sid, ok := volumeStorage(v)
		if !ok {
			continue
		}
		if st := storageByName(sid); st != nil && !st.shared {
			out = append(out, k)
		}
	}
	return out
}

func volumeID(v string) string {
	vol, _, _ := strings.Cut(v, ",")
	return vol
}

// moveVolumes rewrites the local volumes' storage ids by the map.
func moveVolumes(g *guest, keys []string, m *storageMap) {
	for _, k := range keys {
		v := g.conf[k]
		sid, _ := volumeStorage(v)
		if t := m.target(sid); t != sid {
			g.conf[k] = t + strings.TrimPrefix(v, sid)
		}
	}
}

// migrateCommon is what both kinds check before loading the config: the
// target parameter. Caller holds s.mu.
func (s *Sim) migrateTarget(q *req, g *guest) (*node, error) {
	target := q.str("target")
	if target == "" {
		return nil, paramErr1("target", "property is missing and it is not optional")
	}
	if target == g.node {
		return nil, paramErr1("target", "target is local node.")
	}
	n := s.nodeByName(target)
	if n == nil {
		return nil, fail500("no such cluster node '%s'", target)
	}
	return n, nil
}

func (s *Sim) migrate(q *req, g *guest) (any, error) {
	target, err := s.migrateTarget(q, g)
	if err != nil {
		return nil, err
	}
	online, err := q.boolParam("online")
	if err != nil {
		return nil, err
	}
	if g.kind == LXC {
		return s.migrateCT(q, g, target, online)
	}
	withLocal, err := q.boolParam("with-local-disks")
	if err != nil {
		return nil, err
	}
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	if g.running() && !online {
		return nil, fail500("can't migrate running VM without --online")
	}
	var smap *storageMap
	if ts := q.str("targetstorage"); ts != "" {
		if smap, err = parseStorageMap("targetstorage", ts); err != nil {
			return nil, err
		}
	}
	if r := s.haOf(g); r != nil {
		return s.haMigrateTask(q, g, r, target.name).upid, nil
	}
	return s.startVMMigration(g, target, withLocal, smap, q.user).upid, nil
}

// startVMMigration forks the qmigrate worker. Caller holds s.mu.
func (s *Sim) startVMMigration(g *guest, target *node, withLocal bool, smap *storageMap, user string) *task {
	running := g.running()
	first := []string{migrateLog(false, "starting migration of VM %d to node '%s' (%s)", g.vmid, target.name, target.ip)}
	local := localVolumes(g)
	var fail string
	for _, k := range local {
		vol := volumeID(g.conf[k])
		if strings.Contains(vol, "/") { // a linked clone's volume: base/own
			base, _, _ := strings.Cut(strings.SplitN(vol, ":", 2)[1], "/")
			fail = fmt.Sprintf("Problem found while scanning volumes - can't migrate '%s' as it's a clone of '%s'", vol, base)
			break
		}
		if running && !withLocal {
			first = append(first, migrateLog(false, "found local disk '%s' (attached)", vol),
				migrateLog(false, "can't migrate local disk '%s': can't live migrate attached local disks without with-local-disks option", vol))
			fail = "Problem found while scanning volumes - can't migrate VM - check log"
		}
	}
	if fail == "" {
		for _, k := range local {
			first = append(first, migrateLog(false, "found local disk '%s' (attached)", volumeID(g.conf[k])))
		}
		g.conf["lock"] = "migrate"
		g.touch()
	}
	unlock := func() {
		if s.guests[g.vmid] == g && g.conf["lock"] == "migrate" {
			delete(g.conf, "lock")
			g.touch()
		}
	}
	return s.startLoggedTask(g.node, "qmigrate", g.kind, g.vmid, user, first, func(print func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if fail != "" {
			print(migrateLog(true, "%s", fail))
			print(migrateLog(true, "migration aborted (duration 00:00:01): %s", fail))
			return nil, taskFail("migration aborted")
		}
		if running {
			print(migrateLog(false, "starting online/live migration"))
			print(migrateLog(false, "migration status: completed"))
		}
		moveVolumes(g, local, smap)
		g.node = target.name
		s.haGuestMoved(g)
		unlock()
		print(migrateLog(false, "migration finished successfully (duration 00:00:01)"))
		return nil, nil
	}, unlock)
}

// migrateCT is pve-container's migrate_vm: only "running without online or
// restart" is refused up front; the lock and live migration are checked by
// the worker's prepare, which in restart mode shuts the container down
// first; the container starts again on the target when the task ends (on
// the source if the migration is stopped).
func (s *Sim) migrateCT(q *req, g *guest, target *node, online bool) (any, error) {
	restart, err := q.boolParam("restart")
	if err != nil {
		return nil, err
	}
	timeout, err := q.intParam("timeout", 180)
	if err != nil {
		return nil, err
	}
	if timeout < 0 {
		return nil, paramErr1("timeout", "value must have a minimum value of 0")
	}
	if g.running() && !online && !restart {
		return nil, fail500("can't migrate running container without --online or --restart")
	}
	var smap *storageMap
	if ts := q.str("target-storage"); ts != "" {
		if smap, err = parseStorageMap("target-storage", ts); err != nil {
			return nil, err
		}
	}
	if r := s.haOf(g); r != nil {
		return s.haMigrateTask(q, g, r, target.name).upid, nil
	}
	return s.startCTMigration(g, target, online, restart, smap, q.user).upid, nil
}

// startCTMigration forks the vzmigrate worker. Caller holds s.mu.
func (s *Sim) startCTMigration(g *guest, target *node, online, restart bool, smap *storageMap, user string) *task {
	wasRunning := g.running()
	var first []string
	var fail string
	switch {
	case g.lock() != "":
		fail = lockedErr(g)
	case wasRunning && online:
		fail = "lxc live migration is currently not implemented"
	case wasRunning && !restart:
		fail = "running container can only be migrated in restart mode"
	case wasRunning && s.noACPI[g.vmid]:
		first = append(first, migrateLog(false, "shutdown CT %d", g.vmid))
		fail = "container did not stop"
	}
	local := localVolumes(g)
	if fail == "" {
		if wasRunning {
			first = append(first, migrateLog(false, "shutdown CT %d", g.vmid))
			g.status, g.paused, g.pid = "stopped", false, 0
		}
		first = append(first, migrateLog(false, "starting migration of CT %d to node '%s' (%s)", g.vmid, target.name, target.ip))
		for _, k := range local {
			first = append(first, migrateLog(false, "found local volume '%s' (in current VM config)", volumeID(g.conf[k])))
		}
		g.conf["lock"] = "migrate"
		g.touch()
	}
	startCT := func() {
		g.applyPending()
		g.status, g.startedAt = "running", time.Now()
		s.pidSeq++
		g.pid = s.pidSeq
	}
	abort := func() {
		if s.guests[g.vmid] != g || g.conf["lock"] != "migrate" {
			return
		}
		delete(g.conf, "lock")
		g.touch()
		if wasRunning { // final_cleanup: start it on the source again
			startCT()
		}
	}
	return s.startLoggedTask(g.node, "vzmigrate", g.kind, g.vmid, user, first, func(print func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if fail != "" {
			print(migrateLog(true, "migration aborted (duration 00:00:01): %s", fail))
			return nil, taskFail("migration aborted")
		}
		moveVolumes(g, local, smap)
		g.node = target.name
		s.haGuestMoved(g)
		delete(g.conf, "lock")
		g.touch()
		if wasRunning {
			print(migrateLog(false, "start container on target node"))
			startCT()
		}
		print(migrateLog(false, "migration finished successfully (duration 00:00:01)"))
		return nil, nil
	}, abort)
}

// migratePrecondition is GET /nodes/{n}/qemu/{vmid}/migrate
// (migrate_vm_precondition): running, the other nodes (every storage is on
// every node, so all are allowed), the local disks, no local resources.
func (s *Sim) migratePrecondition(q *req, g *guest) (any, error) {
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	// qemu-server 9 (API2/Qemu.pm migrate_vm_precondition): an HA
	// resource's dependent-ha-resources, and a node with blocking HA
	// resources (get_resource_motion_info) is not allowed.
	allowed, notAllowed, dependent := s.migrateTargets(g)
	disks := []map[string]any{}
	for _, k := range localVolumes(g) {
		size, _ := optionSize(g.conf[k])
		disks = append(disks, map[string]any{"volid": volumeID(g.conf[k]), "size": size, "drivename": k,
			"is_unused": boolInt(strings.HasPrefix(k, "unused")), "cdrom": 0, "is_vmstate": 0,
			"is_tpmstate": boolInt(k == "tpmstate0"), "replicate": 1, "shared": 0})
	}
	res := map[string]any{
		"running": boolInt(g.running()), "allowed_nodes": allowed, "not_allowed_nodes": notAllowed,
		"local_disks": disks, "local_resources": []string{}, "mapped-resources": []string{},
		"mapped-resource-info": map[string]any{}, "has-dbus-vmstate": 1,
	}
	if dependent != nil {
		res["dependent-ha-resources"] = dependent
	}
	return res, nil
}

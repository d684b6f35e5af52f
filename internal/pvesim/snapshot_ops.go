package pvesim

import (
	"fmt"
	"strings"
)

// Deleting, rolling back and reading snapshots (see snapshot.go).

// pathSnapshot resolves {snapname}, verified as the parameter is.
func pathSnapshot(q *req) (string, error) {
	name := q.path("snapname")
	return name, snapNameErr(name)
}

// deleteSnapshot is DELETE …/snapshot/{snapname}: a qmdelsnapshot /
// vzdelsnapshot task doing AbstractConfig::snapshot_delete.
func (s *Sim) deleteSnapshot(q *req, g *guest) (any, error) {
	name, err := pathSnapshot(q)
	if err != nil {
		return nil, err
	}
	if _, err := q.boolParam("force"); err != nil {
		return nil, err
	}
	typ := snapTaskType(g.kind, "delsnapshot")
	sn := g.snaps[name]
	var refuse error
	switch {
	case sn == nil:
		refuse = taskFail("snapshot '%s' does not exist", name)
	case g.lock() != "": // set_lock 'snapshot-delete'
		refuse = taskError(lockedErr(g))
	case g.template():
		refuse = taskFail("you can't delete a snapshot if vm is a template")
	}
	if refuse != nil {
		t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) { return nil, refuse }, nil)
		return t.upid, nil
	}
	g.conf["lock"] = "snapshot-delete"
	sn.snapstate = "delete"
	g.touch()
	undo := func() {
		if g.lock() == "snapshot-delete" {
			delete(g.conf, "lock")
		}
		sn.snapstate = ""
		g.touch()
	}
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if g.lock() != "snapshot-delete" {
			return nil, taskFail("encountered invalid lock, expected 'snapshot-delete'")
		}
		if g.snaps[name] != sn {
			return nil, taskFail("snapshot '%s' does not exist", name)
		}
		// Whatever had this snapshot as parent now has its parent.
		relink := func(conf map[string]string) {
			if conf["parent"] != name {
				return
			}
			if p := sn.conf["parent"]; p != "" {
				conf["parent"] = p
			} else {
				delete(conf, "parent")
			}
		}
		relink(g.conf)
		for other, o := range g.snaps {
			if other != name {
				relink(o.conf)
			}
		}
		delete(g.snaps, name)
		delete(g.conf, "lock")
		g.touch()
		return nil, nil
	}, undo)
	return t.upid, nil
}

// rollbackSnapshot is POST …/snapshot/{snapname}/rollback: a qmrollback /
// vzrollback task doing AbstractConfig::snapshot_rollback (then starting
// the guest with "start", and a QEMU snapshot with RAM always).
func (s *Sim) rollbackSnapshot(q *req, g *guest) (any, error) {
	name, err := pathSnapshot(q)
	if err != nil {
		return nil, err
	}
	start, err := q.boolParam("start")
	if err != nil {
		return nil, err
	}
	typ := snapTaskType(g.kind, "rollback")
	sn := g.snaps[name]
	var refuse error
	switch {
	case g.template():
		refuse = taskFail("you can't rollback if vm is a template")
	case sn == nil:
		refuse = taskFail("snapshot '%s' does not exist", name)
	case sn.snapstate != "":
		refuse = taskFail("unable to rollback to incomplete snapshot (snapstate = %s)", sn.snapstate)
	case g.lock() != "":
		refuse = taskError(lockedErr(g))
	}
	if refuse != nil {
		t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) { return nil, refuse }, nil)
		return t.upid, nil
	}
	// prepare: __snapshot_rollback_vm_stop, then the lock.
	g.status, g.paused, g.pid = "stopped", false, 0
	_, hadMachine := g.conf["machine"]
	g.conf["lock"] = "rollback"
	g.touch()
	undo := func() {
		if g.lock() == "rollback" {
			delete(g.conf, "lock")
			g.touch()
		}
	}
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if g.lock() != "rollback" {
			return nil, taskFail("got wrong lock")
		}
		if g.snaps[name] != sn {
			return nil, taskFail("snapshot '%s' does not exist", name)
		}
		g.conf = s.rolledBack(g, sn, name, hadMachine)
		// The new config has no [PENDING] or [special:cloudinit] section.
		g.pending, g.pendingDel = map[string]string{}, map[string]bool{}
		g.ci.recorded = nil
		g.touch()
		if sn.vmstate != "" && g.kind == QEMU {
			s.powerOn(g, false)
		}
		if start && !g.running() {
			s.powerOn(g, true)
		}
		return nil, nil
	}, undo)
	return t.upid, nil
}

// rolledBack is the config snapshot_rollback writes: the snapshot's keys,
// the current description and unused volumes, volumes the snapshot does
// not know added as unused, parent set; for QEMU the machine handling and
// new vmgenid of __snapshot_rollback_hook.
func (s *Sim) rolledBack(g *guest, sn *snapshot, name string, hadMachine bool) map[string]string {
	known := map[string]bool{}
	for _, k := range g.volumeKeys(sn.conf) {
		known[volid(sn.conf[k])] = true
	}
	next := map[string]string{}
	for k, v := range g.conf {
		if strings.HasPrefix(k, "unused") || k == "description" {
			next[k] = v
		}
	}
	for _, k := range g.volumeKeys(g.conf) {
		if v := volid(g.conf[k]); !known[v] {
			addUnused(next, v)
		}
	}
	for k, v := range sn.conf {
		if k == "snaptime" || k == "vmstate" || k == "snapstate" || k == "lock" || strings.HasPrefix(k, "unused") {
			continue
		}
		next[k] = v
	}
	if g.kind == QEMU {
		if _, ok := next["runningmachine"]; ok {
			delete(next, "runningmachine")
			delete(next, "runningcpu")
		} else if sn.vmstate != "" && !hadMachine {
			delete(next, "machine")
		}
		if _, ok := next["vmgenid"]; ok {
			next["vmgenid"] = s.uuid()
		}
		delete(next, "running-nets-host-mtu")
	}
	next["parent"] = name
	return next
}

// addUnused is AbstractConfig::add_unused_volume: the lowest free unusedN,
// no duplicates.
func addUnused(conf map[string]string, vol string) {
	for i := 0; i < 256; i++ {
		k := fmt.Sprintf("unused%d", i)
		if conf[k] == vol {
			return
		}
	}
	for i := 0; i < 256; i++ {
		k := fmt.Sprintf("unused%d", i)
		if _, taken := conf[k]; !taken {
			conf[k] = vol
			return
		}
	}
}

// snapshotConfig is GET …/snapshot/{snapname}/config: the section as
// stored.
func (s *Sim) snapshotConfig(q *req, g *guest) (any, error) {
	name, err := pathSnapshot(q)
	if err != nil {
		return nil, err
	}
	sn := g.snaps[name]
	if sn == nil {
		return nil, fail500("snapshot '%s' does not exist", name)
	}
	out := map[string]any{"snaptime": sn.snaptime}
	for k, v := range sn.conf {
		out[k] = s.typed(g.kind, k, v)
	}
	if sn.description != "" {
		out["description"] = s.typed(g.kind, "description", sn.description)
	}
	if sn.vmstate != "" {
		out["vmstate"] = sn.vmstate
	}
	if sn.snapstate != "" {
		out["snapstate"] = sn.snapstate
	}
	return out, nil
}

// updateSnapshotConfig is PUT …/snapshot/{snapname}/config: only the
// description, nothing without it.
func (s *Sim) updateSnapshotConfig(q *req, g *guest) (any, error) {
	name, err := pathSnapshot(q)
	if err != nil {
		return nil, err
	}
	if !q.has("description") {
		return nil, nil
	}
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	sn := g.snaps[name]
	if sn == nil {
		return nil, fail500("snapshot '%s' does not exist", name)
	}
	sn.description = q.str("description")
	g.touch()
	return nil, nil
}

// snapshotCmdIndex is GET …/snapshot/{snapname}: the directory index,
// answered whether or not the snapshot exists.
func (s *Sim) snapshotCmdIndex(q *req, g *guest) (any, error) {
	if _, err := pathSnapshot(q); err != nil {
		return nil, err
	}
	return []map[string]string{{"cmd": "rollback"}, {"cmd": "config"}}, nil
}

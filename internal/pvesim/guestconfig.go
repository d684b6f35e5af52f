package pvesim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ---- config reads and writes, pending changes -----------------------------

func (s *Sim) getConfig(q *req, g *guest) (any, error) {
	current, err := q.boolParam("current")
	if err != nil {
		return nil, err
	}
	conf := g.conf
	if !current {
		conf = g.effective()
	}
	out := make(map[string]any, len(conf)+1)
	for k, v := range conf {
		out[k] = s.typed(g.kind, k, v)
	}
	out["digest"] = g.digest
	return out, nil
}

// pendingItem is an entry of GET …/pending: the applied value, the pending
// one, a pending deletion (1, or 2 when forced).
type pendingItem struct {
	Key     string `json:"key"`
	Value   any    `json:"value,omitzero"`
	Pending any    `json:"pending,omitzero"`
	Delete  int    `json:"delete,omitzero"`
}

// getPending lists every key of the config and of its pending section.
// Like Proxmox (PVE::GuestHelpers::config_with_pending_array, whose printer
// skips it), the list includes the config's digest as a key.
func (s *Sim) getPending(q *req, g *guest) (any, error) {
	// Every key once, sorted: built without a set, as every digest check
	// of an executor reads this.
	keys := make([]string, 0, len(g.conf)+len(g.pending)+len(g.pendingDel)+1)
	for k := range g.conf {
		keys = append(keys, k)
	}
	for k := range g.pending {
		keys = append(keys, k)
	}
	for k := range g.pendingDel {
		keys = append(keys, k)
	}
	keys = append(keys, "digest")
	slices.Sort(keys)
	keys = slices.Compact(keys)
	out := make([]pendingItem, 0, len(keys))
	for _, k := range keys {
		e := pendingItem{Key: k}
		if k == "digest" {
			e.Value = g.digest
		}
		if v, ok := g.conf[k]; ok {
			e.Value = s.typed(g.kind, k, v)
		}
		if v, ok := g.pending[k]; ok {
			e.Pending = s.typed(g.kind, k, v)
		}
		if force, ok := g.pendingDel[k]; ok {
			e.Delete = 1
			if force {
				e.Delete = 2 // a force-delete request
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// ---- config writes -----------------------------------------------------------

// configMeta are request parameters that are not config keys.
var configMeta = map[string]bool{"digest": true, "delete": true, "revert": true, "skiplock": true,
	"background_delay": true, "node": true, "vmid": true, "force": true}

type configChange struct {
	set    map[string]string
	del    []string
	revert []string
	// force is qemu-server's "force" of a delete: a deleted disk's volume
	// is freed (try_deallocate_drive) instead of kept as unusedN.
	force bool
	// allocs are the new volumes the write allocates: drive key → storage.
	allocs map[string]string
}

// parseConfigChange checks digest, lock and parameters up front, as
// Proxmox does before forking the worker.
func (s *Sim) parseConfigChange(q *req, g *guest) (*configChange, error) {
	if d := q.str("digest"); d != "" && d != g.digest {
		if g.kind == LXC {
			return nil, fail500("detected modified configuration - file changed by other user? Try again.")
		}
		return nil, fail500("checksum mismatch (file change by other user?)")
	}
	skiplock, err := q.boolParam("skiplock")
	if err != nil {
		return nil, err
	}
	ch := &configChange{set: map[string]string{}, allocs: map[string]string{}}
	errs := map[string]string{}
	if g.kind == QEMU {
		resolveCdromAlias(q.params)
		if ch.force, err = q.boolParam("force"); err != nil {
			return nil, err
		}
	}
	for k, v := range q.params {
		if !configKey(g.kind, k) {
			continue
		}
		if k == "description" && v == "" {
			ch.del = append(ch.del, k)
			continue
		}
		cv, msg := canonical(g.kind, k, v)
		if msg != "" {
			errs[k] = msg
			continue
		}
		ch.set[k] = cv
	}
	for _, k := range splitList(q.str("delete")) {
		if g.kind == QEMU && k == "cdrom" {
			k = "ide2" // update_vm_api's alias
		}
		if _, ok := specFor(g.kind, k); !ok && !(g.kind == QEMU && k == "vmstate") {
			if g.kind == QEMU { // update_vm_api: option_exists
				errs["delete"] = fmt.Sprintf("unknown option '%s'", k)
			} else {
				errs["delete"] = fmt.Sprintf("invalid format - unknown property '%s'", k)
			}
			continue
		}
		if _, both := ch.set[k]; both {
			errs[k] = fmt.Sprintf("unable to delete '%s' - is also in set", k)
			continue
		}
		ch.del = append(ch.del, k)
	}
	// As qemu-server's update_vm_api: a reverted key may be neither set
	// nor deleted by the same request.
	for _, k := range splitList(q.str("revert")) {
		switch _, set := ch.set[k]; {
		case !knownKey(g.kind, k):
			errs["revert"] = fmt.Sprintf("unknown option '%s'", k)
		case set:
			errs["delete"] = fmt.Sprintf("you can't use '-%s' and -revert %s' at the same time", k, k)
		case slices.Contains(ch.del, k):
			errs["revert"] = fmt.Sprintf("you can't use '-delete %s' and -revert %s' at the same time", k, k)
		default:
			ch.revert = append(ch.revert, k)
		}
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	if len(ch.set) == 0 && len(ch.del) == 0 && len(ch.revert) == 0 {
		return nil, fail500("no options specified")
	}
	if l := g.lock(); l != "" && !skiplock && !discardsHibernation(g, ch) {
		if _, setsLock := ch.set["lock"]; !setsLock {
			return nil, fail500("%s", lockedErr(g))
		}
	}
	ch.del = vmStateDeletes(g, ch.del)
	if err := s.canonicalWrite(g, ch.set, ch.allocs); err != nil {
		return nil, fail500("%v", err)
	}
	return ch, nil
}

func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
}

// apply writes a change: immediately for stopped guests and hotpluggable
// keys, into [PENDING] otherwise. It returns PVE's warnings.
func (g *guest) apply(ch *configChange) []string {
	var warnings []string
	genCI := false
	for _, k := range ch.revert {
		delete(g.pending, k)
		delete(g.pendingDel, k)
	}
	for _, k := range sortedKeys(ch.set) {
		v := ch.set[k]
		if g.running() && !hotplugSet(g, k, v) {
			g.pending[k] = v
			delete(g.pendingDel, k)
			continue
		}
		old, had := g.conf[k]
		if g.running() {
			g.ciRecord(k, old, had, v, true)
		}
		if had && volid(old) != volid(v) {
			g.detachDrive(k, old)
		}
		g.conf[k] = v
		delete(g.pending, k)
		delete(g.pendingDel, k)
		if ciDriveRe.MatchString(volid(v)) && driveKeyRe.MatchString(k) {
			genCI = true // a new cloud-init drive is generated at once
		}
	}
	for _, k := range ch.del {
		_, inConf := g.conf[k]
		_, inPending := g.pending[k]
		if !inConf && !inPending {
			warnings = append(warnings, fmt.Sprintf("cannot delete '%s' - not set in current configuration!", k))
			continue
		}
		delete(g.pending, k)
		// update_vm_api frees an unusedN at once, running or not.
		if g.running() && !hotpluggable(g, k) && inConf && !strings.HasPrefix(k, "unused") {
			g.pendingDel[k] = ch.force // add_to_pending_delete
			continue
		}
		if g.running() && inConf {
			g.ciRecord(k, g.conf[k], true, "", false)
		}
		if inConf && !ch.force {
			g.detachDrive(k, g.conf[k])
		}
		delete(g.conf, k)
	}
	g.cleanupPending()
	g.touch()
	// vmconfig_hotplug_pending regenerates the drive when the hotplug
	// features include cloudinit and something changed.
	if genCI || g.running() && len(g.ci.recorded) > 0 && hotplugFeatures(g)["cloudinit"] {
		g.ciGenerate()
	}
	return warnings
}

// cleanupPending drops pending values equal to the applied ones and
// pending deletions of keys that are not set, as every Proxmox config
// write does (PVE::AbstractConfig::cleanup_pending): writing back the
// applied value of a key leaves nothing pending.
func (g *guest) cleanupPending() {
	for k, v := range g.pending {
		if cur, ok := g.conf[k]; ok && cur == v {
			delete(g.pending, k)
		}
	}
	for k := range g.pendingDel {
		if _, ok := g.conf[k]; !ok {
			delete(g.pendingDel, k)
		}
	}
}

func knownKey(kind Kind, k string) bool {
	_, ok := specFor(kind, k)
	return ok
}

// putConfig is the synchronous update (QEMU and LXC): null on success.
// qemu-server's runs the qmconfig worker inside the call (update_vm_api
// with sync), so it answers once that worker's time
// (Faults.TaskLatencyFor("qmconfig")) has passed, and the change takes
// effect then; pve-container has no config task, and its update is
// immediate here. Either waits first for the storage locks of the
// volumes it frees and allocates (configlock.go).
func (s *Sim) putConfig(q *req, g *guest) (any, error) {
	ch, err := s.parseConfigChange(q, g)
	if err != nil {
		return nil, err
	}
	if s.roll(s.faults.FailRate) {
		return nil, fail500("%s", s.failMessage(g.kind, g.vmid))
	}
	c := s.configLocks(g, ch)
	d := c.run.elapsed() // pve-container has no config task
	if g.kind == QEMU {
		d = c.run.taskDelay("qmconfig", c.err)
	}
	apply := func() (any, error) {
		if _, err := s.applyWrite(g, ch, c); err != nil {
			if _, ok := err.(*apiError); ok {
				return nil, err
			}
			return nil, fail500("%s", err)
		}
		return nil, nil
	}
	if d > 0 {
		return inlineWork{d: d, then: func() (any, error) {
			if err := s.gone(g); err != nil {
				return nil, fail500("%s", err)
			}
			return apply()
		}}, nil
	}
	return apply()
}

// postConfig is QEMU's asynchronous update: a qmconfig task, or null when
// background_delay is given and the task finished within it.
func (s *Sim) postConfig(q *req, g *guest) (any, error) {
	ch, err := s.parseConfigChange(q, g)
	if err != nil {
		return nil, err
	}
	delay, err := q.intParam("background_delay", 0)
	if err != nil {
		return nil, err
	}
	if delay < 0 || delay > 30 {
		return nil, paramErr1("background_delay", "value must have a minimum value of 1 and a maximum value of 30")
	}
	c := s.configLocks(g, ch)
	d := c.run.taskDelay("qmconfig", c.err)
	t := s.startTaskIn(d, g.node, "qmconfig", g.kind, g.vmid, q.user, nil, func(func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		return s.applyWrite(g, ch, c)
	}, nil)
	if delay == 0 {
		return t.upid, nil
	}
	return awaitTask{t: t, delay: time.Duration(delay) * time.Second, then: func(finished bool) (any, error) {
		if !finished {
			return t.upid, nil
		}
		if t.exit == "OK" || strings.HasPrefix(t.exit, "WARNINGS") {
			return nil, nil
		}
		return nil, fail500("failed to update VM %d: %s", g.vmid, t.exit)
	}}, nil
}

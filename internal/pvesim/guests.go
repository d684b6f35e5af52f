package pvesim

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type guestFunc func(q *req, g *guest) (any, error)

// awaitTask asks the handler wrapper to wait (without the lock) for a task
// for up to delay, then call then (with the lock): QEMU's background_delay.
type awaitTask struct {
	t     *task
	delay time.Duration
	then  func(finished bool) (any, error)
}

// kindHandler resolves the node for per-kind collection endpoints.
func (s *Sim) kindHandler(kind Kind, fn func(q *req, kind Kind, n *node) (any, error)) apiFunc {
	return func(q *req) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		n, err := s.needNode(q)
		if err != nil {
			return nil, err
		}
		return fn(q, kind, n)
	}
}

// guestHandler resolves {node}/{kind}/{vmid} to a guest, as Proxmox does: a
// guest on another node, or of the other kind, "does not exist" here.
func (s *Sim) guestHandler(kind Kind, fn guestFunc) apiFunc {
	return func(q *req) (any, error) {
		s.mu.Lock()
		res, err := s.resolveGuest(q, kind, fn)
		s.mu.Unlock()
		if aw, ok := res.(awaitTask); ok && err == nil {
			finished := false
			timer := time.NewTimer(aw.delay)
			select {
			case <-aw.t.done:
				finished = true
			case <-timer.C:
			case <-q.r.Context().Done():
			}
			timer.Stop()
			s.mu.Lock()
			defer s.mu.Unlock()
			return aw.then(finished)
		}
		return res, err
	}
}

func (s *Sim) resolveGuest(q *req, kind Kind, fn guestFunc) (any, error) {
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	vmid, err := strconv.Atoi(q.path("vmid"))
	if err != nil || vmid < 100 || vmid > 999999999 {
		return nil, paramErr1("vmid", "type check ('integer') failed - got '%s'", q.path("vmid"))
	}
	g := s.guests[vmid]
	if g == nil || g.kind != kind || g.node != n.name {
		return nil, fail500("Configuration file '%s' does not exist", confPath(kind, n.name, vmid))
	}
	return fn(q, g)
}

// gone is the error a task reports when its guest vanished meanwhile.
func (s *Sim) gone(g *guest) error {
	if s.guests[g.vmid] != g {
		return taskFail("Configuration file '%s' does not exist", confPath(g.kind, g.node, g.vmid))
	}
	return nil
}

func lockedErr(g *guest) string {
	return fmt.Sprintf("%s is locked (%s)", g.typeWord(), g.lock())
}

// ---- reads ------------------------------------------------------------------

func (s *Sim) listGuests(q *req, kind Kind, n *node) (any, error) {
	ids := []int{}
	for id, g := range s.guests {
		if g.kind == kind && g.node == n.name {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.statusJSON(s.guests[id], true))
	}
	return out, nil
}

// statusJSON is status/current, or a list entry (list == true).
func (s *Sim) statusJSON(g *guest, list bool) map[string]any {
	maxmem := g.bcast.maxmem
	m := map[string]any{
		"vmid": g.vmid, "name": g.bcast.name, "status": g.status, "cpus": g.bcast.maxcpu, "maxmem": maxmem,
		"maxdisk": g.disk, "disk": 0, "cpu": 0, "mem": 0, "netin": 0, "netout": 0, "diskread": 0,
		"diskwrite": 0, "uptime": 0,
	}
	if g.kind == LXC {
		m["type"] = "lxc"
		m["maxswap"] = atoiDef(g.conf["swap"], 512) << 20
	}
	if g.running() {
		m["uptime"] = int64(time.Since(g.startedAt).Seconds())
		m["pid"] = g.pid
		m["mem"] = maxmem / 4
	}
	if l := g.lock(); l != "" {
		m["lock"] = l
	}
	if t := g.conf["tags"]; t != "" {
		m["tags"] = t
	}
	if g.template() {
		m["template"] = 1
	}
	if !list {
		m["ha"] = map[string]any{"managed": 0}
		if g.kind == QEMU {
			qmp := g.status
			if g.running() && g.paused {
				qmp = "paused"
			} else if g.lock() == "suspended" {
				qmp = "stopped"
			}
			m["qmpstatus"] = qmp
			if g.running() {
				m["running-machine"] = "pc-i440fx-9.0+pve0"
				m["running-qemu"] = "9.0.2"
			}
		}
	}
	return m
}

func (s *Sim) statusCurrent(q *req, g *guest) (any, error) { return s.statusJSON(g, false), nil }

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
// one, a pending deletion (1).
type pendingItem struct {
	Key     string `json:"key"`
	Value   any    `json:"value,omitempty"`
	Pending any    `json:"pending,omitempty"`
	Delete  int    `json:"delete,omitempty"`
}

// getPending lists every key of the config and of its pending section.
// Like Proxmox (PVE::GuestHelpers::config_with_pending_array, whose printer
// skips it), the list includes the config's digest as a key.
func (s *Sim) getPending(q *req, g *guest) (any, error) {
	keys := map[string]bool{}
	for k := range g.conf {
		keys[k] = true
	}
	for k := range g.pending {
		keys[k] = true
	}
	for k := range g.pendingDel {
		keys[k] = true
	}
	keys["digest"] = true
	out := make([]pendingItem, 0, len(keys))
	for _, k := range sortedKeys(keys) {
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
		if g.pendingDel[k] {
			e.Delete = 1
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
	ch := &configChange{set: map[string]string{}}
	errs := map[string]string{}
	for k, v := range q.params {
		if configMeta[k] {
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
		if _, ok := specFor(g.kind, k); !ok {
			errs["delete"] = fmt.Sprintf("invalid format - unknown property '%s'", k)
			continue
		}
		if _, both := ch.set[k]; both {
			errs[k] = fmt.Sprintf("unable to delete '%s' - is also in set", k)
			continue
		}
		ch.del = append(ch.del, k)
	}
	ch.revert = splitList(q.str("revert"))
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	if len(ch.set) == 0 && len(ch.del) == 0 && len(ch.revert) == 0 {
		return nil, fail500("no options specified")
	}
	if l := g.lock(); l != "" && !skiplock {
		if _, setsLock := ch.set["lock"]; !setsLock {
			return nil, fail500("%s", lockedErr(g))
		}
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
	for _, k := range ch.revert {
		delete(g.pending, k)
		delete(g.pendingDel, k)
	}
	for _, k := range sortedKeys(ch.set) {
		v := ch.set[k]
		if g.running() && !hotpluggable(g, k) {
			g.pending[k] = v
			delete(g.pendingDel, k)
			continue
		}
		g.conf[k] = v
		delete(g.pending, k)
		delete(g.pendingDel, k)
	}
	for _, k := range ch.del {
		_, inConf := g.conf[k]
		_, inPending := g.pending[k]
		if !inConf && !inPending {
			warnings = append(warnings, fmt.Sprintf("cannot delete '%s' - not set in current configuration!", k))
			continue
		}
		delete(g.pending, k)
		if g.running() && !hotpluggable(g, k) && inConf {
			g.pendingDel[k] = true
			continue
		}
		delete(g.conf, k)
	}
	g.touch()
	return warnings
}

// putConfig is the synchronous update (QEMU and LXC): null on success.
func (s *Sim) putConfig(q *req, g *guest) (any, error) {
	ch, err := s.parseConfigChange(q, g)
	if err != nil {
		return nil, err
	}
	if s.roll(s.faults.FailRate) {
		return nil, fail500("%s", flockTimeout(g.kind, g.vmid))
	}
	g.apply(ch)
	return nil, nil
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
	t := s.startTask(g.node, "qmconfig", g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		return g.apply(ch), nil
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

// ---- power ------------------------------------------------------------------

func (s *Sim) power(q *req, g *guest) (any, error) {
	action := q.path("action")
	skiplock, err := q.boolParam("skiplock")
	if err != nil {
		return nil, err
	}
	forceStop, err := q.boolParam("forceStop")
	if err != nil {
		return nil, err
	}
	todisk, err := q.boolParam("todisk")
	if err != nil {
		return nil, err
	}
	word, prefix := "VM", "qm"
	if g.kind == LXC {
		word, prefix = "CT", "vz"
	}
	notRunning := func() error { return fail500("%s %d not running", word, g.vmid) }
	checkLock := func(allow ...string) error {
		l := g.lock()
		if l == "" || skiplock {
			return nil
		}
		for _, a := range allow {
			if l == a {
				return nil
			}
		}
		return taskError(lockedErr(g))
	}
	start := func() {
		g.applyPending()
		g.status, g.paused, g.startedAt = "running", false, time.Now()
		s.pidSeq++
		g.pid = s.pidSeq
	}
	stop := func() { g.status, g.paused, g.pid = "stopped", false, 0 }

	var typ string
	var work func() ([]string, error)
	switch action {
	case "start":
		typ = prefix + "start"
		if g.template() {
			return nil, fail500("you can't start a %s if it's a template", map[Kind]string{QEMU: "vm", LXC: "CT"}[g.kind])
		}
		if g.kind == LXC && g.running() {
			return nil, fail500("CT %d already running", g.vmid)
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if err := checkLock("suspended"); err != nil {
				return nil, err
			}
			if g.running() {
				return nil, taskFail("VM %d already running", g.vmid)
			}
			if g.lock() == "suspended" {
				delete(g.conf, "lock")
				g.touch()
			}
			start()
			return nil, nil
		}
	case "stop":
		typ = prefix + "stop"
		if g.kind == LXC && !g.running() {
			return nil, fail500("CT %d not running", g.vmid)
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if err := checkLock(); err != nil {
				return nil, err
			}
			stop() // stopping a stopped VM is a successful no-op
			return nil, nil
		}
	case "shutdown":
		typ = prefix + "shutdown"
		if g.kind == LXC && !g.running() {
			return nil, fail500("CT %d not running", g.vmid)
		}
		if g.kind == QEMU && g.running() && g.paused && !forceStop {
			return nil, fail500("VM is paused - cannot shutdown")
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if err := checkLock(); err != nil {
				return nil, err
			}
			if g.running() && s.noACPI[g.vmid] && !forceStop {
				if g.kind == LXC {
					return nil, taskFail("container did not stop")
				}
				return nil, taskFail("VM quit/powerdown failed - got timeout")
			}
			stop()
			return nil, nil
		}
	case "reboot":
		typ = prefix + "reboot"
		if !g.running() {
			return nil, fail500("VM %d not running", g.vmid) // "VM" for containers too (sic)
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if err := checkLock(); err != nil {
				return nil, err
			}
			if !g.running() {
				return nil, taskFail("VM %d not running", g.vmid)
			}
			start() // a reboot is a stop and start: pending changes apply
			return nil, nil
		}
	case "reset":
		if g.kind == LXC {
			return nil, &apiError{status: 501, msg: fmt.Sprintf("Method 'POST %s' not implemented", strings.TrimPrefix(q.r.URL.Path, "/api2/json"))}
		}
		typ = "qmreset"
		if !g.running() {
			return nil, notRunning()
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if err := checkLock(); err != nil {
				return nil, err
			}
			g.startedAt, g.paused = time.Now(), false
			return nil, nil
		}
	case "suspend":
		typ = prefix + "suspend"
		if !g.running() {
			return nil, notRunning()
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if err := checkLock(); err != nil {
				return nil, err
			}
			if todisk && g.kind == QEMU {
				stop() // hibernate: state saved to disk, guest stopped and locked
				g.conf["lock"] = "suspended"
				g.touch()
				return nil, nil
			}
			g.paused = true
			return nil, nil
		}
	case "resume":
		typ = prefix + "resume"
		hibernated := g.kind == QEMU && g.lock() == "suspended"
		if !g.running() && !hibernated {
			return nil, notRunning()
		}
		work = func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			if g.lock() == "suspended" {
				delete(g.conf, "lock")
				g.touch()
				start()
				return nil, nil
			}
			g.paused = false
			return nil, nil
		}
	default:
		return nil, &apiError{status: 501, msg: fmt.Sprintf("Method 'POST %s' not implemented", strings.TrimPrefix(q.r.URL.Path, "/api2/json"))}
	}
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, work, nil)
	return t.upid, nil
}

// ---- create, clone, template, delete ----------------------------------------

var createMeta = map[string]bool{"vmid": true, "node": true, "start": true, "storage": true, "password": true,
	"ssh-public-keys": true, "pool": true, "unique": true, "archive": true, "force": true, "ostemplate": true,
	"live-restore": true, "ignore-unpack-errors": true, "restore": true}

var allocRe = regexp.MustCompile(`^([a-zA-Z0-9\-_.]+):(\d+(?:\.\d+)?)(,.*)?$`)

// allocVolume turns "local-lvm:32" into "local-lvm:vm-100-disk-0,size=32G".
func allocVolume(vmid, idx int, v string) (string, error) {
	m := allocRe.FindStringSubmatch(v)
	if m == nil {
		return v, nil
	}
	st := storageByName(m[1])
	if st == nil {
		return "", fmt.Errorf("storage '%s' does not exist", m[1])
	}
	return fmt.Sprintf("%s:vm-%d-disk-%d,size=%sG%s", m[1], vmid, idx, m[2], m[3]), nil
}

func (s *Sim) mac() string {
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", s.rng.IntN(256), s.rng.IntN(256), s.rng.IntN(256))
}

func (s *Sim) uuid() string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(s.rng.IntN(256))
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var nicModelRe = regexp.MustCompile(`^(virtio|e1000|e1000e|rtl8139|vmxnet3)(=[0-9A-Fa-f:]+)?(,.*)?$`)

// withMAC gives a NIC a fresh MAC, as Proxmox does on create and clone.
func (s *Sim) withMAC(kind Kind, v string) string {
	if kind == QEMU {
		if m := nicModelRe.FindStringSubmatch(v); m != nil {
			return m[1] + "=" + s.mac() + m[3]
		}
		return v
	}
	parts := strings.Split(v, ",")
	out := parts[:0]
	for _, p := range parts {
		if !strings.HasPrefix(p, "hwaddr=") {
			out = append(out, p)
		}
	}
	return strings.Join(append(out, "hwaddr="+s.mac()), ",")
}

func isDiskKey(k string) bool {
	for _, p := range []string{"scsi", "virtio", "sata", "ide", "mp", "efidisk", "tpmstate"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return k == "rootfs"
}

func (s *Sim) createGuest(q *req, kind Kind, n *node) (any, error) {
	if !q.has("vmid") {
		return nil, paramErr1("vmid", "property is missing and it is not optional")
	}
	vmid, err := strconv.Atoi(q.str("vmid"))
	if err != nil || vmid < 100 || vmid > 999999999 {
		return nil, paramErr1("vmid", "type check ('integer') failed - got '%s'", q.str("vmid"))
	}
	startAfter, err := q.boolParam("start")
	if err != nil {
		return nil, err
	}
	word := "VM"
	if kind == LXC {
		word = "CT"
		if !q.has("ostemplate") {
			return nil, paramErr1("ostemplate", "property is missing and it is not optional")
		}
	}
	if s.guests[vmid] != nil {
		return nil, fail500("%s %d already exists on node '%s'", word, vmid, s.guests[vmid].node)
	}
	conf := map[string]string{}
	errs := map[string]string{}
	for k, v := range q.params {
		if createMeta[k] {
			continue
		}
		cv, msg := canonical(kind, k, v)
		if msg != "" {
			errs[k] = msg
			continue
		}
		conf[k] = cv
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	disk := 0
	for _, k := range sortedKeys(conf) {
		switch {
		case isDiskKey(k) && !strings.Contains(conf[k], "media=cdrom"):
			v, err := allocVolume(vmid, disk, conf[k])
			if err != nil {
				return nil, fail500("unable to create %s %d - %v", word, vmid, err)
			}
			if v != conf[k] {
				disk++
			}
			conf[k] = v
		case strings.HasPrefix(k, "net"):
			conf[k] = s.withMAC(kind, conf[k])
		}
	}
	if kind == QEMU {
		conf["smbios1"] = "uuid=" + s.uuid()
		conf["vmgenid"] = s.uuid()
		conf["meta"] = fmt.Sprintf("creation-qemu=9.0.2,ctime=%d", time.Now().Unix())
	} else {
		tmpl := q.str("ostemplate")
		store, vol, _ := strings.Cut(tmpl, ":")
		if st := storageByName(store); st == nil || !strings.HasPrefix(vol, "vztmpl/") || !knownAppliance(strings.TrimPrefix(vol, "vztmpl/")) {
			return nil, fail500("unable to create CT %d - volume '%s' does not exist", vmid, tmpl)
		}
		if _, ok := conf["rootfs"]; !ok {
			st := q.str("storage")
			if st == "" {
				st = "local-lvm"
			}
			conf["rootfs"] = fmt.Sprintf("%s:vm-%d-disk-%d,size=8G", st, vmid, disk)
		}
		if _, ok := conf["arch"]; !ok {
			conf["arch"] = "amd64"
		}
		if _, ok := conf["ostype"]; !ok {
			conf["ostype"] = strings.SplitN(strings.TrimPrefix(vol, "vztmpl/"), "-", 2)[0]
		}
	}
	conf["lock"] = "create"
	g := s.newGuest(vmid, kind, n.name, conf)
	typ := map[Kind]string{QEMU: "qmcreate", LXC: "vzcreate"}[kind]
	t := s.startTask(n.name, typ, kind, vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		delete(g.conf, "lock")
		g.touch()
		if startAfter {
			g.status, g.startedAt = "running", time.Now()
			s.pidSeq++
			g.pid = s.pidSeq
		}
		return nil, nil
	}, func() {
		if s.guests[vmid] == g {
			delete(s.guests, vmid)
		}
	})
	return t.upid, nil
}

func knownAppliance(name string) bool {
	for _, a := range appliances {
		if a["template"] == name {
			return true
		}
	}
	return false
}

func (s *Sim) newGuest(vmid int, kind Kind, nodeName string, conf map[string]string) *guest {
	g := &guest{vmid: vmid, kind: kind, node: nodeName, status: "stopped", conf: conf,
		pending: map[string]string{}, pendingDel: map[string]bool{}, resID: string(kind) + "/" + strconv.Itoa(vmid)}
	g.touch()
	s.guests[vmid] = g
	return g
}

var volRe = regexp.MustCompile(`^([^:]+):(?:base-\d+-disk-\d+/)?(?:vm|base)-\d+-disk-(\d+)(,.*)?$`)

func (s *Sim) clone(q *req, g *guest) (any, error) {
	if !q.has("newid") {
		return nil, paramErr1("newid", "property is missing and it is not optional")
	}
	newid, err := strconv.Atoi(q.str("newid"))
	if err != nil || newid < 100 || newid > 999999999 {
		return nil, paramErr1("newid", "type check ('integer') failed - got '%s'", q.str("newid"))
	}
	nameKey := "name"
	if g.kind == LXC {
		nameKey = "hostname"
	}
	errs := map[string]string{}
	if q.has(nameKey) {
		if _, msg := canonical(g.kind, nameKey, q.str(nameKey)); msg != "" {
			errs[nameKey] = msg
		}
	}
	full, err := q.boolParam("full")
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	if !q.has("full") {
		full = !g.template()
	}
	target := g.node
	if tn := q.str("target"); tn != "" {
		if s.nodeByName(tn) == nil {
			return nil, fail500("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", tn, tn)
		}
		target = tn
	}
	if sn := q.str("snapname"); sn != "" {
		return nil, fail500("snapshot '%s' does not exist", sn)
	}
	storage := q.str("storage")
	if storage != "" && storageByName(storage) == nil {
		return nil, fail500("storage '%s' does not exist", storage)
	}
	if s.guests[newid] != nil {
		return nil, fail500("unable to create %s %d: config file already exists", g.typeWord(), newid)
	}
	if l := g.lock(); l != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	if !full && !g.template() {
		return nil, fail500("Linked clone feature is not supported for running or non-template %ss", strings.ToLower(g.typeWord()))
	}
	conf := maps.Clone(g.conf)
	delete(conf, "template")
	var log []string
	for _, k := range sortedKeys(conf) {
		v := conf[k]
		switch {
		case isDiskKey(k):
			m := volRe.FindStringSubmatch(v)
			if m == nil {
				continue
			}
			st := m[1]
			if full && storage != "" {
				st = storage
			}
			if full {
				conf[k] = fmt.Sprintf("%s:vm-%d-disk-%s%s", st, newid, m[2], m[3])
				log = append(log, fmt.Sprintf("create full clone of drive %s (%s)", k, strings.Split(v, ",")[0]))
			} else {
				conf[k] = fmt.Sprintf("%s:base-%d-disk-%s/vm-%d-disk-%s%s", st, g.vmid, m[2], newid, m[2], m[3])
				log = append(log, fmt.Sprintf("create linked clone of drive %s (%s)", k, strings.Split(v, ",")[0]))
			}
		case strings.HasPrefix(k, "net"):
			conf[k] = s.withMAC(g.kind, v)
		}
	}
	if g.kind == QEMU {
		conf["smbios1"] = "uuid=" + s.uuid()
		conf["vmgenid"] = s.uuid()
		conf["name"] = "Copy-of-VM-" + g.displayName()
	}
	if q.has(nameKey) {
		conf[nameKey] = q.str(nameKey)
	}
	if q.has("description") {
		conf["description"] = q.str("description")
	}
	conf["lock"] = "clone"
	ng := s.newGuest(newid, g.kind, target, conf)
	typ := map[Kind]string{QEMU: "qmclone", LXC: "vzclone"}[g.kind]
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(ng); err != nil {
			return nil, err
		}
		delete(ng.conf, "lock")
		ng.touch()
		return nil, nil
	}, func() {
		if s.guests[newid] == ng {
			delete(s.guests, newid)
		}
	})
	t.log = append(t.log, log...)
	return t.upid, nil
}

func (s *Sim) template(q *req, g *guest) (any, error) {
	if g.template() {
		return nil, fail500("you can't convert a template to a template")
	}
	if g.running() {
		if g.kind == LXC {
			return nil, fail500("you can't convert a CT to template if the CT is running")
		}
		return nil, fail500("you can't convert a VM to template if VM is running")
	}
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	typ := map[Kind]string{QEMU: "qmtemplate", LXC: "vztemplate"}[g.kind]
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		for k, v := range g.conf {
			if isDiskKey(k) {
				g.conf[k] = strings.Replace(v, fmt.Sprintf("vm-%d-disk-", g.vmid), fmt.Sprintf("base-%d-disk-", g.vmid), 1)
			}
		}
		g.conf["template"] = "1"
		g.touch()
		return nil, nil
	}, nil)
	return t.upid, nil
}

func (s *Sim) destroy(q *req, g *guest) (any, error) {
	skiplock, err := q.boolParam("skiplock")
	if err != nil {
		return nil, err
	}
	force, err := q.boolParam("force")
	if err != nil {
		return nil, err
	}
	for _, p := range []string{"purge", "destroy-unreferenced-disks"} {
		if _, err := q.boolParam(p); err != nil {
			return nil, err
		}
	}
	if g.conf["protection"] == "1" {
		return nil, fail500("can't remove %s %d - protection mode enabled", g.typeWord(), g.vmid)
	}
	if g.running() {
		if g.kind == QEMU {
			return nil, fail500("VM %d is running - destroy failed", g.vmid)
		}
		if !force {
			return nil, fail500("unable to destroy CT %d - container is running", g.vmid)
		}
	}
	typ := map[Kind]string{QEMU: "qmdestroy", LXC: "vzdestroy"}[g.kind]
	t := s.startTask(g.node, typ, g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if l := g.lock(); l != "" && !skiplock {
			return nil, taskError(lockedErr(g))
		}
		if g.running() {
			if g.kind == QEMU || !force {
				return nil, taskFail("%s %d is running - destroy failed", g.typeWord(), g.vmid)
			}
			g.status = "stopped"
		}
		delete(s.guests, g.vmid)
		delete(s.noACPI, g.vmid)
		return nil, nil
	}, nil)
	return t.upid, nil
}

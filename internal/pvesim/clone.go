package pvesim

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
)

// ---- clone, template, delete ------------------------------------------------

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

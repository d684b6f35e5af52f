package pvesim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

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

// withMAC gives a cloned NIC a fresh MAC and prints it canonically, as
// Proxmox's clone does for every netN: qemu-server's API2/Qemu.pm
// clone_vm ("always change MAC! address": parse_net, a new macaddr from
// random_ether_addr, print_net — for every NIC model) and pve-container's
// API2/LXC.pm clone_vm (parse_lxc_network, a new hwaddr,
// print_lxc_network). A value that does not parse is kept. Caller holds
// s.mu (the RNG).
func (s *Sim) withMAC(kind Kind, v string) string {
	if kind == QEMU {
		m, ok := propList(v, "model")
		if !ok {
			return v
		}
		for k := range m {
			if qemuNICModels[k] {
				m["model"] = k
				delete(m, k)
			}
		}
		delete(m, "macaddr")
		return s.canonicalNIC(kind, printProps(m))
	}
	m, ok := propList(v, "")
	if !ok {
		return v
	}
	delete(m, "hwaddr")
	return s.canonicalNIC(kind, printProps(m, "name"))
}

func isDiskKey(k string) bool {
	if strings.HasPrefix(k, "virtiofs") { // a shared directory, no volume
		return false
	}
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
	if kind == QEMU {
		resolveCdromAlias(q.params)
	}
	for k, v := range q.params {
		if createMeta[k] || !configKey(kind, k) {
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
	if _, ok := conf["rootfs"]; kind == LXC && !ok {
		// pve-container: "$storage:4" (4 GiB), storage local-lvm here.
		st := q.str("storage")
		if st == "" {
			st = "local-lvm"
		}
		conf["rootfs"] = st + ":4"
	}
	allocs := map[string]string{} // drive key → storage of each new volume
	if err := s.allocDisks(kind, vmid, false, conf, allocs, q.str("storage")); err != nil {
		return nil, fail500("unable to create %s %d - %v", word, vmid, err)
	}
	disk := 0
	for _, k := range sortedKeys(conf) {
		switch {
		case allocDriveKeyRe[kind].MatchString(k):
		case isDiskKey(k) && !strings.Contains(conf[k], "media=cdrom"):
			v, err := allocVolume(vmid, disk, conf[k])
			if err != nil {
				return nil, fail500("unable to create %s %d - %v", word, vmid, err)
			}
			if v != conf[k] {
				disk++
				allocs[k], _ = volumeStorage(v)
			}
			conf[k] = v
		case strings.HasPrefix(k, "net"):
			conf[k] = s.canonicalNIC(kind, conf[k])
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
		if _, ok := conf["arch"]; !ok {
			conf["arch"] = "amd64"
		}
		if _, ok := conf["ostype"]; !ok {
			conf["ostype"] = strings.SplitN(strings.TrimPrefix(vol, "vztmpl/"), "-", 2)[0]
		}
		s.lxcUnprivileged(q, conf)
	}
	conf["lock"] = "create"
	g := s.newGuest(vmid, kind, n.name, conf)
	typ := map[Kind]string{QEMU: "qmcreate", LXC: "vzcreate"}[kind]
	// The new volumes' storage locks come first (storagelock.go).
	r := s.lockRun(n.name)
	_, cleanup, lockErr := r.alloc(allocStorages(allocs, kind == LXC))
	d := r.taskDelay(typ, lockErr)
	t := s.startTaskIn(d, n.name, typ, kind, vmid, q.user, nil, func(print func(string)) ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if lockErr != nil {
			for _, m := range cleanup {
				print(m) // the cleanup's vdisk_free failed: warned
			}
			delete(s.guests, vmid) // the create lock's config goes
			return nil, taskFail("unable to create %s %d - %s", word, vmid, lockErr)
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

// allocStorages are the storages of a create's or config write's new
// volumes (allocs: drive key → storage) in the order Proxmox allocates
// them: a container create visits rootfs, mp0, mp1, … (pve-container
// src/PVE/LXC.pm create_disks: foreach_volume); qemu-server's
// create_disks and pve-container's vmconfig_apply_pending sort the keys,
// and update_vm_api takes them in Perl's hash order, sorted here.
func allocStorages(allocs map[string]string, containerCreate bool) []string {
	keys := sortedKeys(allocs)
	if containerCreate {
		driveOrder(keys)
	}
	sids := make([]string, len(keys))
	for i, k := range keys {
		sids[i] = allocs[k]
	}
	return sids
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
	g.pool = s.vmPool[vmid] // user.cfg may name it already
	return g
}

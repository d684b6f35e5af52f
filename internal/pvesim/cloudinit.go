package pvesim

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// ---- cloud-init (QEMU) ---------------------------------------------------------
//
// qemu-server keeps, in the config's [special:cloudinit] section, the
// values a running VM's cloud-init keys had when the drive was last
// generated, as they change live (vmconfig_hotplug_pending's
// cloudinit_record_changed); GET …/cloudinit reports them, PUT
// …/cloudinit regenerates the drive (apply_cloudinit_config) and drops the
// section. The drive is also generated at every start and when a
// cloud-init drive is added. The simulator writes no ISO: it counts the
// generations and keeps the values each one was made from.

// ciState is a guest's [special:cloudinit] section and its drive's
// generations.
type ciState struct {
	recorded map[string]string // old values, and "added": keys that were unset
	gens     int
	image    map[string]string // the values of the last generation
}

// cloudInitOptions is API2/Qemu.pm's $cloudinitoptions: the keys GET
// …/cloudinit reports by name (ipconfigN only through the section).
var cloudInitOptions = []string{"cicustom", "cipassword", "citype", "ciupgrade", "ciuser", "nameserver",
	"searchdomain", "sshkeys"}

// ciPendingKeyRe is QemuServer's cloudinit_pending_properties: the
// cloud-init keys, ipconfigN, netN and name.
var ciPendingKeyRe = regexp.MustCompile(`^(cicustom|cipassword|citype|ciupgrade|ciuser|nameserver|searchdomain|sshkeys|name|ipconfig\d+|net\d+)$`)

// ciDriveRe is Drive::drive_is_cloudinit on a drive's volume.
var ciDriveRe = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow2|vmdk))?$`)

// CloudInitInfo is what a test sees of a VM's cloud-init drive.
type CloudInitInfo struct {
	Drive       string            // the drive key ("ide2"), "" for none
	Generations int               // how often the drive was (re)generated
	Values      map[string]string // the config values of the last generation
	Changed     map[string]string // [special:cloudinit]: recorded old values and "added"
}

// CloudInit reports a VM's cloud-init drive (false if there is no such
// guest).
func (s *Sim) CloudInit(vmid int) (CloudInitInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil {
		return CloudInitInfo{}, false
	}
	return CloudInitInfo{Drive: g.cloudInitDrive(), Generations: g.ci.gens, Values: maps.Clone(g.ci.image),
		Changed: maps.Clone(g.ci.recorded)}, true
}

// cloudInitDrive is the key of the applied cloud-init drive, if any.
func (g *guest) cloudInitDrive() string {
	if g.kind != QEMU {
		return ""
	}
	for _, k := range sortedKeys(g.conf) {
		if driveKeyRe.MatchString(k) && ciDriveRe.MatchString(volid(g.conf[k])) {
			return k
		}
	}
	return ""
}

// ciGenerate is apply_cloudinit_config: with a cloud-init drive, the
// image is made from the config and [special:cloudinit] dropped.
func (g *guest) ciGenerate() {
	if g.cloudInitDrive() == "" {
		return
	}
	g.ci.gens++
	g.ci.image = map[string]string{}
	for k, v := range g.conf {
		if ciPendingKeyRe.MatchString(k) {
			g.ci.image[k] = v
		}
	}
	if len(g.ci.recorded) > 0 {
		g.ci.recorded = nil
		g.touch()
	}
}

// powerOn starts a guest as vm_start does: pending changes applied
// (unless it resumes a RAM snapshot), then the cloud-init drive
// regenerated.
func (s *Sim) powerOn(g *guest, applyPending bool) {
	if applyPending {
		g.applyPending()
	}
	g.ciGenerate()
	if g.kind == QEMU && dropVMState(g) { // resume, or left-over state keys (pve9.go)
		g.touch()
	}
	g.status, g.paused, g.startedAt = "running", false, time.Now()
	s.pidSeq++
	g.pid = s.pidSeq
}

// ciRecord is cloudinit_record_changed for a change a running VM takes
// live: old (had: it was set) becomes new (set: false for a deletion).
func (g *guest) ciRecord(key, old string, had bool, val string, set bool) {
	if g.kind != QEMU || !ciPendingKeyRe.MatchString(key) {
		return
	}
	if g.ci.recorded == nil {
		g.ci.recorded = map[string]string{}
	}
	ci := g.ci.recorded
	recorded, isRecorded := ci[key]
	added := map[string]bool{}
	for _, k := range splitList(ci["added"]) {
		added[k] = true
	}
	delete(ci, "added")
	switch {
	case set && isRecorded && val == recorded: // back to the drive's value
		delete(ci, key)
		delete(added, key)
	case set && (isRecorded || added[key]):
	case set && had:
		ci[key] = old
	case set:
		added[key] = true
	case !had, isRecorded:
	case added[key]:
		delete(added, key)
	default:
		ci[key] = old
	}
	if len(added) > 0 {
		ci["added"] = strings.Join(sortedKeys(added), ",")
	}
}

// perlTrue is Perl's truth of a config value: unset, "" and "0" are false.
func perlTrue(v string, ok bool) bool { return ok && v != "" && v != "0" }

// getCloudInit is GET …/cloudinit, API2/Qemu.pm's cloudinit_pending with
// its quirks: only $cloudinitoptions are listed by name, a key is skipped
// when its value is false to Perl or its name is a substring of "added".
func (s *Sim) getCloudInit(q *req, g *guest) (any, error) {
	conf := maps.Clone(g.conf)
	ci := maps.Clone(g.ci.recorded)
	if ci == nil {
		ci = map[string]string{}
	}
	if _, ok := conf["cipassword"]; ok {
		conf["cipassword"] = "**********"
	}
	if _, ok := ci["cipassword"]; ok {
		ci["cipassword"] = "**********"
	}
	out := []map[string]any{}
	added := ci["added"]
	delete(ci, "added")
	for _, k := range splitList(added) {
		e := map[string]any{"key": k, "pending": nil}
		if v, ok := conf[k]; ok {
			e["pending"] = s.typed(QEMU, k, v)
		}
		out = append(out, e)
	}
	for _, k := range cloudInitOptions {
		v, ok := conf[k]
		if !perlTrue(v, ok) || strings.Contains(added, k) {
			continue
		}
		e := map[string]any{"key": k}
		if old, rec := ci[k]; perlTrue(old, rec) {
			e["value"], e["pending"] = s.typed(QEMU, k, old), s.typed(QEMU, k, v)
		} else {
			e["value"] = s.typed(QEMU, k, v)
		}
		out = append(out, e)
	}
	for _, k := range sortedKeys(ci) {
		if v, ok := conf[k]; !perlTrue(v, ok) {
			out = append(out, map[string]any{"key": k, "delete": 1})
		}
	}
	return out, nil
}

// putCloudInit is PUT …/cloudinit (cloudinit_update): under the config
// lock, refused on a locked VM; without a cloud-init drive it does
// nothing and still answers null.
func (s *Sim) putCloudInit(q *req, g *guest) (any, error) {
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	if s.roll(s.faults.FailRate) {
		return nil, fail500("%s", s.failMessage(g.kind, g.vmid))
	}
	g.ciGenerate()
	return nil, nil
}

// dumpCloudInit is GET …/cloudinit/dump for type "user" (the nocloud and
// configdrive2 user-data are the same); network and meta are not
// simulated.
func (s *Sim) dumpCloudInit(q *req, g *guest) (any, error) {
	typ := q.str("type")
	if !q.has("type") {
		return nil, paramErr1("type", "property is missing and it is not optional")
	}
	if err := enumParam("type", typ, []string{"user", "network", "meta"}); err != nil {
		return nil, err
	}
	if typ != "user" {
		return nil, fail500("pvesim: cloud-init %s data is not simulated", typ)
	}
	conf := g.conf
	host, ok := conf["name"]
	if !ok {
		host = fmt.Sprintf("VM%d", g.vmid)
	}
	fqdn := host
	if i := strings.IndexByte(host, '.'); i >= 0 {
		host = host[:i]
	} else if sd := conf["searchdomain"]; sd != "" {
		fqdn = host + "." + sd
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#cloud-config\nhostname: %s\nmanage_etc_hosts: true\nfqdn: %s\n", host, fqdn)
	user, hasUser := conf["ciuser"]
	if hasUser {
		fmt.Fprintf(&b, "user: %s\n", user)
		if user == "root" {
			b.WriteString("disable_root: False\n")
		}
	}
	if pw, ok := conf["cipassword"]; ok {
		fmt.Fprintf(&b, "password: %s\n", pw)
	}
	if keys, ok := conf["sshkeys"]; ok {
		if dec, err := url.PathUnescape(keys); err == nil {
			keys = dec
		}
		b.WriteString("ssh_authorized_keys:\n")
		for _, k := range strings.Split(keys, "\n") {
			if strings.TrimSpace(k) != "" {
				fmt.Fprintf(&b, "  - %s\n", k)
			}
		}
	}
	b.WriteString("chpasswd:\n  expire: False\n")
	if !hasUser || user != "root" {
		b.WriteString("users:\n  - default\n")
	}
	if v, ok := conf["ciupgrade"]; !ok || v == "1" {
		b.WriteString("package_upgrade: true\n")
	}
	return b.String(), nil
}

// ciVolumeRe is a new cloud-init drive's volume: "STORAGE:cloudinit".
var ciVolumeRe = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]):cloudinit$`)

// allocCloudInit allocates the cloud-init drives a create or config write
// asks for, as create_disks does: vm-<vmid>-cloudinit (.qcow2 on file
// storages, in the vmid's directory), media=cdrom, no size; one per VM.
// allocs gets the drive's key and storage. Caller holds s.mu.
func (s *Sim) allocCloudInit(vmid int, set, allocs map[string]string) error {
	keys := []string{}
	for k := range set {
		if driveKeyRe.MatchString(k) {
			keys = append(keys, k)
		}
	}
	driveOrder(keys)
	attached := ""
	if g := s.guests[vmid]; g != nil {
		for _, k := range append(sortedKeys(g.conf), sortedKeys(g.pending)...) {
			v, ok := g.pending[k]
			if !ok {
				v = g.conf[k]
			}
			if driveKeyRe.MatchString(k) && ciDriveRe.MatchString(volid(v)) {
				if _, replaced := set[k]; !replaced {
					attached = k
				}
			}
		}
	}
	for _, k := range keys {
		m, ok := propList(set[k], "file")
		if !ok {
			continue
		}
		sm := ciVolumeRe.FindStringSubmatch(m["file"])
		if sm == nil {
			continue
		}
		if attached != "" {
			return fmt.Errorf("%s - cloud-init drive is already attached at '%s'", k, attached)
		}
		st := storageByName(sm[1])
		if st == nil {
			return fmt.Errorf("storage '%s' does not exist", sm[1])
		}
		name := fmt.Sprintf("%s:vm-%d-cloudinit", sm[1], vmid)
		if st.typ == "dir" {
			format := m["format"]
			if format == "" {
				format = "qcow2"
			}
			name = fmt.Sprintf("%s:%d/vm-%d-cloudinit.%s", sm[1], vmid, vmid, format)
		}
		m["file"] = name
		m["media"] = "cdrom"
		delete(m, "format")
		delete(m, "size")
		set[k] = printProps(m, "=file")
		allocs[k] = sm[1]
		attached = k
	}
	return nil
}

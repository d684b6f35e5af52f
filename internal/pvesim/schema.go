package pvesim

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ---- schema -----------------------------------------------------------------

type ptype int

const (
	tString ptype = iota
	tInt
	tBool
	tNumber // PVE "number": returned as a string
	tMemory // QEMU memory property string "[current=]<MiB>"
	tDNS    // DNS name
	tTags
	tURLEncoded // pve-common's "urlencoded" format (sshkeys)
)

type keySpec struct {
	t        ptype
	min, max int64
}

var (
	qemuKeys = map[string]keySpec{
		"name": {t: tDNS}, "description": {}, "tags": {t: tTags}, "onboot": {t: tBool},
		"cores": {t: tInt, min: 1}, "sockets": {t: tInt, min: 1},
		"vcpus": {t: tInt, min: 1}, "memory": {t: tMemory, min: 16},
		"balloon": {t: tInt, min: 0}, "cpu": {}, "cpulimit": {t: tNumber}, "cpuunits": {t: tInt, min: 1, max: 262144},
		"numa": {t: tBool}, "ostype": {}, "boot": {}, "bootdisk": {}, "scsihw": {}, "agent": {},
		"hotplug": {}, "protection": {t: tBool}, "startup": {}, "lock": {}, "template": {t: tBool},
		"machine": {}, "bios": {}, "vga": {}, "kvm": {t: tBool}, "acpi": {t: tBool}, "tablet": {t: tBool},
		"smbios1": {}, "vmgenid": {}, "meta": {}, "ciuser": {}, "cipassword": {}, "citype": {},
		"sshkeys": {t: tURLEncoded}, "ciupgrade": {t: tBool}, "cicustom": {}, "vmstatestorage": {}, "nameserver": {}, "searchdomain": {}, "hookscript": {}, "shares": {t: tInt, min: 0, max: 50000},
		"args": {}, "efidisk0": {}, "tpmstate0": {}, "localtime": {t: tBool}, "keyboard": {}, "watchdog": {},
		"affinity": {}, "rng0": {}, "audio0": {}, "migrate_downtime": {t: tNumber}, "migrate_speed": {t: tInt, min: 0},
		// Declared by the API schema (PUT /nodes/{node}/qemu/{vmid}/config),
		// kept as written, not modelled.
		"allow-ksm": {t: tBool}, "amd-sev": {}, "arch": {}, "autostart": {t: tBool}, "freeze": {t: tBool},
		"hugepages": {}, "intel-tdx": {}, "ivshmem": {}, "keephugepages": {t: tBool}, "reboot": {t: tBool},
		"smp": {t: tInt, min: 1}, "spice_enhancements": {}, "startdate": {}, "tdf": {t: tBool},
	}
	lxcKeys = map[string]keySpec{
		"hostname": {t: tDNS}, "description": {}, "tags": {t: tTags}, "onboot": {t: tBool},
		"cores": {t: tInt, min: 1, max: 8192}, "cpulimit": {t: tNumber}, "cpuunits": {t: tInt, min: 0, max: 500000},
		"memory": {t: tInt, min: 16}, "swap": {t: tInt, min: 0}, "ostype": {}, "arch": {}, "rootfs": {},
		"unprivileged": {t: tBool}, "features": {}, "nameserver": {}, "searchdomain": {}, "protection": {t: tBool},
		"startup": {}, "lock": {}, "template": {t: tBool}, "hookscript": {}, "console": {t: tBool},
		"tty": {t: tInt, min: 0, max: 6}, "cmode": {}, "timezone": {}, "debug": {t: tBool},
		// Declared by the API schema (PUT /nodes/{node}/lxc/{vmid}/config),
		// kept as written, not modelled.
		"entrypoint": {}, "env": {},
	}
	indexedKeys = map[Kind]*regexp.Regexp{
		QEMU: regexp.MustCompile(`^(net|scsi|virtio|sata|ide|unused|ipconfig|serial|usb|hostpci|numa|parallel|virtiofs)\d+$`),
		LXC:  regexp.MustCompile(`^(net|mp|unused|dev)\d+$`),
	}
	urlEncRe = regexp.MustCompile(`^[-%a-zA-Z0-9_.!~*'()]*$`)
	dnsName  = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)*$`)
	tagRe    = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_\-+.]*$`)
	memRe    = regexp.MustCompile(`^(?:current=)?(\d+)$`)
)

func specFor(kind Kind, key string) (keySpec, bool) {
	m := qemuKeys
	if kind == LXC {
		m = lxcKeys
	}
	if s, ok := m[key]; ok {
		return s, true
	}
	if indexedKeys[kind].MatchString(key) {
		return keySpec{}, true
	}
	return keySpec{}, false
}

// parseBool is a boolean parameter as pve-common's JSONSchema.pm
// check_type checks it: the text "1" or "0" only (a JSON true or false
// arrives here as "1" or "0"; "true", "yes" or "on" in a form body or a
// JSON string is refused).
func parseBool(v string) (bool, bool) {
	switch v {
	case "1":
		return true, true
	case "0":
		return false, true
	}
	return false, false
}

// parsePropBool is a boolean inside a property string or config file as
// pve-common's JSONSchema.pm parse_boolean reads it: 1|on|yes|true or
// 0|off|no|false, in any case.
func parsePropBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, true
	case "0", "off", "no", "false":
		return false, true
	}
	return false, false
}

// canonical validates a parameter value and returns what PVE writes to the
// config file, or a per-field error message as PVE phrases it. A key the
// API schema declares (checked in serve) that the simulator does not
// model is kept as written.
func canonical(kind Kind, key, v string) (string, string) {
	spec, ok := specFor(kind, key)
	if !ok {
		return v, ""
	}
	switch spec.t {
	case tInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Sprintf("type check ('integer') failed - got '%s'", v)
		}
		if msg := rangeCheck(n, spec); msg != "" {
			return "", msg
		}
		return strconv.FormatInt(n, 10), ""
	case tBool:
		b, ok := parseBool(v)
		if !ok {
			return "", fmt.Sprintf("type check ('boolean') failed - got '%s'", v)
		}
		if b {
			return "1", ""
		}
		return "0", ""
	case tNumber:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return "", fmt.Sprintf("type check ('number') failed - got '%s'", v)
		}
		return strconv.FormatFloat(f, 'f', -1, 64), ""
	case tMemory:
		m := memRe.FindStringSubmatch(v)
		if m == nil {
			return "", fmt.Sprintf("value '%s' does not match the format of memory", v)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if msg := rangeCheck(n, spec); msg != "" {
			return "", msg
		}
		// Stored verbatim, "current=" prefix included, as Proxmox does.
		return v, ""
	case tDNS:
		if !dnsName.MatchString(v) {
			return "", "value does not look like a valid DNS name"
		}
		return v, ""
	case tURLEncoded:
		if !urlEncRe.MatchString(v) {
			return "", fmt.Sprintf("invalid format - invalid urlencoded string: %s", v)
		}
		return v, ""
	case tTags:
		tags, bad := canonicalTags(v)
		if bad != "" {
			return "", fmt.Sprintf("invalid format - invalid tag '%s'", bad)
		}
		return tags, ""
	}
	return v, ""
}

func rangeCheck(n int64, spec keySpec) string {
	if n < spec.min {
		return fmt.Sprintf("value must have a minimum value of %d", spec.min)
	}
	if spec.max > 0 && n > spec.max {
		return fmt.Sprintf("value must have a maximum value of %d", spec.max)
	}
	return ""
}

// canonicalTags applies PVE's default tag-style: split on , ; and
// whitespace, lower-case, de-duplicate, sort, join with ';'.
func canonicalTags(v string) (string, string) {
	seen := map[string]bool{}
	var out []string
	for _, t := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' }) {
		if !tagRe.MatchString(t) {
			return "", t
		}
		t = strings.ToLower(t)
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ";"), ""
}

// typed renders a stored value with PVE's JSON typing.
func (s *Sim) typed(kind Kind, key, v string) any {
	spec, _ := specFor(kind, key)
	switch spec.t {
	case tInt, tBool:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case tMemory:
		if s.version.memoryAsNumber {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	if key == "description" {
		if kind == QEMU {
			// Stored as comment lines, read back with trailing whitespace trimmed.
			return strings.TrimRight(v, " \t\r\n")
		}
		// LXC reads its comment lines back with their newline.
		if !strings.HasSuffix(v, "\n") {
			return v + "\n"
		}
	}
	return v
}

// hotpluggable reports whether a running guest takes a change to key at
// once (fast-plug or live) rather than keeping it pending until restart.
func hotpluggable(g *guest, key string) bool {
	if g.kind == LXC {
		switch key {
		case "description", "onboot", "startup", "protection", "hostname", "hookscript", "cores",
			"tags", "lock", "cpulimit", "cpuunits", "memory", "swap", "nameserver", "searchdomain":
			return true
		}
		return strings.HasPrefix(key, "net")
	}
	switch key {
	case "description", "hookscript", "lock", "name", "onboot", "protection", "shares", "startup",
		"tags", "vmstatestorage", "migrate_downtime", "migrate_speed", "ciuser", "cipassword",
		"citype", "ciupgrade", "cicustom", "sshkeys", "nameserver", "searchdomain", "balloon", "cpulimit", "cpuunits":
		return true
	}
	if strings.HasPrefix(key, "ipconfig") {
		return true
	}
	feats := hotplugFeatures(g)
	has := func(f string) bool { return feats[f] }
	switch {
	case key == "memory":
		return has("memory") && g.conf["numa"] == "1"
	case key == "vcpus":
		return has("cpu")
	case strings.HasPrefix(key, "net"):
		return has("network")
	case key == "efidisk0", key == "tpmstate0", strings.HasPrefix(key, "ide"), strings.HasPrefix(key, "sata"),
		strings.HasPrefix(key, "virtiofs"):
		return false
	case strings.HasPrefix(key, "scsi"), strings.HasPrefix(key, "virtio"):
		return has("disk")
	}
	// cores and sockets never hotplug.
	return false
}

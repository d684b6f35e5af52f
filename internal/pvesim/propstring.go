package pvesim

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// ---- property strings -------------------------------------------------------

// propFormat is the key set of a property-string format: its keys (an
// alias key, "virtio=MAC" in a QEMU NIC, names its value's key and its own
// key's), the default key that may stand bare, the keys that must be
// there, and enumerations.
type propFormat struct {
	keys       map[string]bool
	aliases    map[string][2]string // key -> {alias (value's key), keyAlias (key's own)}
	defaultKey string
	required   []string
	enums      map[string][]string
}

// Hand-kept, checked again after the schema check (schemacheck.go): the
// formats of the property strings the simulator checks (API schema: PUT /nodes/{node}/qemu/{vmid}/config
// net[n]; qemu-server src/PVE/QemuServer/Network.pm $ipconfig_fmt,
// pve-qm-ipconfig; API schema: PUT /nodes/{node}/lxc/{vmid}/config net[n]).
var (
	qemuNICFormat = func() propFormat {
		f := propFormat{keys: setOf("bridge firewall link_down macaddr model mtu queues rate tag trunks"),
			aliases: map[string][2]string{}, defaultKey: "model", required: []string{"model"},
			enums: map[string][]string{"model": strings.Fields("e1000 e1000-82540em e1000-82544gc e1000-82545em e1000e i82551 i82557b i82559er ne2k_isa ne2k_pci pcnet rtl8139 virtio vmxnet3")}}
		for _, m := range f.enums["model"] {
			f.keys[m] = true
			f.aliases[m] = [2]string{"macaddr", "model"}
		}
		return f
	}()
	ipconfigFormat = propFormat{keys: setOf("ip gw ip6 gw6")}
	lxcNICFormat   = propFormat{keys: setOf("bridge firewall gw gw6 host-managed hwaddr ip ip6 link_down mtu name rate tag trunks type"),
		required: []string{"name"}}
	propFormatKeyRe = map[Kind]*regexp.Regexp{QEMU: regexp.MustCompile(`^(net|ipconfig)\d+$`), LXC: regexp.MustCompile(`^net\d+$`)}
)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// propStringError is check_prop's message for a config value whose
// property string its format refuses, "" if it passes: "invalid format - "
// and what pve-common src/PVE/JSONSchema.pm parse_property_string dies
// with (an unknown or duplicate key, a bare value without a default key)
// or its "format error" with check_object's errors, one
// "<param>.<key>: <message>" line each (PVE::Exception stringify). The
// trailing newline is writeError's. Only the key set, the required keys
// and enumerations are checked, not the values' formats.
func propStringError(kind Kind, param, v string) string {
	if !propFormatKeyRe[kind].MatchString(param) {
		return ""
	}
	f := lxcNICFormat
	switch {
	case kind == QEMU && strings.HasPrefix(param, "net"):
		f = qemuNICFormat
	case kind == QEMU:
		f = ipconfigFormat
	}
	res := map[string]string{}
	die := func(format string, a ...any) string { return "invalid format - " + fmt.Sprintf(format, a...) }
	for _, part := range strings.Split(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, val, hasEq := strings.Cut(part, "=")
		switch {
		case hasEq && k != "" && val != "":
			if _, dup := res[k]; dup {
				return die("duplicate key in comma-separated list property: %s", k)
			}
			if a, ok := f.aliases[k]; ok {
				if _, dup := res[a[1]]; dup {
					return die("key alias '%s' is already defined", a[1])
				}
				res[a[1]] = k
				k = a[0]
				if _, dup := res[k]; dup {
					return die("key '%s' is already defined (via alias)", k)
				}
			}
			if !f.keys[k] {
				return die("invalid key in comma-separated list property: %s", k)
			}
			res[k] = val
		case !hasEq:
			if f.defaultKey == "" {
				return die("value without key, but schema does not define a default key")
			}
			if _, dup := res[f.defaultKey]; dup {
				return die("duplicate key in comma-separated list property: %s", f.defaultKey)
			}
			res[f.defaultKey] = part
		default:
			return die("missing key in comma-separated list property")
		}
	}
	errs := map[string]string{}
	for _, k := range f.required {
		if _, ok := res[k]; !ok {
			errs[param+"."+k] = "property is missing and it is not optional"
		}
	}
	for k, vals := range f.enums {
		if x, ok := res[k]; ok && !slices.Contains(vals, x) {
			errs[param+"."+k] = fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", x, strings.Join(vals, ", "))
		}
	}
	if len(errs) == 0 {
		return ""
	}
	lines := make([]string, 0, len(errs))
	for k, m := range errs {
		lines = append(lines, k+": "+m)
	}
	sort.Strings(lines)
	return "invalid format - format error\n" + strings.Join(lines, "\n")
}

package pvesim

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Behaviours other Proxmox clients (Terraform's bpg provider, go-proxmox's
// integration suite) rely on: volume attributes, path normalisation,
// repeated form keys, container interfaces, NIC and disk canonicalisation,
// appliance downloads. Each follows the Perl source named beside it.

// compatRoutes registers the endpoints of this file and compat_storage.go.
func (s *Sim) compatRoutes(mux *http.ServeMux) {
	// pve-storage API2/Storage/Status.pm mounts Content with
	// fragmentDelimiter '': the volume id is the rest of the path, slashes
	// included ("local:vztmpl/x.tar.zst").
	s.handle(mux, "GET /nodes/{node}/storage/{storage}/content/{volume...}", s.volumeInfo)
	// Without its own pattern the list would answer ServeMux's 307 to
	// ".../content/", which normalizeAPIPath turns back into ".../content".
	s.handle(mux, "GET /nodes/{node}/storage/{storage}/content", s.listContent)
	s.handle(mux, "GET /nodes/{node}/lxc/{vmid}/interfaces", s.lxcInterfaces)
	s.handle(mux, "POST /nodes/{node}/aplinfo", s.aplDownload)
}

// ---- paths ------------------------------------------------------------------

// normalizeAPIPath serves a path as pve-http-server does: it URI-unescapes
// the path (PVE::APIServer::AnyEvent::handle_request) and
// PVE::RESTHandler::find_handler splits it on /+, skipping empty
// fragments, so "…/qemu/600/" and "…/lxc/9001//clone" are "…/qemu/600" and
// "…/lxc/9001/clone". Go's ServeMux would answer them 501 or with a 307
// redirect (the client then sends the mutation twice).
func normalizeAPIPath(r *http.Request) {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/api2/") {
		return
	}
	np := "/" + strings.Join(strings.FieldsFunc(p, func(c rune) bool { return c == '/' }), "/")
	if np == p && r.URL.RawPath == "" {
		return
	}
	u := *r.URL
	u.Path, u.RawPath = np, ""
	r.URL = &u
}

// ---- repeated parameters ----------------------------------------------------

// listParams are parameters of a "-list" format ("pve-configid-list",
// "pve-tag-list", "address-list", …) that PVE::RESTHandler's
// normalize_legacy_param_formats joins with ',' when given more than once.
var listParams = map[string]bool{"delete": true, "revert": true, "tags": true, "nameserver": true}

// metaParamTypes are the JSON schema types of request parameters that are
// not config keys.
var metaParamTypes = map[string]string{"vmid": "integer", "newid": "integer", "full": "boolean",
	"force": "boolean", "purge": "boolean", "skiplock": "boolean", "start": "boolean",
	"background_delay": "integer", "destroy-unreferenced-disks": "boolean", "current": "boolean"}

// multiParam reduces a parameter given more than once (a form key
// repeated, a JSON array) as Proxmox does: pve-http-server's
// decode_urlencoded makes an array of it, normalize_legacy_param_formats
// joins the array with ',' for "-list" formats, and the schema check
// refuses it for any other type ("type check ('string') failed - got
// ARRAY"). array is set for a JSON array, an array whatever its length.
func multiParam(path, key string, vals []string, array bool) (string, error) {
	if len(vals) == 1 && !array {
		return vals[0], nil
	}
	lxc := strings.Contains(path, "/lxc")
	if listParams[key] || (key == "searchdomain" && lxc) {
		return strings.Join(vals, ","), nil
	}
	typ, known := metaParamTypes[key]
	if !known {
		kind := QEMU
		if lxc {
			kind = LXC
		}
		if spec, ok := specFor(kind, key); ok {
			known = true
			typ = map[ptype]string{tInt: "integer", tBool: "boolean", tNumber: "number"}[spec.t]
			if typ == "" {
				typ = "string"
			}
		}
	}
	if !known {
		// Not in the schema: its own error follows from the last value.
		return vals[len(vals)-1], nil
	}
	return "", paramErr1(key, "type check ('%s') failed - got ARRAY", typ)
}

// ---- NICs ---------------------------------------------------------------

// qemuNICModels is qemu-server's $nic_model_list (QemuServer/Network.pm).
var qemuNICModels = map[string]bool{"e1000": true, "e1000-82540em": true, "e1000-82544gc": true,
	"e1000-82545em": true, "e1000e": true, "i82551": true, "i82557b": true, "i82559er": true,
	"ne2k_isa": true, "ne2k_pci": true, "pcnet": true, "rtl8139": true, "virtio": true, "vmxnet3": true}

// propList parses a property string into its keys; a part without '=' is
// the format's default key. ok is false for a string that is not one.
func propList(v, defaultKey string) (map[string]string, bool) {
	out := map[string]string{}
	for i, part := range strings.Split(v, ",") {
		k, val, has := strings.Cut(part, "=")
		if !has {
			if i != 0 || defaultKey == "" || part == "" {
				return nil, false
			}
			k, val = defaultKey, part
		}
		if _, dup := out[k]; dup || k == "" {
			return nil, false
		}
		out[k] = val
	}
	return out, true
}

// printProps prints a property string as PVE::JSONSchema's
// print_property_string does: first the given leading keys (the default
// key, then required ones), then the rest sorted.
func printProps(m map[string]string, lead ...string) string {
	var parts []string
	done := map[string]bool{}
	for _, k := range lead {
		if strings.HasPrefix(k, "=") { // the default key: its value alone
			k = k[1:]
			if v, ok := m[k]; ok {
				parts = append(parts, v)
			}
		} else if v, ok := m[k]; ok {
			parts = append(parts, k+"="+v)
		}
		done[k] = true
	}
	for _, k := range sortedKeys(m) {
		if !done[k] {
			parts = append(parts, k+"="+m[k])
		}
	}
	return strings.Join(parts, ",")
}

// canonicalNIC rewrites a netN value as Proxmox stores it, with a MAC
// generated (BC:24:11, PVE's default mac_prefix) when none is given; a
// given MAC is kept. QEMU: qemu-server's parse_net/print_net (the model
// with its MAC first, "virtio=MAC", then the other keys sorted). LXC:
// pve-container's parse_lxc_network/print_lxc_network (type=veth, name
// first as the one required key, then the rest sorted). A value that does
// not parse is returned unchanged. Caller holds s.mu (the RNG).
func (s *Sim) canonicalNIC(kind Kind, v string) string {
	if kind == QEMU {
		m, ok := propList(v, "model")
		if !ok {
			return v
		}
		for k, val := range m {
			if qemuNICModels[k] {
				if _, dup := m["model"]; dup {
					return v
				}
				delete(m, k)
				m["model"], m["macaddr"] = k, val
			}
		}
		if !qemuNICModels[m["model"]] {
			return v
		}
		if m["macaddr"] == "" {
			m["macaddr"] = s.mac()
		}
		model, mac := m["model"], m["macaddr"]
		delete(m, "model")
		delete(m, "macaddr")
		rest := printProps(m)
		if rest == "" {
			return model + "=" + mac
		}
		return model + "=" + mac + "," + rest
	}
	m, ok := propList(v, "")
	if !ok || m["name"] == "" {
		return v
	}
	m["type"] = "veth"
	if m["hwaddr"] == "" {
		m["hwaddr"] = s.mac()
	}
	return printProps(m, "name")
}

// ---- container interfaces ---------------------------------------------------

// lxcInterfaces is pve-container's GET …/lxc/{vmid}/interfaces
// (PVE::LXC::get_interfaces): the `ip --json a` of the container's network
// namespace, lo first, then one entry per netN by its name=, MACs in ip's
// lower case. A container that is not running (or does not exist: lxc-info
// fails the same way) answers null, as get_interfaces returns undef.
func (s *Sim) lxcInterfaces(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.needNode(q); err != nil {
		return nil, err
	}
	vmid, err := strconv.Atoi(q.path("vmid"))
	if err != nil || vmid < 100 || vmid > 999999999 {
		return nil, paramErr1("vmid", "type check ('integer') failed - got '%s'", q.path("vmid"))
	}
	g := s.guests[vmid]
	if g == nil || g.kind != LXC || g.node != q.path("node") || !g.running() {
		return nil, nil
	}
	out := []any{ifaceJSON("lo", "00:00:00:00:00:00", [][3]any{{"inet", "127.0.0.1", 8}, {"inet6", "::1", 128}})}
	var nets []string
	for k := range g.conf {
		if strings.HasPrefix(k, "net") {
			nets = append(nets, k)
		}
	}
	sort.Slice(nets, func(i, j int) bool {
		a, _ := strconv.Atoi(nets[i][3:])
		b, _ := strconv.Atoi(nets[j][3:])
		return a < b
	})
	for _, k := range nets {
		m, ok := propList(g.conf[k], "")
		if !ok || m["name"] == "" {
			continue
		}
		mac := strings.ToLower(m["hwaddr"])
		addrs := nicAddrs(m["ip"], m["ip6"], mac, m["ip"] == "dhcp", "inet", "inet6")
		out = append(out, ifaceJSON(m["name"], mac, addrs))
	}
	return out, nil
}

func ifaceJSON(name, mac string, addrs [][3]any) map[string]any {
	obj := map[string]any{"name": name, "hwaddr": mac, "hardware-address": mac}
	list := []map[string]any{}
	for _, a := range addrs {
		// Like get_interfaces, the last address of a family wins inet/inet6.
		obj[a[0].(string)] = fmt.Sprintf("%s/%d", a[1], a[2])
		list = append(list, map[string]any{"ip-address-type": a[0], "ip-address": a[1], "prefix": a[2]})
	}
	obj["ip-addresses"] = list
	return obj
}

// dhcpLease is the simulated DHCP server's answer for a MAC: an address
// in 10.0.0.0/8 from its last three bytes (host part never 0 or 255).
func dhcpLease(mac string) string {
	b := macBytes(mac)
	if b == nil {
		return "10.0.0.2"
	}
	last := int(b[5])
	if last == 0 || last == 255 {
		last = 2
	}
	return fmt.Sprintf("10.%d.%d.%d", b[3], b[4], last)
}

// linkLocal is the fe80::/64 EUI-64 address the kernel gives an interface.
func linkLocal(mac string) string {
	b := macBytes(mac)
	if b == nil {
		return ""
	}
	return fmt.Sprintf("fe80::%x:%x:%x:%x", uint16(b[0]^2)<<8|uint16(b[1]), uint16(b[2])<<8|0xff,
		uint16(0xfe)<<8|uint16(b[3]), uint16(b[4])<<8|uint16(b[5]))
}

func macBytes(mac string) []byte {
	parts := strings.Split(mac, ":")
	if len(parts) != 6 {
		return nil
	}
	b := make([]byte, 6)
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return nil
		}
		b[i] = byte(n)
	}
	return b
}

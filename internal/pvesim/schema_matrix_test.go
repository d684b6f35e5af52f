package pvesim_test

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/converge-pve/converge/internal/pveschema"
	"github.com/converge-pve/converge/internal/pvesim"
)

// The schema matrix: derived from the simulator's route table and the
// rules generated from Proxmox's API schema (package pveschema, pve-docs
// 9.1.3), so a new route is covered without a new test. pve-common
// src/PVE/JSONSchema.pm check_object / check_prop give the messages.

// servedOp is one API schema operation the simulator serves, with a
// concrete path to it.
type servedOp struct {
	op   *pveschema.Operation
	path string
}

// pathValue is a path parameter's value in the matrix: the stopped VM
// (101) or stopped CT (105) of Options{Guests: 6}, pool "web", ….
func pathValue(tmpl, name string) string {
	switch name {
	case "node":
		return "pve1"
	case "vmid":
		if strings.Contains(tmpl, "/lxc/") {
			return "105"
		}
		return "101"
	case "storage":
		return "local"
	case "volume":
		return "local:iso%2Fx.iso"
	case "upid":
		return "UPID:pve1:00000001:00000001:00000001:qmstart:101:root@pam:"
	case "sid":
		return "vm:101"
	case "snapname":
		return "snap1"
	case "poolid":
		return "web"
	}
	return "x"
}

// servedOps maps the simulator's registered patterns to the schema's
// operations; {action} stands for each literal the schema has there
// (status/start, status/stop, …).
func servedOps(t *testing.T, s *pvesim.Sim) []servedOp {
	t.Helper()
	var out []servedOp
	for _, pattern := range s.ServedPatterns() {
		method, tmpl, _ := strings.Cut(strings.ReplaceAll(pattern, "...}", "}"), " ")
		n := 0
		for i := range pveschema.Operations() {
			o := &pveschema.Operations()[i]
			if o.Method != method || !sameTemplate(tmpl, o.Path) {
				continue
			}
			segs := strings.Split(o.Path, "/")
			for j, seg := range segs {
				if name, ok := strings.CutPrefix(seg, "{"); ok {
					segs[j] = pathValue(o.Path, strings.TrimSuffix(name, "}"))
				}
			}
			out = append(out, servedOp{op: o, path: strings.Join(segs, "/")})
			n++
		}
		if n == 0 {
			t.Errorf("%s: served, but not in the API schema", pattern)
		}
	}
	return out
}

// sameTemplate: the schema's path equals the pattern's, an {action}
// segment matching any literal.
func sameTemplate(pattern, schema string) bool {
	a, b := strings.Split(pattern, "/"), strings.Split(schema, "/")
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && (a[i] != "{action}" || strings.HasPrefix(b[i], "{")) {
			return false
		}
	}
	return true
}

// send makes a request with params in the query (GET, DELETE) or a form
// body, and returns its status and errors.
func send(t *testing.T, s *pvesim.Sim, method, path string, params url.Values) (int, map[string]any) {
	t.Helper()
	u, body := s.URL()+path, ""
	if method == "GET" || method == "DELETE" {
		u += "?" + params.Encode()
	} else {
		body = params.Encode()
	}
	hdr := tokenHdr()
	if body != "" {
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
	}
	res, m := raw(t, method, u, hdr, body)
	errs, _ := m["errors"].(map[string]any)
	return res.StatusCode, errs
}

// state is what a refused request must leave alone: guests (configs,
// digests, status, locks), pools, HA resources and the task list.
func state(t *testing.T, s *pvesim.Sim) string {
	t.Helper()
	_, tasks := raw(t, "GET", s.URL()+"/cluster/tasks", tokenHdr(), "")
	b, err := json.Marshal([]any{s.Guests(), s.Pools(), s.HAResources(), len(fmt.Sprint(tasks["data"]))}, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func isPathParam(o *pveschema.Operation, name string) bool {
	return strings.Contains(o.Path, "{"+name+"}")
}

// TestSchemaMatrixUndeclared: every served operation refuses an
// undeclared parameter with check_object's message and changes nothing,
// in PVE 7 mode too (the same rules apply there), and in PVE 9 mode, which
// serves more (the HA rules, GET lxc …/migrate).
func TestSchemaMatrixUndeclared(t *testing.T) {
	for _, version := range []string{"9", "8", "7"} {
		s := startSim(t, pvesim.Options{Guests: 6, Pools: []string{"web"}, Version: version})
		before := state(t, s)
		ops := servedOps(t, s)
		for _, so := range ops {
			if so.op.AdditionalProperties { // none in 9.1.3; the schema would allow it
				continue
			}
			code, errs := send(t, s, so.op.Method, so.path, url.Values{"bogus-param": {"1"}})
			if code != 400 || errs["bogus-param"] != undeclared {
				t.Errorf("PVE %s: %s %s bogus-param: %d %v", version, so.op.Method, so.op.Path, code, errs)
			}
		}
		if after := state(t, s); after != before {
			t.Errorf("PVE %s: refused requests changed the state:\n%s\n%s", version, before, after)
		}
		t.Logf("PVE %s: %d operations", version, len(ops))
	}
}

// TestSchemaMatrixEnums: every declared enumeration of a served
// operation refuses a value outside it.
func TestSchemaMatrixEnums(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6, Pools: []string{"web"}})
	before := state(t, s)
	n := 0
	for _, so := range servedOps(t, s) {
		for _, p := range so.op.Params {
			if len(p.Enum) == 0 || isPathParam(so.op, p.Name) || strings.HasSuffix(p.Name, "[n]") {
				continue
			}
			n++
			code, errs := send(t, s, so.op.Method, so.path, url.Values{p.Name: {"zz-unlisted"}})
			want := "value 'zz-unlisted' does not have a value in the enumeration '" + strings.Join(p.Enum, ", ") + "'\n"
			if p.Type != "string" {
				want = "type check ('" + p.Type + "') failed - got 'zz-unlisted'\n"
			}
			if code != 400 || errs[p.Name] != want {
				t.Errorf("%s %s %s=zz-unlisted: %d %q", so.op.Method, so.op.Path, p.Name, code, errs[p.Name])
			}
		}
	}
	if after := state(t, s); after != before {
		t.Errorf("refused requests changed the state:\n%s\n%s", before, after)
	}
	t.Logf("%d enumerations", n)
}

// TestSchemaMatrixRanges: every declared integer or number range of a
// served operation refuses a value below its minimum and above its
// maximum.
func TestSchemaMatrixRanges(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6, Pools: []string{"web"}})
	before := state(t, s)
	n := 0
	for _, so := range servedOps(t, s) {
		for _, p := range so.op.Params {
			if (p.Type != "integer" && p.Type != "number") || isPathParam(so.op, p.Name) || (!p.HasMin && !p.HasMax) {
				continue
			}
			name := strings.Replace(p.Name, "[n]", "0", 1)
			n++
			check := func(v float64, word string) {
				t.Helper()
				val := strconv.FormatFloat(v, 'f', -1, 64)
				code, errs := send(t, s, so.op.Method, so.path, url.Values{name: {val}})
				lim := p.Min
				if word == "maximum" {
					lim = p.Max
				}
				want := "value must have a " + word + " value of " + strconv.FormatFloat(lim, 'f', -1, 64) + "\n"
				if code != 400 || errs[name] != want {
					t.Errorf("%s %s %s=%s: %d %q", so.op.Method, so.op.Path, name, val, code, errs[name])
				}
			}
			if p.HasMin {
				check(p.Min-1, "minimum")
			}
			if p.HasMax {
				check(p.Max+1, "maximum")
			}
		}
	}
	if after := state(t, s); after != before {
		t.Errorf("refused requests changed the state:\n%s\n%s", before, after)
	}
	t.Logf("%d ranges", n)
}

// configOptions are PUT /nodes/{node}/{qemu,lxc}/{vmid}/config's
// parameters that are not config keys (API schema).
var configOptions = []string{"delete", "digest", "force", "node", "revert", "skiplock", "vmid"}

// TestSchemaMatrixConfigKeys: every config key the API schema declares for
// PUT /nodes/{node}/{qemu,lxc}/{vmid}/config is stored, set with a value
// valid by its rule and read back the same by GET …/config.
func TestSchemaMatrixConfigKeys(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	n := 0
	for _, c := range []struct{ kind, vmid string }{{"qemu", "101"}, {"lxc", "105"}} {
		path := "/nodes/pve1/" + c.kind + "/" + c.vmid + "/config"
		op, _, ok := pveschema.Lookup("PUT", path)
		if !ok {
			t.Fatalf("PUT %s not in the schema", path)
		}
		for _, p := range op.Params {
			name := strings.Replace(p.Name, "[n]", "1", 1)
			if slices.Contains(configOptions, p.Name) || p.Alias != "" {
				continue
			}
			if why, skip := configKeySkips[c.kind+" "+p.Name]; skip {
				t.Logf("%s %s skipped: %s", c.kind, p.Name, why)
				continue
			}
			val := sampleValue(c.kind, name, &p)
			n++
			if code, errs := send(t, s, "PUT", path, url.Values{name: {val}}); code != 200 {
				t.Errorf("%s %s=%q: %d %v", c.kind, name, val, code, errs)
				continue
			}
			_, m := raw(t, "GET", s.URL()+path, tokenHdr(), "")
			d, _ := m["data"].(map[string]any)
			want := val
			if c.kind == "lxc" && name == "description" {
				want += "\n" // pct writes a CT's description as a comment block, read back with its newline
			}
			if got := fmt.Sprint(d[name]); got != want {
				t.Errorf("%s %s=%q read back %q", c.kind, name, val, got)
			}
			if name == "lock" { // the guest is locked now; unlock it for the next keys
				id, _ := strconv.Atoi(c.vmid)
				if err := s.UnlockGuest(id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d config keys", n)
}

// configKeySkips are the config keys the round trip leaves out, each with
// its reason.
var configKeySkips = map[string]string{
	"qemu cdrom": "an alias: qemu-server stores it as ide2 ($resolve_cdrom_alias), pinned by TestDeclaredConfigKeysAccepted",
}

// samples are values for config keys whose rule (a named format or a
// pattern) gives no value by itself; each is valid by that rule.
var samples = map[string]string{
	"affinity": "0-1", "amd-sev": "type=std", "bootdisk": "scsi0", "boot": "order=scsi0",
	"cicustom": "user=local:snippets/u.yaml", "cpu": "host", "hookscript": "local:snippets/hook.pl",
	"hostpci1": "0000:01:00.0", "hotplug": "network,disk", "intel-tdx": "type=tdx",
	"ipconfig1": "ip=dhcp", "name": "vm-x", "hostname": "ct-x", "nameserver": "10.0.0.1",
	"parallel1": "/dev/parport0", "rng0": "source=/dev/urandom", "searchdomain": "example.com",
	"serial1": "socket", "smbios1": "uuid=6a3bd9a3-7b4b-4c1b-9b6c-1f7d4a5e7c01", "sshkeys": "ssh-ed25519%20AAAA",
	"startdate": "now", "startup": "order=1", "tags": "a;b", "timezone": "Europe/Berlin",
	"vmgenid": "6a3bd9a3-7b4b-4c1b-9b6c-1f7d4a5e7c02", "vmstatestorage": "local", "watchdog": "model=i6300esb",
	"entrypoint": "/sbin/init", "env": "A=1", "args": "-no-reboot", "ciuser": "admin", "cipassword": "secret",
	"description": "text", "vga": "std", "machine": "q35", "memory": "1024", "agent": "1",
	"numa1": "cpus=0", "virtiofs1": "dirid=share1",
	// A NIC with its MAC given: without one the simulator generates it,
	// as qemu-server and pct do.
	"qemu net1":    "virtio=BC:24:11:00:00:01,bridge=vmbr0",
	"lxc net1":     "name=eth1,bridge=vmbr0,hwaddr=BC:24:11:00:00:02,type=veth",
	"qemu unused1": "local-lvm:vm-101-disk-9", "lxc unused1": "local-lvm:vm-105-disk-9",
}

// sampleValue is a value valid by p's rule: samples, else the
// enumeration's first value, a boolean's 1, an integer's or number's
// minimum (1 without one), a property string of its required keys.
func sampleValue(kind, name string, p *pveschema.Param) string {
	if v, ok := samples[kind+" "+name]; ok {
		return v
	}
	if v, ok := samples[name]; ok {
		return v
	}
	switch {
	case len(p.Enum) > 0:
		return p.Enum[0]
	case p.Type == "boolean":
		return "1"
	case p.Type == "integer" || p.Type == "number":
		if p.HasMin && p.Min > 0 {
			return strconv.FormatFloat(p.Min, 'f', -1, 64)
		}
		return "1"
	case p.Props != nil:
		var parts []string
		for _, k := range p.Props.Keys {
			if k.Optional || k.Alias != "" {
				continue
			}
			kv := sampleValue(kind, name+"."+k.Name, &k)
			if k.DefaultKey {
				parts = append([]string{kv}, parts...)
			} else {
				parts = append(parts, k.Name+"="+kv)
			}
		}
		return strings.Join(parts, ",")
	}
	return "x"
}

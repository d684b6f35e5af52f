package pvesim_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

const undeclared = "property is not defined in schema and the schema does not allow additional properties\n"

// wantUndeclared checks a 400 naming exactly the given parameters as
// undeclared.
func wantUndeclared(t *testing.T, s *pvesim.Sim, method, path, body string, params ...string) {
	t.Helper()
	res, m := raw(t, method, s.URL()+path, tokenHdr(), body)
	if res.StatusCode != 400 || res.Status != "400 Parameter verification failed." {
		t.Fatalf("%s %s %q: %s %v", method, path, body, res.Status, m)
	}
	errs, _ := m["errors"].(map[string]any)
	if len(errs) != len(params) || m["data"] != nil {
		t.Fatalf("%s %s %q: errors %v, want %v", method, path, body, errs, params)
	}
	for _, p := range params {
		if errs[p] != undeclared {
			t.Fatalf("%s %s %q: errors[%s] = %q", method, path, body, p, errs[p])
		}
	}
}

// TestUndeclaredParamsRefused: every operation refuses a parameter its
// schema does not declare, before it changes anything (pve-common
// src/PVE/JSONSchema.pm check_object, additionalProperties 0 on every
// operation). A guest DELETE with an unknown parameter used to destroy
// the guest.
func TestUndeclaredParamsRefused(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6}) // 101 a stopped VM, 105 a stopped CT
	// API schema: DELETE /nodes/{node}/qemu/{vmid} declares
	// destroy-unreferenced-disks, node, purge, skiplock, vmid.
	wantUndeclared(t, s, "DELETE", "/nodes/pve1/qemu/101?bogus=1", "", "bogus")
	// API schema: DELETE /nodes/{node}/lxc/{vmid} declares
	// destroy-unreferenced-disks, force, node, purge, vmid: no skiplock.
	wantUndeclared(t, s, "DELETE", "/nodes/pve1/lxc/105?skiplock=1&x=1", "", "skiplock", "x")
	for _, id := range []int{101, 105} {
		if _, ok := s.Guest(id); !ok {
			t.Fatalf("guest %d destroyed by a refused DELETE", id)
		}
	}
	// API schema: POST /nodes/{node}/qemu/{vmid}/status/start (per action).
	wantUndeclared(t, s, "POST", "/nodes/pve1/qemu/101/status/start", "forceStop=1", "forceStop")
	if g, _ := s.Guest(101); g.Status != "stopped" {
		t.Fatalf("refused start ran: %s", g.Status)
	}
	// API schema: PUT /nodes/{node}/lxc/{vmid}/config declares no
	// skiplock; all of check_object's errors come in one answer.
	wantUndeclared(t, s, "PUT", "/nodes/pve1/lxc/105/config", "skiplock=1&cores=2", "skiplock")
	res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/lxc/105/config", tokenHdr(), "bogus=1&cores=x")
	if errs, _ := m["errors"].(map[string]any); res.StatusCode != 400 || errs["bogus"] != undeclared || errs["cores"] != "type check ('integer') failed - got 'x'\n" {
		t.Fatalf("both errors: %s %v", res.Status, m)
	}
	// API schema: POST /nodes/{node}/qemu declares no "meta" (qemu-server
	// writes it itself); POST /nodes/{node}/qemu/{vmid}/clone no "bogus".
	wantUndeclared(t, s, "POST", "/nodes/pve1/qemu", "vmid=900&meta=x", "meta")
	wantUndeclared(t, s, "POST", "/nodes/pve1/qemu/101/clone", "newid=901&bogus=1", "bogus")
	for _, id := range []int{900, 901} {
		if _, ok := s.Guest(id); ok {
			t.Fatalf("guest %d created by a refused call", id)
		}
	}
	// API schema: POST /cluster/ha/resources, GET /cluster/resources,
	// POST /nodes/{node}/qemu/{vmid}/migrate.
	wantUndeclared(t, s, "POST", "/cluster/ha/resources", "sid=vm:101&nodes=pve1", "nodes")
	wantUndeclared(t, s, "GET", "/cluster/resources?type=vm&full=1", "", "full")
	wantUndeclared(t, s, "POST", "/nodes/pve1/qemu/101/migrate", "target=pve2&restart=1", "restart")
	// Declared parameters still pass: LXC force on DELETE.
	res, m = raw(t, "DELETE", s.URL()+"/nodes/pve1/lxc/105?force=1&purge=1", tokenHdr(), "")
	if res.StatusCode != 200 {
		t.Fatalf("declared parameters: %s %v", res.Status, m)
	}
}

// TestDeclaredEnums: a value outside a parameter's enumeration is a 400
// that changes nothing (pve-common src/PVE/JSONSchema.pm check_prop,
// "does not have a value in the enumeration").
func TestDeclaredEnums(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6, Nodes: 2})
	enumErr := func(method, path, body, param, want string) {
		t.Helper()
		res, m := raw(t, method, s.URL()+path, tokenHdr(), body)
		errs, _ := m["errors"].(map[string]any)
		if res.StatusCode != 400 || len(errs) != 1 || errs[param] != want {
			t.Fatalf("%s %s %q: %s %v", method, path, body, res.Status, m)
		}
	}
	g, _ := s.Guest(101) // a stopped VM on pve2
	// API schema: POST /nodes/{node}/qemu/{vmid}/migrate, migration_type
	// enum secure|insecure.
	enumErr("POST", "/nodes/"+g.Node+"/qemu/101/migrate", "target=pve1&migration_type=fast", "migration_type",
		"value 'fast' does not have a value in the enumeration 'secure, insecure'\n")
	if g2, _ := s.Guest(101); g2.Node != g.Node || g2.Lock != "" {
		t.Fatalf("refused migrate changed the guest: %+v", g2)
	}
	// API schema: PUT /nodes/{node}/qemu/{vmid}/config, bios enum
	// seabios|ovmf; POST /nodes/{node}/lxc, cmode enum shell|console|tty.
	enumErr("PUT", "/nodes/"+g.Node+"/qemu/101/config", "bios=uefi", "bios",
		"value 'uefi' does not have a value in the enumeration 'seabios, ovmf'\n")
	enumErr("POST", "/nodes/pve1/lxc", "vmid=950&ostemplate=local:vztmpl/x.tar.zst&cmode=ssh", "cmode",
		"value 'ssh' does not have a value in the enumeration 'shell, console, tty'\n")
	// API schema: GET /nodes/{node}/tasks, source enum archive|active|all.
	enumErr("GET", "/nodes/pve1/tasks?source=old", "", "source",
		"value 'old' does not have a value in the enumeration 'archive, active, all'\n")
	// Declared values pass: an insecure migration.
	res, m := raw(t, "POST", s.URL()+"/nodes/"+g.Node+"/qemu/101/migrate", tokenHdr(), "target=pve1&migration_type=insecure")
	if res.StatusCode != 200 {
		t.Fatalf("insecure migration: %s %v", res.Status, m)
	}
}

// TestBooleanParams: a boolean parameter is the text 1 or 0, or a JSON
// true/false; "true" in a form body or as a JSON string is a 400
// (pve-common src/PVE/JSONSchema.pm check_type, boolean: $value eq '1' or
// '0', or JSON::is_bool).
func TestBooleanParams(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	boolErr := func(method, path string, hdr map[string]string, body, param, got string) {
		t.Helper()
		res, m := raw(t, method, s.URL()+path, hdr, body)
		errs, _ := m["errors"].(map[string]any)
		if res.StatusCode != 400 || errs[param] != "type check ('boolean') failed - got '"+got+"'\n" {
			t.Fatalf("%s %s %q: %s %v", method, path, body, res.Status, m)
		}
	}
	jsonHdr := tokenHdr()
	jsonHdr["Content-Type"] = "application/json"
	// API schema: PUT /nodes/{node}/qemu/{vmid}/config, onboot boolean.
	boolErr("PUT", "/nodes/pve1/qemu/100/config", tokenHdr(), "onboot=true", "onboot", "true")
	boolErr("PUT", "/nodes/pve1/qemu/100/config", jsonHdr, `{"onboot":"yes"}`, "onboot", "yes")
	// API schema: DELETE /nodes/{node}/qemu/{vmid}, purge boolean.
	boolErr("DELETE", "/nodes/pve1/qemu/103?purge=true", tokenHdr(), "", "purge", "true")
	if _, ok := s.Guest(103); !ok {
		t.Fatal("refused DELETE destroyed the guest")
	}
	for _, body := range []string{`{"onboot":true}`, `{"onboot":"0"}`} {
		if res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/100/config", jsonHdr, body); res.StatusCode != 200 {
			t.Fatalf("%s: %s %v", body, res.Status, m)
		}
	}
	if res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/100/config", tokenHdr(), "onboot=1"); res.StatusCode != 200 {
		t.Fatalf("onboot=1: %s %v", res.Status, m)
	}
}

// TestAgentEnabledPropBool: the agent property string's "enabled" is read
// with parse_boolean (pve-common src/PVE/JSONSchema.pm parse_boolean:
// 1|on|yes|true, any case; qemu-server reads the agent option with
// parse_property_string), so enabled=On counts as enabled.
func TestAgentEnabledPropBool(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	if res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/101/config", tokenHdr(), "agent=enabled%3DOn"); res.StatusCode != 200 {
		t.Fatalf("agent: %s %v", res.Status, m)
	}
	if res, m := raw(t, "POST", s.URL()+"/nodes/pve1/qemu/101/status/start", tokenHdr(), ""); res.StatusCode != 200 {
		t.Fatalf("start: %s %v", res.Status, m)
	}
	res, m := raw(t, "GET", s.URL()+"/nodes/pve1/qemu/101/agent/network-get-interfaces", tokenHdr(), "")
	if res.StatusCode != 200 {
		t.Fatalf("agent with enabled=On: %s %v", res.Status, m)
	}
}

// TestPropertyStringKeys: a NIC or ipconfig value with a key its format
// does not declare, or a QEMU NIC without a model, is a 400 naming the
// parameter (pve-common src/PVE/JSONSchema.pm parse_property_string: "invalid
// key in comma-separated list property: <key>", and check_object's errors
// as "format error\n<param>.<key>: ..."; check_prop prefixes "invalid
// format - "). Formats: API schema PUT /nodes/{node}/qemu/{vmid}/config
// net[n], PUT /nodes/{node}/lxc/{vmid}/config net[n]; qemu-server
// src/PVE/QemuServer/Network.pm $ipconfig_fmt (ip, gw, ip6, gw6).
func TestPropertyStringKeys(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	g, _ := s.Guest(101)
	for _, c := range []struct{ path, body, param, want string }{
		{"/nodes/pve1/qemu/101/config", "net0=virtio,bridge=vmbr0,speed=10", "net0",
			"invalid format - invalid key in comma-separated list property: speed\n"},
		{"/nodes/pve1/qemu/101/config", "ipconfig0=ip=dhcp,dns=1.1.1.1", "ipconfig0",
			"invalid format - invalid key in comma-separated list property: dns\n"},
		{"/nodes/pve1/qemu/101/config", "net1=bridge=vmbr0,firewall=1", "net1",
			"invalid format - format error\nnet1.model: property is missing and it is not optional\n"},
		{"/nodes/pve1/qemu/101/config", "net1=model=virtio9,bridge=vmbr0", "net1",
			"invalid format - format error\nnet1.model: value 'virtio9' does not have a value in the enumeration 'e1000, e1000-82540em, e1000-82544gc, e1000-82545em, e1000e, i82551, i82557b, i82559er, ne2k_isa, ne2k_pci, pcnet, rtl8139, virtio, vmxnet3'\n"},
		{"/nodes/pve1/lxc/105/config", "net0=name=eth0,bridge=vmbr0,model=virtio", "net0",
			"invalid format - invalid key in comma-separated list property: model\n"},
		{"/nodes/pve1/lxc/105/config", "net1=bridge=vmbr0", "net1",
			"invalid format - format error\nnet1.name: property is missing and it is not optional\n"},
	} {
		res, m := raw(t, "PUT", s.URL()+c.path, tokenHdr(), c.body)
		errs, _ := m["errors"].(map[string]any)
		if res.StatusCode != 400 || len(errs) != 1 || errs[c.param] != c.want {
			t.Fatalf("%s %q: %s %q", c.path, c.body, res.Status, errs)
		}
	}
	if g2, _ := s.Guest(101); g2.Digest != g.Digest {
		t.Fatal("a refused write changed the config")
	}
	// Declared keys pass: a model given as the default key or as model=,
	// and every ipconfig key.
	for _, body := range []string{"net1=e1000,bridge=vmbr0,tag=5", "net2=model=virtio,bridge=vmbr0,queues=2",
		"ipconfig1=ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto,gw6=fe80::1"} {
		if res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/101/config", tokenHdr(), body); res.StatusCode != 200 {
			t.Fatalf("%q: %s %v", body, res.Status, m)
		}
	}
}

// TestHAResourceOptions: an HA resource takes and keeps max_restart,
// max_relocate (integers, minimum 0) and failback (boolean); delete
// removes them (API schema: POST /cluster/ha/resources, PUT and GET
// /cluster/ha/resources/{sid}).
func TestHAResourceOptions(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	if res, m := raw(t, "POST", s.URL()+"/cluster/ha/resources", tokenHdr(), "sid=vm:101&max_restart=3&max_relocate=0&failback=0"); res.StatusCode != 200 {
		t.Fatalf("create: %s %v", res.Status, m)
	}
	read := func() map[string]any {
		_, m := raw(t, "GET", s.URL()+"/cluster/ha/resources/vm:101", tokenHdr(), "")
		d, _ := m["data"].(map[string]any)
		return d
	}
	if d := read(); d["max_restart"] != 3.0 || d["max_relocate"] != 0.0 || d["failback"] != 0.0 {
		t.Fatalf("created: %v", d)
	}
	res, m := raw(t, "PUT", s.URL()+"/cluster/ha/resources/vm:101", tokenHdr(), "max_restart=-1&failback=true")
	if errs, _ := m["errors"].(map[string]any); res.StatusCode != 400 || errs["max_restart"] != "value must have a minimum value of 0\n" ||
		errs["failback"] != "type check ('boolean') failed - got 'true'\n" {
		t.Fatalf("bad options: %s %v", res.Status, m)
	}
	if res, m := raw(t, "PUT", s.URL()+"/cluster/ha/resources/vm:101", tokenHdr(), "max_relocate=2&delete=max_restart"); res.StatusCode != 200 {
		t.Fatalf("update: %s %v", res.Status, m)
	}
	if d := read(); d["max_restart"] != nil || d["max_relocate"] != 2.0 || d["failback"] != 0.0 {
		t.Fatalf("updated: %v", d)
	}
}

// TestDeclaredConfigKeysAccepted: config keys the API schema declares are
// stored even where the simulator does not model them, with their schema
// type; sockets has no maximum (API schema: PUT
// /nodes/{node}/qemu/{vmid}/config sockets "minimum 1", allow-ksm
// boolean, virtiofs[n]; PUT /nodes/{node}/lxc/{vmid}/config entrypoint,
// env). cdrom is ide2 with media=cdrom (qemu-server src/PVE/API2/Qemu.pm
// $resolve_cdrom_alias).
func TestDeclaredConfigKeysAccepted(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	put := func(path, body string) {
		t.Helper()
		if res, m := raw(t, "PUT", s.URL()+path, tokenHdr(), body); res.StatusCode != 200 {
			t.Fatalf("%s %q: %s %v", path, body, res.Status, m)
		}
	}
	put("/nodes/pve1/qemu/101/config", "sockets=8&cores=2048&allow-ksm=0&tdf=1&amd-sev=type%3Dstd&virtiofs0=dirid%3Dshare1&cdrom=local:iso/x.iso")
	put("/nodes/pve1/lxc/105/config", "entrypoint=/sbin/init&env=A%3D1")
	g, _ := s.Guest(101)
	for k, want := range map[string]string{"sockets": "8", "cores": "2048", "allow-ksm": "0", "tdf": "1",
		"amd-sev": "type=std", "virtiofs0": "dirid=share1", "ide2": "local:iso/x.iso,media=cdrom"} {
		if g.Config[k] != want {
			t.Fatalf("%s = %q, want %q (config %v)", k, g.Config[k], want, g.Config)
		}
	}
	if _, ok := g.Config["cdrom"]; ok {
		t.Fatal("cdrom stored under its alias")
	}
	if ct, _ := s.Guest(105); ct.Config["entrypoint"] != "/sbin/init" || ct.Config["env"] != "A=1" {
		t.Fatalf("LXC config %v", ct.Config)
	}
	res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/101/config", tokenHdr(), "allow-ksm=yes&smp=0")
	if errs, _ := m["errors"].(map[string]any); res.StatusCode != 400 || errs["allow-ksm"] != "type check ('boolean') failed - got 'yes'\n" ||
		errs["smp"] != "value must have a minimum value of 1\n" {
		t.Fatalf("typed new keys: %s %v", res.Status, m)
	}
}

// TestDeclaredOptionsWithoutEffect: parameters the API schema declares
// that the simulator does not model are accepted and change nothing else
// (API schema: POST /nodes/{node}/qemu bwlimit, ha-managed; POST
// /nodes/{node}/qemu/{vmid}/config import-working-storage); they are
// not config keys. A JSON body's numbers are checked as their text
// (pve-common src/PVE/JSONSchema.pm check_type, integer: m/^-?\d+$/),
// so a JSON 0 for cores is below its minimum.
func TestDeclaredOptionsWithoutEffect(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6})
	res, m := raw(t, "POST", s.URL()+"/nodes/pve1/qemu", tokenHdr(), "vmid=910&bwlimit=100&ha-managed=0&cores=2")
	if res.StatusCode != 200 {
		t.Fatalf("create: %s %v", res.Status, m)
	}
	if res, m := raw(t, "POST", s.URL()+"/nodes/pve1/qemu/101/config", tokenHdr(), "import-working-storage=local&cores=3"); res.StatusCode != 200 {
		t.Fatalf("config: %s %v", res.Status, m)
	}
	if g, _ := s.Guest(101); g.Config["cores"] != "3" || g.Config["import-working-storage"] != "" {
		t.Fatalf("config %v", g.Config)
	}
	jsonHdr := tokenHdr()
	jsonHdr["Content-Type"] = "application/json"
	res, m = raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/101/config", jsonHdr, `{"cores":0,"sockets":2}`)
	if errs, _ := m["errors"].(map[string]any); res.StatusCode != 400 || len(errs) != 1 || errs["cores"] != "value must have a minimum value of 1\n" {
		t.Fatalf("JSON cores 0: %s %v", res.Status, m)
	}
	if res, m := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/101/config", jsonHdr, `{"cores":4,"numa":true}`); res.StatusCode != 200 {
		t.Fatalf("JSON cores 4: %s %v", res.Status, m)
	}
	// A volume name with a slash is one path parameter, checked too
	// (API schema: GET /nodes/{node}/storage/{storage}/content/{volume}).
	wantUndeclared(t, s, "GET", "/nodes/pve1/storage/local/content/local:iso/x.iso?bogus=1", "", "bogus")
}

package events_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

func ptr[T any](v T) *T { return &v }

func TestDecodeDesiredValid(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		subject int
		want    events.Desired
	}{
		{"minimal", `{"vmid":101}`, 101, events.Desired{VMID: 101}},
		{"subject check skipped", `{"vmid":555}`, 0, events.Desired{VMID: 555}},
		{"vmid bounds low", `{"vmid":100}`, 100, events.Desired{VMID: 100}},
		{"vmid bounds high", `{"vmid":999999999}`, 999999999, events.Desired{VMID: 999999999}},
		{"every field",
			`{"vmid":101,"kind":"qemu","power":"running","cores":4,"memory_mib":8192,"name":"web-1.example.com",
			  "description":"hello","tags":["Prod","web_1","a+b.c-d"],"onboot":true,
			  "clone":{"from":9000,"node":"pve1","full":true,"storage":"local-lvm"}}`, 101,
			events.Desired{VMID: 101, Kind: ptr(events.QEMU), Power: ptr(events.PowerRunning), Cores: ptr(4), MemoryMiB: ptr(8192),
				Name: ptr("web-1.example.com"), Description: ptr("hello"), Tags: ptr([]string{"Prod", "web_1", "a+b.c-d"}),
				OnBoot: ptr(true), Clone: &events.Clone{From: 9000, Node: "pve1", Full: ptr(true), Storage: "local-lvm"}}},
		{"lxc stopped, onboot false", `{"vmid":200,"kind":"lxc","power":"stopped","onboot":false}`, 200,
			events.Desired{VMID: 200, Kind: ptr(events.LXC), Power: ptr(events.PowerStopped), OnBoot: ptr(false)}},
		{"tags empty array means no tags", `{"vmid":101,"tags":[]}`, 101, events.Desired{VMID: 101, Tags: ptr([]string{})}},
		{"description with newlines", `{"vmid":101,"description":"line one\nline two\n\n"}`, 101,
			events.Desired{VMID: 101, Description: ptr("line one\nline two\n\n")}},
		{"empty description", `{"vmid":101,"description":""}`, 101, events.Desired{VMID: 101, Description: ptr("")}},
		{"absent with kind", `{"vmid":101,"kind":"lxc","absent":true}`, 101, events.Desired{VMID: 101, Kind: ptr(events.LXC), Absent: true}},
		{"absent false with power", `{"vmid":101,"absent":false,"power":"running"}`, 101,
			events.Desired{VMID: 101, Power: ptr(events.PowerRunning)}},
		{"clone with only from", `{"vmid":101,"clone":{"from":9000}}`, 101, events.Desired{VMID: 101, Clone: &events.Clone{From: 9000}}},
		{"member of a set", `{"vmid":101,"cores":2,"set":"web.prod-1"}`, 101, events.Desired{VMID: 101, Cores: ptr(2), Set: "web.prod-1"}},
		{"absent member of a set", `{"vmid":101,"absent":true,"set":"web"}`, 101, events.Desired{VMID: 101, Absent: true, Set: "web"}},
		{"whole guest", `{"vmid":101,"kind":"qemu","node":"pve2","pool":"","disks":{"scsi0":{"size_gib":32},"virtio15":{"size_gib":1,"storage":"ceph"}},
			"net":{"net0":{"model":"virtio","bridge":"vmbr0","tag":0,"firewall":false,"rate":12.5,"mtu":9000}},
			"cloudinit":{"user":"ops","ssh_keys":["ssh-ed25519 AAAAC3Nza ops@host"],"ipconfig":{"ipconfig0":"ip=dhcp","ipconfig1":"ip=10.0.0.5/24, gw=10.0.0.1"},"nameserver":"1.1.1.1 10.0.0.1"}}`, 101,
			events.Desired{VMID: 101, Kind: ptr(events.QEMU), Node: ptr("pve2"), Pool: ptr(""),
				Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 32}, "virtio15": {SizeGiB: 1, Storage: "ceph"}},
				Net:   map[string]events.NetWant{"net0": {Model: "virtio", Bridge: "vmbr0", Tag: ptr(0), Firewall: ptr(false), Rate: ptr(12.5), MTU: ptr(9000)}},
				CloudInit: &events.CloudInit{User: ptr("ops"), SSHKeys: ptr([]string{"ssh-ed25519 AAAAC3Nza ops@host"}),
					IPConfig: map[string]string{"ipconfig0": "ip=dhcp", "ipconfig1": "ip=10.0.0.5/24, gw=10.0.0.1"}, Nameserver: ptr("1.1.1.1 10.0.0.1")}}},
		{"container disks and net", `{"vmid":200,"kind":"lxc","disks":{"rootfs":{"size_gib":8},"mp255":{"size_gib":2,"storage":"local"}},"net":{"net0":{"name":"eth0","bridge":"vmbr1","ip":"10.1.0.2/24","gw":"10.1.0.1"}}}`, 200,
			events.Desired{VMID: 200, Kind: ptr(events.LXC), Disks: map[string]events.DiskWant{"rootfs": {SizeGiB: 8}, "mp255": {SizeGiB: 2, Storage: "local"}},
				Net: map[string]events.NetWant{"net0": {Name: "eth0", Bridge: "vmbr1", IP: "10.1.0.2/24", GW: "10.1.0.1"}}}},
		{"snapshot before", `{"vmid":101,"snapshot_before":["restart","resize"]}`, 101,
			events.Desired{VMID: 101, SnapshotBefore: []string{"restart", "resize"}}},
		{"whitespace around body", " \n{\"vmid\":101}\n", 101, events.Desired{VMID: 101}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := events.DecodeDesired([]byte(c.body), c.subject)
			if err != nil {
				t.Fatalf("DecodeDesired: %v", err)
			}
			if !reflect.DeepEqual(*got, c.want) {
				t.Fatalf("got  %s\nwant %s", mustJSON(t, got), mustJSON(t, c.want))
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecodeDesiredRejects(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		subject int
		field   string // the field a problem must name
		message string // a substring of that problem's message
	}{
		// Not JSON, or not an object.
		{"bad JSON", `{"vmid":101`, 101, "", "not valid JSON"},
		{"empty body", ``, 101, "", "not valid JSON"},
		{"trailing garbage", `{"vmid":101} x`, 101, "", "not valid JSON"},
		{"array body", `[{"vmid":101}]`, 101, "", "must be a JSON object, got array"},
		{"null body", `null`, 101, "", "must be a JSON object, got null"},
		{"missing vmid", `{"power":"running"}`, 101, "vmid", "is required"},
		// Unknown fields, at the top and inside clone.
		{"unknown field", `{"vmid":101,"cpu":4}`, 101, "cpu", "unknown field"},
		{"misspelt field", `{"vmid":101,"memory_mb":1024}`, 101, "memory_mb", "unknown field"},
		{"clone with unknown field", `{"vmid":101,"clone":{"from":9000,"bwlimit":10}}`, 101, "clone.bwlimit", "unknown field"},
		{"storage for a linked clone", `{"vmid":101,"clone":{"from":9000,"storage":"local-lvm"}}`, 101, "clone.storage", "only a full clone"},
		{"pool not an id", `{"vmid":101,"clone":{"from":9000,"pool":"my pool"}}`, 101, "clone.pool", "pool id"},
		{"clone without from", `{"vmid":101,"clone":{"node":"pve1"}}`, 101, "clone.from", "is required"},
		// The whole guest.
		{"disk key unknown", `{"vmid":101,"disks":{"scsi31":{"size_gib":8}}}`, 101, "disks.scsi31", "disk keys are"},
		{"disk without size", `{"vmid":101,"disks":{"scsi0":{"storage":"local-lvm"}}}`, 101, "disks.scsi0.size_gib", "is required"},
		{"disk size zero", `{"vmid":101,"disks":{"scsi0":{"size_gib":0}}}`, 101, "disks.scsi0.size_gib", "at least 1"},
		{"rootfs on a VM", `{"vmid":101,"kind":"qemu","disks":{"rootfs":{"size_gib":8}}}`, 101, "disks.rootfs", "not a disk key of a qemu guest"},
		{"scsi on a container", `{"vmid":101,"kind":"lxc","disks":{"scsi0":{"size_gib":8}}}`, 101, "disks.scsi0", "not a disk key of a lxc guest"},
		{"net key unknown", `{"vmid":101,"net":{"eth0":{"bridge":"vmbr0"}}}`, 101, "net.eth0", "interface keys are"},
		{"net model unknown", `{"vmid":101,"net":{"net0":{"model":"ne2k"}}}`, 101, "net.net0.model", ""},
		{"net tag too high", `{"vmid":101,"net":{"net0":{"tag":4095}}}`, 101, "net.net0.tag", "at most 4094"},
		{"container ip on a VM", `{"vmid":101,"kind":"qemu","net":{"net0":{"ip":"dhcp"}}}`, 101, "net.net0", "container settings"},
		{"model on a container", `{"vmid":101,"kind":"lxc","net":{"net0":{"model":"virtio"}}}`, 101, "net.net0", "VM setting"},
		{"cloudinit password", `{"vmid":101,"cloudinit":{"password":"x"}}`, 101, "cloudinit.password", "unknown field"},
		{"cloudinit on a container", `{"vmid":101,"kind":"lxc","cloudinit":{"user":"ops"}}`, 101, "cloudinit", "for VMs"},
		{"ipconfig key", `{"vmid":101,"cloudinit":{"ipconfig":{"net0":"ip=dhcp"}}}`, 101, "cloudinit.ipconfig.net0", "ipconfig0-ipconfig31"},
		{"ssh key not a key", `{"vmid":101,"cloudinit":{"ssh_keys":["hunter2"]}}`, 101, "cloudinit.ssh_keys.0", ""},
		{"absent with node", `{"vmid":101,"absent":true,"node":"pve1"}`, 101, "absent", "cannot also have"},
		{"pool not an id", `{"vmid":101,"pool":"a b"}`, 101, "pool", ""},
		{"snapshot before unknown action", `{"vmid":101,"snapshot_before":["backup"]}`, 101, "snapshot_before.0", ""},
		{"snapshot before twice", `{"vmid":101,"snapshot_before":["restart","restart"]}`, 101, "snapshot_before", ""},
		{"set upper case", `{"vmid":101,"set":"Web"}`, 101, "set", "lower-case"},
		{"set empty", `{"vmid":101,"set":""}`, 101, "set", ""},
		{"set too long", `{"vmid":101,"set":"` + strings.Repeat("a", 64) + `"}`, 101, "set", ""},
		{"set ends in a dash", `{"vmid":101,"set":"web-"}`, 101, "set", "lower-case"},
		// Wrong types.
		{"vmid as string", `{"vmid":"101"}`, 101, "vmid", "must be a JSON integer, got string"},
		{"vmid fractional", `{"vmid":101.5}`, 101, "vmid", "integer"},
		{"vmid in exponent form", `{"vmid":1.01e2}`, 101, "vmid", "plain integer"},
		{"cores as string", `{"vmid":101,"cores":"4"}`, 101, "cores", "must be a JSON integer, got string"},
		{"memory as float", `{"vmid":101,"memory_mib":1024.5}`, 101, "memory_mib", "integer"},
		{"tags not array", `{"vmid":101,"tags":"a,b"}`, 101, "tags", "must be a JSON array, got string"},
		{"tag not string", `{"vmid":101,"tags":[1]}`, 101, "tags.0", "string"},
		{"onboot as yes", `{"vmid":101,"onboot":"yes"}`, 101, "onboot", "must be a JSON boolean, got string"},
		{"onboot as 1", `{"vmid":101,"onboot":1}`, 101, "onboot", "boolean"},
		{"absent as string", `{"vmid":101,"absent":"true"}`, 101, "absent", "boolean"},
		{"name null", `{"vmid":101,"name":null}`, 101, "name", "string"},
		{"clone not object", `{"vmid":101,"clone":9000}`, 101, "clone", "object"},
		{"clone.full as string", `{"vmid":101,"clone":{"from":9000,"full":"yes"}}`, 101, "clone.full", "boolean"},
		// Out of range.
		{"vmid 99", `{"vmid":99}`, 99, "vmid", "must be at least 100, got 99"},
		{"vmid 0", `{"vmid":0}`, 0, "vmid", "must be at least 100, got 0"},
		{"vmid 1000000000", `{"vmid":1000000000}`, 1000000000, "vmid", "must be at most 999999999, got 1000000000"},
		{"cores 0", `{"vmid":101,"cores":0}`, 101, "cores", "must be at least 1, got 0"},
		{"cores negative", `{"vmid":101,"cores":-2}`, 101, "cores", "must be at least 1, got -2"},
		{"memory_mib 8", `{"vmid":101,"memory_mib":8}`, 101, "memory_mib", "must be at least 16, got 8"},
		{"clone.from 99", `{"vmid":101,"clone":{"from":99}}`, 101, "clone.from", "must be at least 100"},
		// Bad enums.
		{"power on", `{"vmid":101,"power":"on"}`, 101, "power", "'running', 'stopped'"},
		{"power upper case", `{"vmid":101,"power":"Running"}`, 101, "power", "'running', 'stopped'"},
		{"kind vm", `{"vmid":101,"kind":"vm"}`, 101, "kind", "'qemu', 'lxc'"},
		// Patterns.
		{"name with underscore", `{"vmid":101,"name":"web_1"}`, 101, "name", "must be a DNS name"},
		{"name with leading hyphen", `{"vmid":101,"name":"-web"}`, 101, "name", "must be a DNS name"},
		{"name with empty label", `{"vmid":101,"name":"web..example"}`, 101, "name", "must be a DNS name"},
		{"name empty", `{"vmid":101,"name":""}`, 101, "name", "must be a DNS name"},
		{"tag with space", `{"vmid":101,"tags":["ok","not ok"]}`, 101, "tags.1", "a tag must"},
		{"tag with semicolon", `{"vmid":101,"tags":["a;b"]}`, 101, "tags.0", "a tag must"},
		{"clone node bad", `{"vmid":101,"clone":{"from":9000,"node":"pve 1"}}`, 101, "clone.node", "node name"},
		{"clone storage bad", `{"vmid":101,"clone":{"from":9000,"storage":"1local"}}`, 101, "clone.storage", "storage id"},
		// Rules the schema cannot express.
		{"vmid mismatch with subject", `{"vmid":102}`, 101, "vmid", "body says 102 but the subject is for 101"},
		{"absent with power", `{"vmid":101,"absent":true,"power":"stopped"}`, 101, "absent", "cannot also have"},
		{"absent with clone", `{"vmid":101,"absent":true,"clone":{"from":9000}}`, 101, "absent", "cannot also have"},
		{"absent with tags", `{"vmid":101,"absent":true,"tags":[]}`, 101, "absent", "cannot also have"},
		{"clone from itself", `{"vmid":101,"clone":{"from":101}}`, 101, "clone.from", "cloned from itself"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := events.DecodeDesired([]byte(c.body), c.subject)
			if err == nil {
				t.Fatalf("accepted %s as %+v", c.body, d)
			}
			if d != nil {
				t.Errorf("returned a desired state with the error: %+v", d)
			}
			var ve *events.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T (%v), want *events.ValidationError", err, err)
			}
			if len(ve.Problems) == 0 {
				t.Fatal("ValidationError without problems")
			}
			found := false
			for _, p := range ve.Problems {
				if p.Field == c.field && strings.Contains(p.Message, c.message) {
					found = true
				}
				// Read clearly: no schema jargon, no scientific notation,
				// no Go type names.
				for _, jargon := range []string{"additionalProperties", "×10", "#/", "Go struct", "*events."} {
					if strings.Contains(p.String(), jargon) {
						t.Errorf("problem %q contains %q", p, jargon)
					}
				}
			}
			if !found {
				t.Fatalf("problems %+v do not name field %q with %q", ve.Problems, c.field, c.message)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "invalid desired event: ") {
				t.Errorf("Error() = %q, want the invalid desired event prefix", msg)
			}
			if c.field != "" && !strings.Contains(msg, c.field+": ") {
				t.Errorf("Error() = %q does not name %q", msg, c.field)
			}
		})
	}
}

// TestDecodeDesiredReportsEveryProblem: one body with several faults lists
// each, in a stable order, so a caller can fix them all at once.
func TestDecodeDesiredReportsEveryProblem(t *testing.T) {
	body := []byte(`{"vmid":101,"zeta":1,"alpha":2,"cores":0,"power":"on","tags":["x y"]}`)
	var first []events.FieldError
	for i := range 20 { // the schema library walks maps; the order must not depend on that
		_, err := events.DecodeDesired(body, 101)
		var ve *events.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("want *ValidationError, got %v", err)
		}
		if i == 0 {
			first = ve.Problems
			continue
		}
		if !reflect.DeepEqual(first, ve.Problems) {
			t.Fatalf("problem order changed between runs:\n%+v\n%+v", first, ve.Problems)
		}
	}
	var fields []string
	for _, p := range first {
		fields = append(fields, p.Field)
	}
	want := []string{"alpha", "cores", "power", "tags.0", "zeta"}
	if !reflect.DeepEqual(fields, want) {
		t.Fatalf("problem fields %v, want %v (%+v)", fields, want, first)
	}
}

func TestDesiredValidateRoundTrip(t *testing.T) {
	valid := []events.Desired{
		{VMID: 101},
		{VMID: 101, Kind: ptr(events.QEMU), Power: ptr(events.PowerRunning), Cores: ptr(2), MemoryMiB: ptr(2048),
			Name: ptr("db"), Description: ptr("a\nb"), Tags: ptr([]string{}), OnBoot: ptr(false),
			Clone: &events.Clone{From: 9000, Full: ptr(false)}},
		{VMID: 300, Kind: ptr(events.LXC), Absent: true},
	}
	for _, d := range valid {
		if err := d.Validate(d.VMID); err != nil {
			t.Errorf("Validate(%s): %v", mustJSON(t, d), err)
			continue
		}
		body, _ := json.Marshal(d)
		back, err := events.DecodeDesired(body, d.VMID)
		if err != nil {
			t.Fatalf("DecodeDesired of a valid Desired: %v", err)
		}
		if !reflect.DeepEqual(*back, d) {
			t.Errorf("round trip changed it:\n got %s\nwant %s", mustJSON(t, back), mustJSON(t, d))
		}
	}
	invalid := []struct {
		d       events.Desired
		subject int
		field   string
	}{
		{events.Desired{VMID: 50}, 50, "vmid"},
		{events.Desired{VMID: 101}, 102, "vmid"},
		{events.Desired{VMID: 101, Cores: ptr(0)}, 101, "cores"},
		{events.Desired{VMID: 101, Kind: ptr(events.GuestKind("vm"))}, 101, "kind"},
		{events.Desired{VMID: 101, Power: ptr(events.Power("paused"))}, 101, "power"},
		{events.Desired{VMID: 101, Name: ptr("no spaces")}, 101, "name"},
		{events.Desired{VMID: 101, Absent: true, OnBoot: ptr(true)}, 101, "absent"},
		{events.Desired{VMID: 101, Clone: &events.Clone{From: 101}}, 101, "clone.from"},
		{events.Desired{VMID: 101, Clone: &events.Clone{}}, 101, "clone.from"},
	}
	for _, c := range invalid {
		err := c.d.Validate(c.subject)
		var ve *events.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("Validate(%s, %d) = %v, want *ValidationError", mustJSON(t, c.d), c.subject, err)
			continue
		}
		if ve.Problems[0].Field != c.field {
			t.Errorf("Validate(%s): problems %+v, want field %q", mustJSON(t, c.d), ve.Problems, c.field)
		}
	}
}

func TestDesiredManaged(t *testing.T) {
	cases := []struct {
		d    events.Desired
		want bool
	}{
		{events.Desired{VMID: 101}, false},
		{events.Desired{VMID: 101, Kind: ptr(events.QEMU), Clone: &events.Clone{From: 9000}}, false},
		{events.Desired{VMID: 101, Absent: true}, false},
		{events.Desired{VMID: 101, Power: ptr(events.PowerStopped)}, true},
		{events.Desired{VMID: 101, Tags: ptr([]string{})}, true},
		{events.Desired{VMID: 101, OnBoot: ptr(false)}, true},
		{events.Desired{VMID: 101, Description: ptr("")}, true},
	}
	for _, c := range cases {
		if got := c.d.Managed(); got != c.want {
			t.Errorf("Managed(%s) = %v, want %v", mustJSON(t, c.d), got, c.want)
		}
	}
}

func TestValidationErrorString(t *testing.T) {
	e := &events.ValidationError{Problems: []events.FieldError{{Message: "body is not valid JSON: EOF"}, {Field: "cores", Message: "must be at least 1, got 0"}}}
	want := "invalid desired event: body is not valid JSON: EOF; cores: must be at least 1, got 0"
	if e.Error() != want {
		t.Fatalf("Error() = %q, want %q", e.Error(), want)
	}
}

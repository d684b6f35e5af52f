package pve

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestAnswerEnvelope pins how an answer's data is found: the "data"
// member of the top-level object, other members skipped, the last of
// repeated ones; an object without one is the data itself (as go-proxmox
// reads it); anything malformed, or more than one JSON value, is an
// error, which Client.do reports as ClassUnknown.
func TestAnswerEnvelope(t *testing.T) {
	for _, tc := range []struct {
		body, want string // want: the data as Value.Text(); "error" for an error
	}{
		{`{"data":null}`, ""},
		{`null`, ""},
		{`{"data":"UPID:pve1:0001A2B3:00C4D5E6:65F0A1B2:qmconfig:101:root@pam!converge:"}`, "UPID:pve1:0001A2B3:00C4D5E6:65F0A1B2:qmconfig:101:root@pam!converge:"},
		{`{"data":{"status":"running","cpus":2.0}}`, `{"status":"running","cpus":2.0}`},
		{`{"data":[]}`, `[]`},
		{`{"data":12345678901234567890}`, "12345678901234567000"}, // beyond int64: a float64, as always
		{`{"data":"x","message":"ignored","total":{"a":[1]}}`, "x"},
		{`{"total":3,"data":"x"}`, "x"},
		{`{"success":1}`, `{"success":1}`},
		{`{}`, `{}`},
		{` {"data" : { "a" : [ 1 , 2 ] } } ` + "\n", `{"a":[1,2]}`},
		{`{"data":1,"data":2}`, "2"},
		{"{\"data\":\"\xff\"}", "\uFFFD"},
		{`[1,2]`, "error"},
		{`"just a string"`, "error"},
		{``, "error"},
		{`   `, "error"},
		{`{`, "error"},
		{`{"data":}`, "error"},
		{`{"data":[1,2}`, "error"},
		{`{"data":"unterminated}`, "error"},
		{`{"data":1}garbage`, "error"},
		{`{"data":1} {"data":2}`, "error"},
		{`<html>not json</html>`, "error"},
		{`{"data":nul}`, "error"},
		{`{"data":"bad escape \q"}`, "error"},
		{`{"data":01}`, "error"},
		{"{\"data\":\"\x01\"}", "error"},
		{`{"a":1,}`, "error"},
	} {
		v, err := decodeAnswer[Value]([]byte(tc.body))
		got := v.Text()
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("%q: data %q (%v), want %q", tc.body, got, err, tc.want)
		}
	}
}

// TestAnswerErrorsAreUnknown: an answer that cannot be read fails the
// call as ClassUnknown with the decoder's message; for a mutation, which
// Proxmox accepted, the outcome is unknown.
func TestAnswerErrorsAreUnknown(t *testing.T) {
	f := newFake(t)
	f.onData(http.MethodGet, "/nodes/pve/qemu/100/status/current", `{"status":`)
	f.on(http.MethodPost, "/nodes/pve/qemu/100/status/start", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"data":"UPID`))
	})
	c := f.client(t)
	_, err := c.GuestStatus(bg, vm100)
	if e := asError(t, err); e.Class != ClassUnknown || e.Indeterminate || e.Message == "" || e.Op != OpReadStatus {
		t.Errorf("read: %+v", e)
	}
	_, err = c.Start(bg, vm100)
	if e := asError(t, err); e.Class != ClassUnknown || !e.Indeterminate || e.Message == "" {
		t.Errorf("mutation: %+v", e)
	}
}

// TestAnswersIgnoreUnknownMembers: a newer Proxmox may add members
// anywhere; every read takes the members it knows and skips the others,
// whatever their type.
func TestAnswersIgnoreUnknownMembers(t *testing.T) {
	const extra = `"x-new":{"nested":[1,{"deep":null}]},"x-flag":true,"x-num":1.5e300,"x-str":"s"`
	f := newFake(t)
	f.onData(http.MethodGet, "/cluster/resources", `[{`+extra+`,"type":"qemu","vmid":100,"node":"pve","name":"web","status":"running",`+
		`"template":0,"maxcpu":2,"maxmem":2147483648,"uptime":42,"tags":"b;a","lock":"backup","hastate":"started","pool":"prod"},`+
		`{"type":"x-future-kind","vmid":1,`+extra+`}]`)
	f.onData(http.MethodGet, "/nodes/pve/qemu/100/pending", `[{"key":"digest","value":"d1",`+extra+`},{"key":"cores","value":2,"pending":4,`+extra+`},`+
		`{"key":"name","value":"web"},{"key":"tags","delete":1,`+extra+`}]`)
	f.onData(http.MethodGet, "/nodes/pve/qemu/100/status/current", `{`+extra+`,"status":"running","qmpstatus":"paused","uptime":7,`+
		`"ha":{"managed":1,`+extra+`},"lock":"backup"}`)
	f.on(http.MethodGet, "/nodes/pve/qemu/101/pending", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"data":[{"key":"cores","value":"3"}],` + extra + `}`)) // no digest: the config is read too
	})
	f.onData(http.MethodGet, "/nodes/pve/qemu/101/config", `{`+extra+`,"digest":"d2","cores":"3","memory":"1024","onboot":"1"}`)
	c := f.client(t)

	inv, err := c.Inventory(bg)
	want := []Resource{{VMID: 100, Kind: KindQEMU, Node: "pve", Name: "web", Status: "running", Lock: "backup",
		Tags: []string{"a", "b"}, MaxCPU: 2, MaxMemMiB: 2048, Uptime: 42, HAState: "started", Pool: "prod"}}
	if err != nil || !reflect.DeepEqual(inv, want) {
		t.Errorf("inventory %+v, %v", inv, err)
	}
	g, err := c.GuestConfig(bg, vm100)
	if err != nil || g.Digest != "d1" || g.Cores != 2 || g.Pending["cores"] != "4" || g.Name != "web" ||
		!reflect.DeepEqual(g.PendingDelete, []string{"tags"}) || g.Raw["x-new"] != "" {
		t.Errorf("config %+v, %v", g, err)
	}
	g, err = c.GuestConfig(bg, GuestRef{Kind: KindQEMU, Node: "pve", VMID: 101})
	if err != nil || g.Digest != "d2" || g.Cores != 3 || g.MemoryMiB != 1024 || !g.OnBoot {
		t.Errorf("config from config?current=1 %+v, %v", g, err)
	}
	// A config's own keys are all kept: a key a newer Proxmox adds is
	// one more raw value, not an error.
	if g.Raw["x-new"] != `{"nested":[1,{"deep":null}]}` || g.Raw["x-flag"] != "1" || g.Raw["x-str"] != "s" {
		t.Errorf("raw %q", g.Raw)
	}
	st, err := c.GuestStatus(bg, vm100)
	if err != nil || *st != (GuestStatus{Status: "running", QMPStatus: "paused", Lock: "backup", Uptime: 7, HAManaged: true}) {
		t.Errorf("status %+v, %v", st, err)
	}
}

// TestInventoryMixedTyping pins the tolerances of an inventory row:
// numbers as strings or in scientific notation, booleans in every
// spelling, a numeric name, null members, repeated members (the last
// wins), invalid UTF-8, names and values with escapes, rows that are no
// guests (or null).
func TestInventoryMixedTyping(t *testing.T) {
	body := `{"data":[
		{"id":"lxc/101","type":"lxc","vmid":"101","node":"pve2","status":"unknown","template":"1","maxcpu":0.5,"maxmem":5.36870912e+08},
		{"id":"node/pve1","type":"node","node":"pve1"},
		null,
		{},
		{"id":"qemu/102","type":"qemu","vmid":102,"node":"pve1","hastate":"started","pool":"prod","template":false},
		{"id":"qemu/103","type":"qemu","vmid":1.03e2,"node":"pve1","maxcpu":"4","uptime":null,"name":null,"template":true},
		{"type":"qemu","vmid":104,"name":7,"node":"pve1","maxmem":"2147483648","uptime":"12","lock":"","tags":"B,a"},
		{"type":"qemu","vmid":105,"name":"first","name":"second","node":"pve1"},
		{"type":"qemu","v\u006did":107,"n\u0061me":"escaped names","node":"p\u0076e1"},
		{"type":"qemu","vmid":108,"node":"pve2"},
		{"type":"qemu","vmid":106,"name":"bad ` + "\xff" + ` utf8","node":"pve1","VMID":1,"Name":"folded keys are other keys"}
	]}`
	got, err := decodeInventory([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{
		{VMID: 101, Kind: KindLXC, Node: "pve2", Status: "unknown", Template: true, Tags: []string{}, MaxCPU: 1, MaxMemMiB: 512},
		{VMID: 102, Kind: KindQEMU, Node: "pve1", HAState: "started", Pool: "prod", Tags: []string{}},
		{VMID: 103, Kind: KindQEMU, Node: "pve1", Template: true, Tags: []string{}, MaxCPU: 4},
		{VMID: 104, Kind: KindQEMU, Node: "pve1", Name: "7", Tags: []string{"a", "b"}, MaxMemMiB: 2048, Uptime: 12},
		{VMID: 105, Kind: KindQEMU, Node: "pve1", Name: "second", Tags: []string{}},
		{VMID: 106, Kind: KindQEMU, Node: "pve1", Name: "bad \uFFFD utf8", Tags: []string{}},
		{VMID: 107, Kind: KindQEMU, Node: "pve1", Name: "escaped names", Tags: []string{}},
		{VMID: 108, Kind: KindQEMU, Node: "pve2", Tags: []string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		`{"data":[{"type":"qemu","vmid":"x"}]}`,
		`{"data":[{"type":"qemu","vmid":100.5}]}`,
		`{"data":[{"type":"qemu","vmid":100,"template":2}]}`,
		`{"data":[{"type":"qemu","vmid":100,"maxmem":"lots"}]}`,
		`{"data":[1]}`,
		`{"data":{"type":"qemu"}}`,
		`{"data":[{"type":"qemu","vmid":100}]`,
		`{"data":[{"type":"qemu","vmid":100},]}`,
		`{"data":[{"type":"qemu","vmid":100}]}garbage`,
	} {
		if res, err := decodeInventory([]byte(bad), nil); err == nil {
			t.Errorf("%s: read %+v, want an error", bad, res)
		}
	}
	if res, err := decodeInventory([]byte(`{"data":[]}`), nil); err != nil || res == nil || len(res) != 0 {
		t.Errorf("[]: %+v, %v; want no guests", res, err)
	}
	// Proxmox answers an empty cluster with []: a null read as "no
	// guests" would report every guest gone.
	for _, null := range []string{`{"data":null}`, `null`} {
		if res, err := decodeInventory([]byte(null), nil); err == nil {
			t.Errorf("%s: %+v; want an error, not an empty cluster", null, res)
		}
	}
}

// TestInventoryErrorNamesTheRow: a row that does not read says which.
func TestInventoryErrorNamesTheRow(t *testing.T) {
	rows := make([]string, 0, 4)
	for i := range 3 {
		rows = append(rows, `{"id":"qemu/`+strconv.Itoa(100+i)+`","type":"qemu","vmid":`+strconv.Itoa(100+i)+`}`)
	}
	rows = append(rows, `{"id":"qemu/103","type":"qemu","vmid":"one hundred and three"}`)
	_, err := decodeInventory([]byte(`{"data":[`+strings.Join(rows, ",")+`]}`), nil)
	if err == nil || !strings.Contains(err.Error(), `entry 3 (qemu "one hundred and three"): vmid`) {
		t.Errorf("error %v", err)
	}
	if errors.Is(err, errNotObject) {
		t.Error("wrong error")
	}
}

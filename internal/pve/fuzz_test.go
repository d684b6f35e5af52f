package pve

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/converge-pve/converge/events"
)

// FuzzInventory: whatever Proxmox (or something in its place) answers to
// GET /cluster/resources, reading it never panics; it yields guests
// (sorted, of a known kind, tags normalised) or an error that says what
// is wrong, and reads the same whether the data came in its envelope or
// alone.
func FuzzInventory(f *testing.F) {
	for _, s := range []string{
		`[{"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","name":"web","status":"running","template":0,"maxcpu":2,"maxmem":2147483648,"uptime":42,"tags":"b;A","lock":"backup"}]`,
		`[{"id":"lxc/101","type":"lxc","vmid":"101","node":"pve2","status":"unknown","template":"1","maxcpu":0.5,"maxmem":5.36870912e+08}]`,
		`[{"id":"node/pve1","type":"node","node":"pve1"},{"type":"qemu","vmid":102,"node":"pve1","hastate":"started","pool":"prod","template":false}]`,
		`[{"type":"qemu","vmid":1.03e2,"node":"pve1","maxcpu":"4","uptime":null}]`,
		`[{"type":"qemu","VMID":104,"name":"a","name":"b"}]`,
		`[{"type":"qemu","vmid":112,"vmid":[1]}]`,
		`[null,{},{"type":"lxc","vmid":1e400}]`,
		`null`, `{}`, `[]`, `[`, `[{"type":"qemu","vmid":100}]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeResources(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
		} else {
			for i, r := range got {
				if !r.Kind.Valid() || r.Tags == nil || !slices.Equal(events.NormaliseTags(r.Tags), r.Tags) {
					t.Fatalf("guest %+v", r)
				}
				if i > 0 && (got[i-1].VMID > r.VMID || got[i-1].VMID == r.VMID && got[i-1].Node > r.Node) {
					t.Fatalf("not sorted: %+v", got)
				}
			}
		}
		if !jsontext.Value(data).IsValid() {
			return // data that is not one JSON value changes meaning inside an envelope
		}
		body := append(append([]byte(`{"data":`), data...), '}')
		inv, ierr := decodeInventory(body, nil)
		if (err == nil) != (ierr == nil) || err == nil && !reflect.DeepEqual(got, inv) {
			t.Fatalf("alone %+v, %v; in its envelope %+v, %v", got, err, inv, ierr)
		}
	})
}

// FuzzGuestConfig: a config and pending answer decode deterministically;
// what converge takes from them is normalised as events carry it.
func FuzzGuestConfig(f *testing.F) {
	f.Add([]byte(`{"cores":2,"memory":"2048","name":"web","description":"d\n","tags":"b;a","onboot":1,"digest":"ab"}`),
		[]byte(`[{"key":"cores","value":2,"pending":4},{"key":"memory","value":"2048"},{"key":"tags","delete":1},{"key":"digest","value":"ab"}]`))
	f.Add([]byte(`{"hostname":"ct","memory":512,"cores":"1","digest":"cd"}`), []byte(nil))
	f.Add([]byte(`{"memory":"current=4096,min=512","cores":1e0,"onboot":"0"}`), []byte(`null`))
	f.Add([]byte(`null`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, config, pending []byte) {
		for _, kind := range []Kind{KindQEMU, KindLXC} {
			ref := GuestRef{Kind: kind, Node: "pve1", VMID: 100}
			g, err := DecodeGuestConfig(ref, config, pending)
			if err != nil {
				continue
			}
			g2, err := DecodeGuestConfig(ref, config, pending)
			if err != nil || !reflect.DeepEqual(g, g2) {
				t.Fatalf("not deterministic: %+v vs %+v (%v)", g, g2, err)
			}
			if _, ok := g.Raw["digest"]; ok {
				t.Fatal("Raw holds the digest")
			}
			m := g.Managed()
			if !slices.Equal(events.NormaliseTags(m.Tags), m.Tags) || m.Tags == nil {
				t.Fatalf("tags not normalised: %q", m.Tags)
			}
			if events.NormaliseDescription(m.Description) != m.Description {
				t.Fatalf("description not normalised: %q", m.Description)
			}
			_ = g.ManagedPending()
			for k := range g.Raw {
				_, _ = g.Effective(k)
			}
		}
		if g, err := DecodePendingConfig(GuestRef{Kind: KindQEMU, VMID: 100}, pending); err == nil {
			if _, ok := g.Raw["digest"]; ok {
				t.Fatal("Raw holds the digest")
			}
		}
		_, _ = DecodeGuestStatus(config)
	})
}

// FuzzParseUPID: a task id parses only into what writes it back.
func FuzzParseUPID(f *testing.F) {
	for _, s := range []string{
		"UPID:pve1:0000A1B2:0000C3D4:674A1B2C:qmstart:101:root@pam!converge:",
		"UPID:pve-2:00001234:00005678:674A1B2C:vzshutdown:205:converge@pve!tok:",
		"UPID:pve1:1:2:3:qmclone:9000:root@pam",
		"UPID::1:2:3:x:y:z:", "UPID:pve1:zz:2:3:x:y:z:", "UPID:a:1:2:3:4:5:6:7:8",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUPID(s)
		if err != nil {
			return
		}
		_, _ = u.Op(), u.Ref()
		back := fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", u.Node, u.PID, u.PStart, u.StartTime.Unix(), u.Type, u.ID, u.User)
		u2, err := ParseUPID(back)
		if err != nil || !reflect.DeepEqual(u, u2) {
			t.Fatalf("%q → %+v → %q → %+v (%v)", s, u, back, u2, err)
		}
	})
}

// FuzzNumbers: Proxmox's mixed typing reads the same whether a member
// came as a JSON number or as a string, and a value read writes back to
// itself.
func FuzzNumbers(f *testing.F) {
	for _, s := range []string{"2048", "1e3", "2.0", "-1", "current=4096,min=512", "4096,balloon=0", "0x10", " 7 ", "1", "1e400", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseInt(s); err == nil {
			if m, err := ParseInt(strconv.FormatInt(n, 10)); err != nil || m != n {
				t.Fatalf("ParseInt(%q) = %d, which reads back as %d (%v)", s, n, m, err)
			}
		}
		if n, err := ParseMemoryMiB(s); err == nil && (n < 0 || n > 1<<31-1) {
			t.Fatalf("ParseMemoryMiB(%q) = %d", s, n)
		}
		if b, err := ParseBool(s); err == nil {
			if b2, err := ParseBool(map[bool]string{true: "1", false: "0"}[b]); err != nil || b2 != b {
				t.Fatalf("ParseBool(%q) = %t does not read back", s, b)
			}
		}
		var num Value
		if json.Unmarshal([]byte(s), &num, readOpts) != nil {
			return
		}
		quoted, _ := jsontext.AppendQuote(nil, s)
		var str Value
		if err := json.Unmarshal(quoted, &str, readOpts); err != nil {
			t.Fatalf("%s: %v", quoted, err)
		}
		// A number's text is canonical: as a string it reads as the number.
		canon := stringValue(num.Text())
		if n, err := num.Int(); err == nil {
			if m, err := str.Int(); err == nil && m != n {
				t.Fatalf("%q: number %d, string %d", s, n, m)
			}
			if m, err := canon.Int(); err != nil || m != n {
				t.Fatalf("%q: %d, its text %q reads %d (%v)", s, n, num.Text(), m, err)
			}
		}
		if b, err := num.Bool(); err == nil {
			if c, err := str.Bool(); err == nil && c != b {
				t.Fatalf("%q: number %t, string %t", s, b, c)
			}
		}
		_, _ = memoryMiB(num)
		_, _ = num.Float()
	})
}

// stringValue is a Value holding the JSON string s.
func stringValue(s string) Value { return Value{kind: kindString, text: s} }

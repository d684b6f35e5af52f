package pve

import (
	"maps"
	"reflect"
	"testing"

	"github.com/converge-pve/converge/events"
)

func TestManaged(t *testing.T) {
	g := &GuestConfig{Ref: GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}, Name: "web",
		Description: "hi \n", Tags: []string{"B", "a;b"}, Cores: 2, Sockets: 2, MemoryMiB: 1024, OnBoot: true}
	want := events.GuestConfig{Name: "web", Description: "hi", Tags: []string{"a", "b"}, Cores: 2, MemoryMiB: 1024, OnBoot: true}
	got := g.Managed()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Managed() = %+v, want %+v", got, want)
	}
	got.Tags[0] = "x"
	if g.Tags[0] != "B" {
		t.Fatal("Managed shares the tags slice")
	}
	if tags := (&GuestConfig{}).Managed().Tags; tags == nil || len(tags) != 0 {
		t.Fatalf("no tags must be an empty, non-nil slice: %#v", tags)
	}
}

// TestManagedPending decodes real PVE payloads (GET …/config?current=1 and
// GET …/pending) and checks the managed pending keys and their values.
func TestManagedPending(t *testing.T) {
	for _, tc := range []struct {
		name            string
		kind            Kind
		config, pending string
		want            map[string]string
	}{{
		name:   "qemu: managed keys normalised (interfaces too), others ignored",
		kind:   KindQEMU,
		config: `{"name":"web","cores":1,"memory":"1024","tags":"b;a","onboot":0,"description":"hi\n","digest":"d"}`,
		pending: `[{"key":"cores","value":1,"pending":"4"},{"key":"memory","value":"1024","pending":"current=4096,max=8192"},
			{"key":"tags","value":"b;a","pending":"Z, y"},{"key":"onboot","value":0,"pending":"yes"},
			{"key":"description","value":"hi","pending":"new text \n"},{"key":"name","value":"web","pending":"web2"},
			{"key":"net0","pending":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1"},{"key":"sockets","pending":2}]`,
		want: map[string]string{"cores": "4", "memory": "4096", "tags": "y;z", "onboot": "1", "description": "new text", "name": "web2",
			"net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1"},
	}, {
		name:    "qemu: pending deletions read as defaults",
		kind:    KindQEMU,
		config:  `{"name":"web","cores":4,"memory":"4096","tags":"a","onboot":1,"description":"d","digest":"d"}`,
		pending: `[{"key":"name","delete":1},{"key":"cores","delete":1},{"key":"memory","delete":2},{"key":"tags","delete":1},{"key":"onboot","delete":1},{"key":"description","delete":1}]`,
		want:    map[string]string{"name": "", "cores": "1", "memory": "512", "tags": "", "onboot": "0", "description": ""},
	}, {
		name:    "lxc: hostname reported as name, cores default to 0 (no limit)",
		kind:    KindLXC,
		config:  `{"hostname":"ct1","cores":2,"memory":2048,"digest":"d"}`,
		pending: `[{"key":"hostname","value":"ct1","pending":"ct2"},{"key":"cores","value":2,"delete":1},{"key":"name","pending":"ignored"}]`,
		want:    map[string]string{"name": "ct2", "cores": "0"},
	}, {
		name:    "unparsable values are kept, trimmed",
		kind:    KindQEMU,
		config:  `{"digest":"d"}`,
		pending: `[{"key":"cores","pending":" many "},{"key":"memory","pending":"lots"},{"key":"onboot","pending":"maybe"}]`,
		want:    map[string]string{"cores": "many", "memory": "lots", "onboot": "maybe"},
	}, {
		name:    "a pending value equal to the applied one is no change",
		kind:    KindQEMU,
		config:  `{"cores":2,"memory":"2048","onboot":0,"tags":"a;b","description":"x","digest":"d"}`,
		pending: `[{"key":"cores","value":2,"pending":"2"},{"key":"memory","value":"2048","pending":"current=2048"},{"key":"onboot","value":0,"pending":"no"},{"key":"tags","pending":"B,A"},{"key":"description","pending":"x\n"}]`,
	}, {
		name:   "nothing pending",
		kind:   KindLXC,
		config: `{"hostname":"ct","digest":"d"}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var pending []byte
			if tc.pending != "" {
				pending = []byte(tc.pending)
			}
			g, err := DecodeGuestConfig(GuestRef{Kind: tc.kind, Node: "pve", VMID: 100}, []byte(tc.config), pending)
			if err != nil {
				t.Fatal(err)
			}
			got := g.ManagedPending()
			if !maps.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Fatalf("ManagedPending() = %#v, want %#v", got, tc.want)
			}
		})
	}
}

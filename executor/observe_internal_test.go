package executor

import (
	"reflect"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// TestObservation: read-backs are normalised like observations, from real
// PVE payloads: applied values in Config, managed pending keys normalised,
// LXC's hostname reported as name.
func TestObservation(t *testing.T) {
	readAt := time.Date(2026, 5, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name           string
		ref            pve.GuestRef
		status, config string
		pending        string
		want           events.Observed
	}{{
		name:   "qemu running, cores and tags pending",
		ref:    pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 101},
		status: `{"status":"running","qmpstatus":"running","uptime":12}`,
		config: `{"name":"web","cores":1,"memory":"2048","tags":"b;a","onboot":1,"description":"hi\n","digest":"abc"}`,
		pending: `[{"key":"cores","value":1,"pending":4},{"key":"tags","value":"b;a","pending":"Z;y"},
			{"key":"net0","pending":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1"},{"key":"memory","value":"2048","pending":"4096"},
			{"key":"name","value":"web","pending":"web"},{"key":"onboot","value":1,"delete":1}]`,
		want: events.Observed{Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running", Digest: "abc",
			Config: events.GuestConfig{Name: "web", Description: "hi", Tags: []string{"a", "b"}, Cores: 1, MemoryMiB: 2048, OnBoot: true},
			Pending: map[string]string{"cores": "4", "tags": "y;z", "memory": "4096", "onboot": "0",
				"net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1"}}, // interfaces are managed too
	}, {
		name:    "lxc stopped, hostname pending, locked",
		ref:     pve.GuestRef{Kind: pve.KindLXC, Node: "pve2", VMID: 201},
		status:  `{"status":"stopped","lock":"backup"}`,
		config:  `{"hostname":"ct","memory":512,"lock":"backup","digest":"d2"}`,
		pending: `[{"key":"hostname","value":"ct","pending":"ct2"},{"key":"onboot","pending":"1"}]`,
		want: events.Observed{Exists: true, Node: "pve2", Kind: events.LXC, Status: "stopped", Lock: "backup", Digest: "d2",
			Config:  events.GuestConfig{Name: "ct", Tags: []string{}, MemoryMiB: 512},
			Pending: map[string]string{"name": "ct2", "onboot": "1"}},
	}, {
		name:   "qemu paused (reported running, as the observer does), nothing pending",
		ref:    pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 102},
		status: `{"status":"running","qmpstatus":"paused"}`,
		config: `{"digest":"d3"}`,
		want: events.Observed{Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running", Digest: "d3",
			Config: events.GuestConfig{Tags: []string{}, Cores: 1, MemoryMiB: 512}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := pve.DecodeGuestStatus([]byte(tc.status))
			if err != nil {
				t.Fatal(err)
			}
			var pending []byte
			if tc.pending != "" {
				pending = []byte(tc.pending)
			}
			cfg, err := pve.DecodeGuestConfig(tc.ref, []byte(tc.config), pending)
			if err != nil {
				t.Fatal(err)
			}
			meta := events.NewMeta("ex", "c", readAt)
			got := observation(meta, "pve", tc.ref, st, cfg, readAt)
			want := tc.want
			want.Meta, want.VMID, want.Cluster, want.ReadAt, want.Source = meta, tc.ref.VMID, "pve", readAt.UTC(), events.SourceExecutor
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("observation:\n got %+v\nwant %+v", *got, want)
			}
		})
	}
}

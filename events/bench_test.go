package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// BenchmarkDecodeDesired validates and decodes a full desired event.
func BenchmarkDecodeDesired(b *testing.B) {
	body := []byte(`{"vmid":101,"kind":"qemu","power":"running","cores":4,"memory_mib":8192,"name":"web-1","description":"frontend","tags":["prod","web"],"onboot":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.DecodeDesired(body, 101); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeResult decodes a final result with its read-back.
func BenchmarkDecodeResult(b *testing.B) {
	now := time.Now()
	o := &events.Observed{Meta: events.NewMeta("executor", "", now), VMID: 101, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567", ReadAt: now,
		Config: events.GuestConfig{Name: "web-1", Description: "frontend", Tags: []string{"prod", "web"}, Cores: 4, MemoryMiB: 8192}}
	body, _ := json.Marshal(events.Result{Meta: events.NewMeta("executor", "c", now), ActionID: "pve-101-5-1", VMID: 101,
		Cluster: "pve", Op: events.OpSetConfig, Status: events.ResultSucceeded, Observed: o})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Decode[events.Result](body); err != nil {
			b.Fatal(err)
		}
	}
}

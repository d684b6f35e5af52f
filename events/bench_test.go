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

// BenchmarkDecodeResultWhole decodes a final result whose read-back has
// disks, an interface and a pending change, as the simulator's guests do.
func BenchmarkDecodeResultWhole(b *testing.B) {
	now := time.Now()
	o := &events.Observed{Meta: events.NewMeta("executor", "", now), VMID: 101, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567", ReadAt: now, AfterSeq: 123456,
		Config: events.GuestConfig{Name: "web-1", Description: "frontend", Tags: []string{"prod", "web"}, Cores: 4, MemoryMiB: 8192,
			Disks: map[string]events.Disk{"scsi0": {Volume: "local-lvm:vm-101-disk-0", SizeBytes: 8 << 30},
				"ide2": {Volume: "none", SizeBytes: -1, Media: "cdrom"}},
			Net: map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"}},
		Pending: map[string]string{"memory": "16384"}, Source: events.SourceExecutor}
	body, _ := json.Marshal(events.Result{Meta: events.NewMeta("executor@host", "desired-pve-101-5", now), ActionID: "pve-101-5-1",
		VMID: 101, Cluster: "pve", Op: events.OpSetConfig, Status: events.ResultSucceeded, Node: "pve1",
		UPID: "UPID:pve1:0000A1B2:0000C3D4:674A1B2C:qmconfig:101:root@pam!converge:", Observed: o, Executor: "executor@host"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Decode[events.Result](body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAction decodes a planned config change.
func BenchmarkDecodeAction(b *testing.B) {
	now := time.Now()
	body, _ := json.Marshal(events.Action{Meta: events.NewMeta("planner@host", "desired-pve-101-5", now), ID: "pve-101-5-1",
		VMID: 101, Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig,
		Set: map[string]string{"description": "frontend", "cores": "4"}, Delete: []string{"onboot"},
		Digest: "0123456789abcdef0123456789abcdef01234567", Reason: "config drift: cores, description",
		DesiredSeq: 5, BasisSeq: 7, ObservationSeq: 7, FoldSeq: 9, Attempt: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Decode[events.Action](body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeResult encodes a final result with its read-back, as an
// executor journals it.
func BenchmarkEncodeResult(b *testing.B) {
	now := time.Now()
	o := &events.Observed{Meta: events.NewMeta("executor", "", now), VMID: 101, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567", ReadAt: now, AfterSeq: 123456,
		Config: events.GuestConfig{Name: "web-1", Description: "frontend", Tags: []string{"prod", "web"}, Cores: 4, MemoryMiB: 8192,
			Disks: map[string]events.Disk{"scsi0": {Volume: "local-lvm:vm-101-disk-0", SizeBytes: 8 << 30},
				"ide2": {Volume: "none", SizeBytes: -1, Media: "cdrom"}},
			Net: map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"}},
		Pending: map[string]string{"memory": "16384"}, Source: events.SourceExecutor}
	r := &events.Result{Meta: events.NewMeta("executor@host", "desired-pve-101-5", now), ActionID: "pve-101-5-1",
		VMID: 101, Cluster: "pve", Op: events.OpSetConfig, Status: events.ResultSucceeded, Node: "pve1",
		UPID: "UPID:pve1:0000A1B2:0000C3D4:674A1B2C:qmconfig:101:root@pam!converge:", Observed: o, Executor: "executor@host"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Encode(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeAction encodes a planned config change.
func BenchmarkEncodeAction(b *testing.B) {
	a := &events.Action{Meta: events.NewMeta("planner@host", "desired-pve-101-5", time.Now()), ID: "pve-101-5-1",
		VMID: 101, Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig,
		Set: map[string]string{"description": "frontend", "cores": "4"}, Delete: []string{"onboot"},
		Digest: "0123456789abcdef0123456789abcdef01234567", Reason: "config drift: cores, description",
		DesiredSeq: 5, BasisSeq: 7, ObservationSeq: 7, FoldSeq: 9, Attempt: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Encode(a); err != nil {
			b.Fatal(err)
		}
	}
}

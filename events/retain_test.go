package events_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestDecodedEventsKeepNoBody: a value from Decode shares no memory with
// the body (the planner keeps every guest's last events, not their
// bodies). Keeping one short string of each of a thousand decoded results
// (whose bodies carry a 4 KB description) and their one-entry pending map
// must keep about those, not the bodies.
func TestDecodedEventsKeepNoBody(t *testing.T) {
	const n = 1000
	now := time.Now()
	body := func(i int) []byte {
		o := &events.Observed{Meta: events.NewMeta("executor", "", now), VMID: 100 + i, Cluster: "pve", Exists: true,
			Node: "pve1", Kind: events.QEMU, Status: "running", Digest: fmt.Sprintf("%040d", i),
			Config: events.GuestConfig{Name: fmt.Sprintf("vm-%d", i), Description: strings.Repeat("d", 4096), Tags: []string{"a"},
				Disks:     map[string]events.Disk{"scsi0": {Volume: "local-lvm:vm-1-disk-0", SizeBytes: 1 << 30}},
				Net:       map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"},
				CloudInit: map[string]string{"ciuser": "admin"}, Hotplug: "disk,network"},
			Pending: map[string]string{"cores": "4"}, ReadAt: now, Source: events.SourceExecutor}
		b, err := json.Marshal(events.Result{Meta: events.NewMeta("executor", fmt.Sprintf("c-%d", i), now),
			ActionID: fmt.Sprintf("pve-%d-1-1", 100+i), VMID: 100 + i, Cluster: "pve", Op: events.OpSetConfig,
			Status: events.ResultSucceeded, Observed: o, TaskLog: []string{"TASK OK"}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kept := make([]string, 0, 5*n)
	keptMaps := make([]map[string]string, 0, 3*n)
	keptDisks := make([]map[string]events.Disk, 0, n)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		r, err := events.Decode[events.Result](body(i))
		if err != nil {
			t.Fatal(err)
		}
		c := &r.Observed.Config
		kept = append(kept, r.ActionID, r.Observed.Digest, c.Tags[0], r.TaskLog[0], c.Hotplug)
		keptMaps = append(keptMaps, r.Observed.Pending, c.Net, c.CloudInit)
		keptDisks = append(keptDisks, c.Disks)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perEvent := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	if perEvent > 3000 { // about 2 KB copied out, over 6 KB when each body is kept
		t.Fatalf("keeping a few strings of each decoded result keeps %d B per result: the bodies (> 4 KB) are still reachable", perEvent)
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(keptMaps)
	runtime.KeepAlive(keptDisks)
}

// TestDecodedActionsKeepNoBody: the same for actions and their operation
// parameters, and for control requests.
func TestDecodedActionsKeepNoBody(t *testing.T) {
	const n = 1000
	now := time.Now()
	long := strings.Repeat("r", 4096)
	kept := make([]string, 0, 8*n)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		b, err := json.Marshal(events.Action{Meta: events.NewMeta("planner", fmt.Sprintf("c-%d", i), now), ID: fmt.Sprintf("pve-%d-1-1", 100+i),
			VMID: 100 + i, Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpMigrate, Reason: long, HAState: "started",
			Resize: &events.ResizeOp{Disk: "scsi0", SizeGiB: 8}, Migrate: &events.MigrateOp{Target: "pve2"},
			Pool: &events.PoolOp{From: "a", To: "b"}, Snapshot: &events.SnapshotOp{Name: "converge-x", Before: events.OpMigrate},
			Clone: &events.CloneOp{From: 9000, FromNode: "pve1", SourceStorage: "local-lvm"}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := events.Decode[events.Action](b)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, a.Resize.Disk, a.Migrate.Target, a.Pool.To, a.Snapshot.Name, string(a.Snapshot.Before), a.HAState, a.Clone.SourceStorage)
		cb, err := json.Marshal(events.Control{Meta: events.NewMeta(long+fmt.Sprint(i), "", now), Command: events.CommandPause, All: true})
		if err != nil {
			t.Fatal(err)
		}
		c, err := events.Decode[events.Control](cb)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, c.Command)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if perEvent := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n; perEvent > 1000 {
		t.Fatalf("keeping a few strings of each decoded action and control request keeps %d B per pair: their bodies (> 8 KB) are still reachable", perEvent)
	}
	runtime.KeepAlive(kept)
}

package events_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestJournalEventsIgnoreUnknownMembers: an observation, action or result
// written by a newer converge, with members this one does not know at the
// top level and nested (in config, a disk, an operation, a read-back),
// decodes to the fields it knows, as encoding/json reads them: a mixed
// deployment never stops a fold.
func TestJournalEventsIgnoreUnknownMembers(t *testing.T) {
	at := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	observed := `{"schema":2,"publisher":"observer@h","time":"2026-11-24T06:00:00Z","future":{"a":[1,{"b":null}],"c":"d"},` +
		`"vmid":101,"cluster":"pve","exists":true,"node":"pve1","kind":"qemu","status":"running",` +
		`"config":{"name":"web","cores":2,"memory_mib":2048,"gpu":"x",` +
		`"disks":{"scsi0":{"volume":"l:v","size_bytes":8,"iops":[1,2]}}},` +
		`"read_at":"2026-11-24T06:00:00Z","source":"observer","after_seq":7,"zz":true}`
	wantObserved := events.Observed{Meta: events.Meta{Schema: 2, Publisher: "observer@h", Time: at}, VMID: 101, Cluster: "pve",
		Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running",
		Config: events.GuestConfig{Name: "web", Cores: 2, MemoryMiB: 2048, Disks: map[string]events.Disk{"scsi0": {Volume: "l:v", SizeBytes: 8}}},
		ReadAt: at, Source: events.SourceObserver, AfterSeq: 7}
	action := `{"schema":2,"publisher":"planner","time":"2026-11-24T06:00:00Z","id":"a1","vmid":101,"cluster":"pve",` +
		`"node":"pve1","kind":"qemu","op":"migrate","priority":3,"migrate":{"target":"pve2","online":true,"bwlimit":10},` +
		`"snapshot":{"name":"converge-a1","before":"migrate","expires":"never"},"reason":"r","desired_seq":3,"basis_seq":5,"attempt":1}`
	wantAction := events.Action{Meta: events.Meta{Schema: 2, Publisher: "planner", Time: at}, ID: "a1", VMID: 101, Cluster: "pve",
		Node: "pve1", Kind: events.QEMU, Op: events.OpMigrate, Migrate: &events.MigrateOp{Target: "pve2", Online: true},
		Snapshot: &events.SnapshotOp{Name: "converge-a1", Before: events.OpMigrate}, Reason: "r", DesiredSeq: 3, BasisSeq: 5, Attempt: 1}
	result := `{"schema":2,"publisher":"executor","time":"2026-11-24T06:00:00Z","action_id":"a1","vmid":101,"cluster":"pve",` +
		`"op":"migrate","status":"succeeded","duration_ns":12,"observed":{"vmid":101,"cluster":"pve","exists":true,"node":"pve2",` +
		`"numa_nodes":[0,1],"config":{"cores":2,"cpu_type":{"x":1}},"read_at":"2026-11-24T06:00:00Z","source":"executor"},"executor":"e"}`
	wantResult := events.Result{Meta: events.Meta{Schema: 2, Publisher: "executor", Time: at}, ActionID: "a1", VMID: 101, Cluster: "pve",
		Op: events.OpMigrate, Status: events.ResultSucceeded, Executor: "e",
		Observed: &events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve2", Config: events.GuestConfig{Cores: 2},
			ReadAt: at, Source: events.SourceExecutor}}

	check := func(name string, got, want, std any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", name, got, want)
		}
		if !reflect.DeepEqual(got, std) {
			t.Errorf("%s: encoding/json reads %#v", name, std)
		}
	}
	o, err := events.Decode[events.Observed]([]byte(observed))
	var so events.Observed
	_ = json.Unmarshal([]byte(observed), &so)
	check("observed", o, wantObserved, so, err)
	a, err := events.Decode[events.Action]([]byte(action))
	var sa events.Action
	_ = json.Unmarshal([]byte(action), &sa)
	check("action", a, wantAction, sa, err)
	r, err := events.Decode[events.Result]([]byte(result))
	var sr events.Result
	_ = json.Unmarshal([]byte(result), &sr)
	check("result", r, wantResult, sr, err)
}

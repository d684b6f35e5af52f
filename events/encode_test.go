package events_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestEncodeMatchesEncodingJSON: Encode writes the very bytes encoding/json
// writes (the journal's bytes so far), for every event type converge
// journals and for desired states: empty, hand-filled, and with every
// field filled by reflection, with plain strings and with strings that
// encoders escape differently (HTML characters, U+2028, invalid UTF-8) in
// every string field and map key.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	o := &events.Observed{Meta: events.NewMeta("observer@h", "c<&>", now), VMID: 101, Cluster: "pve", Exists: true,
		Node: "pve1", Kind: events.QEMU, Status: "running", Lock: "backup", Template: true, Digest: "d",
		Config:  events.GuestConfig{Name: "web", Description: "a <b> & \"c\"\n", Tags: []string{"x", "y"}, Cores: 2, MemoryMiB: 512, OnBoot: true},
		Pending: map[string]string{"cores": "4", "memory": "1024"}, ReadAt: now.In(time.FixedZone("", 3600)), Source: events.SourceExecutor}
	values := []any{
		events.Observed{}, o,
		events.Action{}, events.Action{Meta: events.NewMeta("p", "c", now), ID: "a-1", VMID: 101, Cluster: "pve", Node: "pve1",
			Kind: events.LXC, Op: events.OpSetConfig, Set: map[string]string{"b": "2", "a": "1", "": "0", "é": "x", "B": "y"}, Delete: []string{"tags"},
			Revert: []string{}, Digest: "d", Timeout: time.Minute, Reason: "drift: é", DesiredSeq: 5, BasisSeq: 6, Attempt: 2},
		events.Result{}, events.Result{Meta: events.NewMeta("e", "c", now), ActionID: "a-1", VMID: 101, Cluster: "pve",
			Op: events.OpStart, Status: events.ResultFailed, UPID: "UPID:pve1:1:2:3:qmstart:101:root@pam!t:", Node: "pve1",
			Error: "VM is locked (backup)", ErrorClass: "locked", Warnings: 1, TaskLog: []string{"TASK ERROR: x"},
			Reason: "r", Observed: o, Executor: "e"},
		events.Heartbeat{}, events.Heartbeat{Meta: events.NewMeta("o", "", now), Cluster: "pve", Observer: "o", Reachable: true,
			Error: "EOF", Pass: 9, Guests: 3, Interval: 10 * time.Second, VerifyPeriod: -1, Unread: []int{}},
		events.Control{}, events.Control{Meta: events.NewMeta("cli", "", now), Command: events.CommandResync, VMIDs: []int{101, 102}},
		// Keys with invalid UTF-8, several in one map: ordered and
		// written as encoding/json does.
		events.Action{Set: map[string]string{"b\xff": "1", "a\xfe<": "2", "a": "3", "a\ufffd": "4"}},
		events.Observed{Config: events.GuestConfig{Disks: map[string]events.Disk{"x\xff": {Volume: "v\xff"}, "x\ufffd": {}, "x": {}}}},
		events.Desired{}, events.Desired{VMID: 101, Net: map[string]events.NetWant{
			"net0": {Rate: ptrTo(12.5)}, "net1": {Rate: ptrTo(1e21)}, "net2": {Rate: ptrTo(1e-7)}, "net3": {Rate: ptrTo(0.1)},
			"net4": {Rate: ptrTo(math.Copysign(0, -1))}, "net5": {Rate: ptrTo(123456789.0)}}},
	}
	for _, tricky := range []bool{false, true} {
		for _, v := range []any{&events.Observed{}, &events.Heartbeat{}, &events.Action{}, &events.Result{}, &events.Control{}, &events.Desired{}, &events.Addresses{}} {
			f := &filler{t: t, tricky: tricky}
			f.fill(reflect.ValueOf(v).Elem(), reflect.TypeOf(v).Elem().Name())
			values = append(values, v)
		}
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T:\n Encode        %s\n encoding/json %s", v, got, want)
		}
	}
}

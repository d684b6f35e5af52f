package events_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestEncodeMatchesEncodingJSON: Encode writes the very bytes encoding/json
// writes, for every event type converge journals, empty and full.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	o := &events.Observed{Meta: events.NewMeta("observer@h", "c<&>", now), VMID: 101, Cluster: "pve", Exists: true,
		Node: "pve1", Kind: events.QEMU, Status: "running", Lock: "backup", Template: true, Digest: "d",
		Config:  events.GuestConfig{Name: "web", Description: "a <b> & \"c\"\n", Tags: []string{"x", "y"}, Cores: 2, MemoryMiB: 512, OnBoot: true},
		Pending: map[string]string{"cores": "4", "memory": "1024"}, ReadAt: now, Source: events.SourceExecutor}
	for _, v := range []any{
		events.Observed{}, o,
		events.Action{}, events.Action{Meta: events.NewMeta("p", "c", now), ID: "a-1", VMID: 101, Cluster: "pve", Node: "pve1",
			Kind: events.LXC, Op: events.OpSetConfig, Set: map[string]string{"b": "2", "a": "1"}, Delete: []string{"tags"},
			Digest: "d", Timeout: time.Minute, Reason: "drift: é", DesiredSeq: 5, BasisSeq: 6, Attempt: 2},
		events.Result{}, events.Result{Meta: events.NewMeta("e", "c", now), ActionID: "a-1", VMID: 101, Cluster: "pve",
			Op: events.OpStart, Status: events.ResultFailed, UPID: "UPID:pve1:1:2:3:qmstart:101:root@pam!t:", Node: "pve1",
			Error: "VM is locked (backup)", ErrorClass: "locked", Warnings: 1, TaskLog: []string{"TASK ERROR: x"},
			Reason: "r", Observed: o, Executor: "e"},
		events.Heartbeat{}, events.Heartbeat{Meta: events.NewMeta("o", "", now), Cluster: "pve", Observer: "o", Reachable: true,
			Error: "EOF", Pass: 9, Guests: 3, Interval: 10 * time.Second},
		events.Control{Meta: events.NewMeta("cli", "", now), Command: events.CommandResync},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T:\n goccy %s\n std   %s", v, got, want)
		}
	}
}

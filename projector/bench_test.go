package projector_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// benchEvents is one guest's typical cycle: desired, observation, action,
// started, final result with a read-back.
func benchEvents(n int) []projector.Event {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var out []projector.Event
	seq := uint64(0)
	add := func(kind events.Kind, vmid int, v any) {
		seq++
		b, _ := json.Marshal(v)
		if raw, ok := v.([]byte); ok {
			b = raw
		}
		out = append(out, projector.Event{Seq: seq, Subject: events.Subject(kind, "pve", vmid) + ".3", Data: b, Time: t0})
	}
	for i := 0; i < n; i++ {
		vmid := 100 + i%1000
		add(events.KindDesired, vmid, []byte(fmt.Sprintf(`{"vmid":%d,"power":"running","cores":2,"description":"change %d"}`, vmid, i)))
		o := events.Observed{Meta: events.NewMeta("observer", "", t0), VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1",
			Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567", ReadAt: t0.Add(time.Duration(i)),
			Config: events.GuestConfig{Name: "vm", Description: "old", Tags: []string{"prod"}, Cores: 2, MemoryMiB: 2048}}
		add(events.KindObserved, vmid, o)
		a := events.Action{Meta: events.NewMeta("planner", "c", t0), ID: fmt.Sprintf("pve-%d-%d-1", vmid, seq-1), VMID: vmid,
			Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig, Set: map[string]string{"description": "x"},
			Reason: "config drift: description", DesiredSeq: seq - 1, BasisSeq: seq}
		add(events.KindAction, vmid, a)
		add(events.KindResult, vmid, events.Result{Meta: a.Meta, ActionID: a.ID, VMID: vmid, Cluster: "pve", Op: a.Op,
			Status: events.ResultStarted, UPID: "UPID:pve1:00001234:00001234:6B000000:qmconfig:101:root@pam!c:", Node: "pve1"})
		o.ReadAt, o.Source = o.ReadAt.Add(time.Millisecond), events.SourceExecutor
		add(events.KindResult, vmid, events.Result{Meta: a.Meta, ActionID: a.ID, VMID: vmid, Cluster: "pve", Op: a.Op,
			Status: events.ResultSucceeded, Observed: &o})
	}
	return out
}

// BenchmarkFold folds journal events into views; ns/op is per event.
func BenchmarkFold(b *testing.B) {
	evs := benchEvents(2000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	var p *projector.Projector
	for b.Loop() {
		if i%len(evs) == 0 {
			p = projector.New("pve")
		}
		if ch := p.Apply(evs[i%len(evs)]); ch.Err != nil {
			b.Fatal(ch.Err)
		}
		i++
	}
}

package planner

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

func benchView(vmid int) *projector.View {
	d := &events.Desired{VMID: vmid, Power: ptr(events.PowerRunning), Cores: ptr(4), MemoryMiB: ptr(4096),
		Description: ptr("managed by converge"), Tags: &[]string{"prod", "web"}}
	o := &events.Observed{VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running",
		Digest: "0123456789abcdef0123456789abcdef01234567", ReadAt: t0,
		Config: events.GuestConfig{Name: "vm", Description: "old", Tags: []string{"prod"}, Cores: 2, MemoryMiB: 2048}}
	return viewOf(d, o)
}

// BenchmarkPlan is one planning decision for a guest with config drift on
// a running VM (set_config then reboot).
func BenchmarkPlan(b *testing.B) {
	v, c, p := benchView(101), fresh(), policy()
	b.ReportAllocs()
	for b.Loop() {
		if d := Plan(v, c, p, t0); len(d.Steps) != 2 {
			b.Fatal(d)
		}
	}
}

// BenchmarkPlanConverged is the common case of a full pass: nothing to do.
func BenchmarkPlanConverged(b *testing.B) {
	v, c, p := benchView(101), fresh(), policy()
	v.Observed.Config = events.GuestConfig{Name: "vm", Description: "managed by converge", Tags: []string{"web", "prod"}, Cores: 4, MemoryMiB: 4096}
	b.ReportAllocs()
	for b.Loop() {
		if d := Plan(v, c, p, t0); d.Status.Kind != Converged {
			b.Fatal(d)
		}
	}
}

// BenchmarkPlannerMemory measures the planner's heap per guest: an engine
// that folded, for each of 100,000 guests, a desired event, an
// observation, an action and its final result (with an embedded
// read-back), planned every guest and handed out every document. Reported
// as B/guest.
func BenchmarkPlannerMemory(b *testing.B) {
	const guests = 100000
	for b.Loop() {
		e, err := NewEngine(configNamed("bench"))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		seq := uint64(0)
		next := func() uint64 { seq++; return seq }
		hb := projector.Event{Seq: next(), Subject: "pve.heartbeat.pve", Data: mustJSON(events.Heartbeat{Meta: events.NewMeta("o", "", t0), Cluster: "pve", Reachable: true})}
		e.Begin(hb.Seq, t0)
		e.Fold([]projector.Event{hb}, 0, t0)
		e.Tick(t0) // observations fresh: the stale flip replans
		_ = e.Ready()
		for vmid := 100; vmid < 100+guests; vmid++ {
			o := events.Observed{Meta: events.NewMeta("observer@host", "", t0), VMID: vmid, Cluster: "pve", Exists: true,
				Node: "pve1", Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567",
				Config: events.GuestConfig{Name: fmt.Sprintf("vm-%d", vmid), Description: "web frontend", Tags: []string{"prod", "web"}, Cores: 2, MemoryMiB: 2048},
				ReadAt: t0, Source: events.SourceObserver}
			ds := next()
			d := projector.Event{Seq: ds, Subject: events.StoredSubject(events.KindDesired, "pve", vmid, DefaultPartitions),
				Data: []byte(fmt.Sprintf(`{"vmid":%d,"power":"running","cores":2,"memory_mib":2048,"description":"web frontend","tags":["prod","web"]}`, vmid))}
			ob := projector.Event{Seq: next(), Subject: events.StoredSubject(events.KindObserved, "pve", vmid, DefaultPartitions), Data: mustJSON(o)}
			a := events.Action{Meta: events.NewMeta("planner@host", fmt.Sprintf("desired-pve-%d-%d", vmid, ds), t0),
				ID: fmt.Sprintf("pve-%d-%d-1", vmid, ds), VMID: vmid, Cluster: "pve", Node: "pve1", Kind: events.QEMU,
				Op: events.OpSetConfig, Set: map[string]string{"description": "web frontend"}, Reason: "config drift: description",
				DesiredSeq: ds, BasisSeq: ds + 1, Attempt: 1}
			ac := projector.Event{Seq: next(), Subject: events.StoredSubject(events.KindAction, "pve", vmid, DefaultPartitions), Data: mustJSON(a)}
			o.Source, o.ReadAt = events.SourceExecutor, t0.Add(time.Second)
			r := events.Result{Meta: a.Meta, ActionID: a.ID, VMID: vmid, Cluster: "pve", Op: a.Op, Status: events.ResultSucceeded,
				UPID: fmt.Sprintf("UPID:pve1:%08X:00001234:6B000000:qmconfig:%d:root@pam!converge:", vmid, vmid), Node: "pve1",
				Observed: &o, Executor: "executor@host"}
			re := projector.Event{Seq: next(), Subject: events.StoredSubject(events.KindResult, "pve", vmid, DefaultPartitions), Data: mustJSON(r)}
			e.Fold([]projector.Event{d, ob, ac, re}, 0, t0)
		}
		// Every document handed out, as the loop's writer takes them.
		for at := t0; e.Dirty() > 0; {
			at = at.Add(DefaultFlushInterval)
			e.Tick(at)
			_ = e.Ready()
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perGuest := float64(after.HeapAlloc-before.HeapAlloc) / guests
		if n := e.Guests(); n != guests {
			b.Fatalf("%d views", n)
		}
		if c := e.Counts(); c[Converged] != guests {
			b.Fatalf("not every guest converged: %v", c)
		}
		b.ReportMetric(perGuest, "B/guest")
		if path := os.Getenv("CONVERGE_HEAP_PROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		runtime.KeepAlive(e)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// convergedEngine is an engine caught up on 100,000 converged guests.
func convergedEngine(b testing.TB, guests int) *Engine {
	// Observations stay fresh however far a benchmark's clock goes.
	cfg := configNamed("bench")
	cfg.Policy.ObserverTimeout = 1000 * time.Hour
	e, err := NewEngine(cfg)
	if err != nil {
		b.Fatal(err)
	}
	seq := uint64(0)
	next := func() uint64 { seq++; return seq }
	hb := projector.Event{Seq: next(), Subject: "pve.heartbeat.pve", Data: mustJSON(events.Heartbeat{Meta: events.NewMeta("o", "", t0), Cluster: "pve", Reachable: true})}
	e.Begin(hb.Seq, t0)
	e.Fold([]projector.Event{hb}, 0, t0)
	e.Tick(t0)
	_ = e.Ready()
	for vmid := 100; vmid < 100+guests; vmid++ {
		o := events.Observed{Meta: events.NewMeta("observer@host", "", t0), VMID: vmid, Cluster: "pve", Exists: true,
			Node: "pve1", Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567",
			Config: events.GuestConfig{Name: fmt.Sprintf("vm-%d", vmid), Description: "web frontend", Tags: []string{"prod", "web"}, Cores: 2, MemoryMiB: 2048},
			ReadAt: t0, Source: events.SourceObserver}
		d := projector.Event{Seq: next(), Subject: events.StoredSubject(events.KindDesired, "pve", vmid, DefaultPartitions),
			Data: []byte(fmt.Sprintf(`{"vmid":%d,"power":"running","cores":2,"memory_mib":2048,"description":"web frontend","tags":["prod","web"]}`, vmid))}
		ob := projector.Event{Seq: next(), Subject: events.StoredSubject(events.KindObserved, "pve", vmid, DefaultPartitions), Data: mustJSON(o)}
		e.Fold([]projector.Event{d, ob}, 0, t0)
	}
	for at := t0; e.Dirty() > 0; {
		at = at.Add(DefaultFlushInterval)
		e.Tick(at)
		_ = e.Ready()
	}
	if c := e.Counts(); c[Converged] != guests {
		b.Fatalf("not every guest converged: %v", c)
	}
	return e
}

// BenchmarkFullPass100k is the periodic full pass (FullPassInterval) over
// 100,000 converged guests, from the heartbeat that starts it to the tick
// that ends it; stall-ms is the longest the planner's loop waited on the
// engine meanwhile (it plans nothing else while the engine works).
func BenchmarkFullPass100k(b *testing.B) {
	e := convergedEngine(b, 100000)
	now, seq := t0, e.LastSeq()
	var stall time.Duration
	timed := func(f func()) {
		t := time.Now()
		f()
		stall = max(stall, time.Since(t))
		if r := e.Ready(); len(r.Actions) != 0 {
			b.Fatalf("%d actions", len(r.Actions))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		// A heartbeat (the observer is alive) a full pass after the last.
		now, seq = now.Add(e.cfg.FullPassInterval), seq+1
		hb := projector.Event{Seq: seq, Subject: "pve.heartbeat.pve", Time: now,
			Data: mustJSON(events.Heartbeat{Meta: events.NewMeta("o", "", now), Cluster: "pve", Reachable: true})}
		timed(func() { e.Fold([]projector.Event{hb}, 0, now) })
		for e.sweeping() {
			now = now.Add(e.cfg.FlushInterval)
			timed(func() { e.Tick(now) })
		}
		if c := e.Counts(); c[Converged] != 100000 {
			b.Fatalf("%v", c)
		}
	}
	b.ReportMetric(float64(stall)/1e6, "stall-ms")
}

// BenchmarkRewriteAll100k hands out every document of 100,000 guests (a
// views bucket recreated, or a mass change): flush by flush, as the loop
// ticks; stall-ms is the longest tick.
func BenchmarkRewriteAll100k(b *testing.B) {
	e := convergedEngine(b, 100000)
	now := t0.Add(e.cfg.FullPassInterval / 2)
	var stall time.Duration
	b.ReportAllocs()
	for b.Loop() {
		e.RewriteAll()
		docs := 0
		for e.Dirty() > 0 {
			now = now.Add(e.cfg.FlushInterval)
			t := time.Now()
			e.Tick(now)
			stall = max(stall, time.Since(t))
			if f := e.Ready().Flush; f != nil {
				docs += len(f.Docs)
			}
		}
		if docs != 100000 {
			b.Fatalf("%d documents", docs)
		}
	}
	b.ReportMetric(float64(stall)/1e6, "stall-ms")
}

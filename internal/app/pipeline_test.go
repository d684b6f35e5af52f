package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// pipeline is a planner and an executor in one process on an embedded
// NATS, driving a simulator; the test runs the observer's passes itself.
type pipeline struct {
	a   *app.App
	sim *pvesim.Sim
	obs *observer.Observer
	rd  views.Reader

	// settles counts the pipeline's settles; under the late fault the
	// late-th gets the wrong action (settle_test.go), and the observer
	// reads through reads.
	settles, late int
	reads         *lateReads
}

// startPipeline starts the simulator with opts, a planner and an executor,
// and an observer of the default config changed by obsMod, if set (its logger
// silenced).
func startPipeline(t *testing.T, opts pvesim.Options, obsMod func(*observer.Config), mods ...func(*app.Config)) *pipeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sim := pvesimtest.Start(t, opts)
	cfg := app.DefaultConfig()
	cfg.Roles = app.Roles{Planner: true, Executor: true}
	cfg.Embedded = &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.Logger = pvesimtest.Client(t, sim), zerolog.Nop()
	for _, m := range mods {
		m(&cfg)
	}
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	p := &pipeline{a: a, sim: sim, late: lateFault(t)}
	var px observer.Proxmox = pvesimtest.Client(t, sim)
	if p.late > 0 {
		p.reads = &lateReads{Proxmox: px, t: t, frozen: map[int]*frozenConfig{}}
		px = p.reads
	}
	obsCfg := observer.DefaultConfig()
	if obsMod != nil {
		obsMod(&obsCfg)
	}
	obsCfg.Logger = zerolog.Nop()
	if p.obs, err = observer.New(obsCfg, px, a.Bus()); err != nil {
		t.Fatal(err)
	}
	vs, err := a.Bus().ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	p.rd = views.Reader{Store: vs, Cluster: events.DefaultCluster}
	return p
}

func (p *pipeline) pass(t *testing.T) {
	t.Helper()
	if _, err := p.obs.Pass(pvesimtest.Context(t)); err != nil {
		t.Fatal(err)
	}
}

func (p *pipeline) desire(t *testing.T, d *events.Desired) uint64 {
	t.Helper()
	m, err := events.DesiredMessage(d, events.PublishOptions{Publisher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := p.a.Bus().Append(pvesimtest.Context(t), m, journal.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Seq
}

// until polls cond, a condition of the planner and executor (which run on
// the real clock), until it holds or limit passes.
func until(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
	return cond()
}

// waitState waits until the guest's document, written at or after seq, is
// in state, or until limit passes; it returns the last document read.
func (p *pipeline) waitState(t *testing.T, vmid int, seq uint64, state planner.StatusKind, limit time.Duration) *views.GuestDoc {
	t.Helper()
	var doc *views.GuestDoc
	until(limit, func() bool {
		d, err := p.rd.Guest(pvesimtest.Context(t), vmid)
		if err == nil && d != nil {
			doc = d
		}
		return doc != nil && doc.View != nil && doc.View.Seq >= seq && doc.Status.Kind == state
	})
	return doc
}

package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

const tokenID, tokenSecret = "root@pam!bench", "bench-secret"

func (r *run) setup(ctx context.Context, dir string) error {
	if err := r.startSim(ctx); err != nil {
		return err
	}
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Logger = r.sim.URL(), tokenID, tokenSecret, r.log
	if !r.o.ShippedLimits {
		pc.NodeCalls = 0
	}
	px, err := pve.New(pc)
	if err != nil {
		return err
	}
	// Every role on its own connection, as `converge up` runs them; the
	// observer polls as configured until the idle phase drives it.
	cfg := app.DefaultConfig()
	cfg.Name, cfg.Roles, cfg.Embedded = "bench", app.All, &natsserver.Options{DataDir: dir, Name: "bench"}
	cfg.Bus.Partitions, cfg.Proxmox, cfg.Logger, cfg.Executors = r.o.Partitions, px, r.log, r.o.Executors
	cfg.Observer.VerifyOff, cfg.Observer.ReadConcurrency = true, 16
	// The throughput run measures converge against a simulator without
	// latency: by default the per-node limits, which stand for what a
	// Proxmox node takes, are off (they are measured where they matter:
	// the Proxmox and estate profiles); ShippedLimits keeps them.
	cfg.Planner.Planner.OnDecision, cfg.Planner.Planner.Policy.ObserverTimeout = r.onDecision, time.Minute
	if !r.o.ShippedLimits {
		cfg.Planner.Planner.Limits.NodeConcurrencyUnlimited = true
		cfg.Executor.Concurrency, cfg.Executor.NodeRateUnlimited = r.o.Concurrency, true
	}
	r.app, err = app.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	r.b = r.app.Bus()
	// Measure the steady state: every executor holding its share of the
	// partitions (the first to start owns them all until the others join).
	execs := r.app.Executors()
	return waitFor(ctx, 2*time.Minute, "executors sharing the partitions", func() (int, int, bool) {
		owned, balanced := 0, true
		for _, ex := range execs {
			n := len(ex.Partitions())
			owned += n
			balanced = balanced && n >= r.o.Partitions/len(execs)
		}
		return owned, r.o.Partitions, balanced && owned == r.o.Partitions
	})
}

// startSim starts the simulator with the bench's guests; the latency run
// takes its end times from the mutations it receives.
func (r *run) startSim(ctx context.Context) error {
	onMutation := func(vmid int, at int64) {
		if i := vmid - 100; r.latencyRun.Load() && i >= 0 && i < len(r.mutated) {
			atomic.CompareAndSwapInt64(&r.mutated[i], 0, at)
		}
	}
	if len(r.o.SimCommand) > 0 {
		s, err := startExternal(ctx, r.o.SimCommand, r.o, r.log, onMutation, r.fail)
		if err != nil {
			return err
		}
		r.sim = s
		return nil
	}
	sim, err := pvesim.New(pvesim.Options{Nodes: 3, Guests: r.o.Guests, Tokens: map[string]string{tokenID: tokenSecret},
		Faults:     pvesim.Faults{TaskLatency: pvesim.Duration(r.o.TaskLatency), ResourcesLag: pvesim.Duration(r.o.ResourcesLag)},
		OnMutation: func(m pvesim.Mutation) { onMutation(m.VMID, m.At.UnixNano()) }})
	if err != nil {
		return err
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		return err
	}
	r.sim = inProcess{sim}
	return nil
}

func (r *run) teardown() {
	if r.app != nil {
		r.app.Stop()
		if err := r.app.Wait(); err != nil {
			r.log.Error().Err(err).Msg("bench roles stopped")
		}
	}
	if r.sim != nil {
		_ = r.sim.Close()
	}
}

func (r *run) onDecision(v *projector.View, d planner.Decision) {
	i := v.VMID - 100
	if i < 0 || i >= len(r.converged) {
		return
	}
	if v.Observed != nil {
		if _, loaded := r.seen.LoadOrStore(v.VMID, true); !loaded {
			r.observed.Add(1)
		}
	}
	if d.Status.Kind == planner.Converged && v.DesiredSeq > atomic.LoadUint64(&r.converged[i]) {
		atomic.StoreUint64(&r.converged[i], v.DesiredSeq)
		r.advancedAt.Store(time.Now().UnixNano())
	}
}

// waitFor polls a condition of the running pipeline, reporting progress.
func waitFor(ctx context.Context, limit time.Duration, what string, progress func() (int, int, bool)) error {
	return waitForEvery(ctx, 10*time.Millisecond, limit, what, progress)
}

// waitForEvery is waitFor polling every interval.
func waitForEvery(ctx context.Context, interval, limit time.Duration, what string, progress func() (int, int, bool)) error {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, _, ok := progress(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		if time.Now().After(deadline) {
			done, total, _ := progress()
			return fmt.Errorf("bench: %s did not finish within %s (%d of %d)", what, limit, done, total)
		}
	}
}

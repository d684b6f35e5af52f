package bench

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
)

// RunEstate runs the estate profile: the simulator (its own process) gets
// the estate's guests through its API, converge (this process, as `converge
// up` assembles it) observes them all, the profile's latencies are put in
// force, every guest's desired change (a config write, then a start) is
// published at once, and the makespan runs until the planner has seen
// every guest converged. Converge's CPU is measured over the makespan, its
// peak RSS over the whole run; then drift detection: how long until every
// guest's config was read again.
func RunEstate(ctx context.Context, o EstateOptions) (*EstateReport, *EstateDetails, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	if o.Progress == nil {
		o.Progress = noProgress
	}
	start := time.Now()
	rep := &EstateReport{Profile: "estate", Limits: o.name(), Guests: o.Guests, Nodes: o.Nodes, APILatencyMs: ms(o.APILatency),
		PowerTaskS: o.PowerTask.Seconds(), ConfigTaskS: o.ConfigTask.Seconds(), SimProcess: len(o.SimCommand) > 0,
		VerifyWaitS: o.VerifyWait.Seconds(), ConvergePeakRSSSince: "process"}
	if resetPeakRSS() {
		rep.ConvergePeakRSSSince = "run"
	}
	per := spread(o.Guests, o.Nodes)
	rep.IdealMakespanS = IdealMakespan(ProxmoxIdeal(per, o.APILatency, o.ConfigTask, o.PowerTask, false)).Seconds()
	rep.IdealUnboundedMakespanS = IdealMakespan(ProxmoxIdeal(per, o.APILatency, o.ConfigTask, o.PowerTask, true)).Seconds()
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "converge-bench-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sim, err := startEstateSim(ctx, o, cancel)
	if err != nil {
		return nil, nil, err
	}
	defer sim.close()
	if _, err := sim.createGuests(ctx, o); err != nil {
		return nil, nil, err
	}
	det := &EstateDetails{Setup: time.Since(start)}

	conv := o.convergeConfig()
	rep.LimitsLifted, rep.NodeConcurrency, rep.NodeRate = conv.lifted, conv.nodeConcurrency, conv.nodeRate
	pc := conv.pve
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Logger = sim.url, tokenID, tokenSecret, o.Logger
	px, err := pve.New(pc)
	if err != nil {
		return nil, nil, err
	}
	reads := newReadCounter(px, o.PowerTask)
	tr := &convergeTracker{convergedAt: make([]int64, o.Guests)}
	cfg := conv.cfg
	cfg.Name, cfg.Roles, cfg.Embedded = "bench", app.All, &natsserver.Options{DataDir: dir, Name: "bench"}
	cfg.Proxmox, cfg.Logger = reads, o.Logger
	cfg.Planner.Planner.OnDecision = tr.onDecision
	a, err := app.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		a.Stop()
		if err := a.Wait(); err != nil {
			o.Logger.Error().Err(err).Msg("bench roles stopped")
		}
	}()
	err = waitForEvery(ctx, 50*time.Millisecond, 10*time.Minute, "first observation of every guest", func() (int, int, bool) {
		n := int(tr.observed.Load())
		o.Progress("observing guests", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	})
	if err != nil {
		return nil, nil, err
	}
	det.Observe = time.Since(start) - det.Setup
	if err := sim.setLatencies(ctx, o); err != nil {
		return nil, nil, err
	}
	if err := estateChange(ctx, o, a, sim, tr, reads, rep); err != nil {
		return nil, nil, err
	}
	if err := sim.checkDone(ctx, o.Guests); err != nil {
		return nil, nil, err
	}
	rep.ConvergePeakRSSMB = float64(peakRSS()) / (1 << 20)
	det.Elapsed = time.Since(start)
	return rep, det, nil
}

// estateChange is the timed window and the drift measurement after it.
func estateChange(ctx context.Context, o EstateOptions, a *app.App, sim *estateSim, tr *convergeTracker, reads *readCounter, rep *EstateReport) error {
	b := a.Bus()
	actions0 := streamCount(ctx, b, "pve.action.>")
	st0, err := sim.stats(ctx)
	if err != nil {
		return err
	}
	reads.tasks.arm(true)
	simCPU0, cpu0, t0 := sim.cpu(), selfCPU(), time.Now()
	if err := publishDesired(ctx, b.JS, o.Guests, proxmoxBody); err != nil {
		return err
	}
	limit := 10*time.Minute + time.Duration(o.Guests/o.Nodes+1)*(o.PowerTask+o.ConfigTask+4*o.APILatency)
	err = waitForEvery(ctx, 50*time.Millisecond, limit, "convergence of every guest", func() (int, int, bool) {
		n := int(tr.done.Load())
		o.Progress("converging", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	})
	if err != nil {
		return err
	}
	// Drift detection counts from here: every read after is a re-read.
	reads.tasks.arm(false)
	rep.Waves = reads.tasks.waves(rep.NodeConcurrency)
	reads.arm()
	t1 := time.Now()
	cpu1, simCPU1 := selfCPU(), sim.cpu()
	var last int64
	for i := range tr.convergedAt {
		last = max(last, atomic.LoadInt64(&tr.convergedAt[i]))
	}
	rep.MakespanS = time.Unix(0, last).Sub(t0).Seconds()
	if rep.IdealMakespanS > 0 {
		rep.MakespanRatio = rep.MakespanS / rep.IdealMakespanS
	}
	rep.ConvergeCPUS, rep.SimCPUS = (cpu1 - cpu0).Seconds(), (simCPU1 - simCPU0).Seconds()
	if wall := t1.Sub(t0).Seconds(); wall > 0 {
		rep.ConvergeCoresAvg = rep.ConvergeCPUS / wall
	}
	st1, err := sim.stats(ctx)
	if err != nil {
		return err
	}
	rep.PveCalls, rep.Tasks = st1.Calls-st0.Calls, st1.Tasks-st0.Tasks
	rep.PveCallsPerGuest = float64(rep.PveCalls) / float64(o.Guests)
	rep.Actions = streamCount(ctx, b, "pve.action.>") - actions0
	if o.VerifyWait <= 0 {
		return nil
	}
	err = waitForEvery(ctx, 100*time.Millisecond, o.VerifyWait, "verification", func() (int, int, bool) {
		n, _ := reads.verified(o.Guests)
		o.Progress("verifying", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	})
	n, lastRead := reads.verified(o.Guests)
	rep.VerifyGuests, rep.VerifyAllS = n, -1
	end := time.Now().UnixNano()
	if err == nil {
		rep.VerifyAllS, end = time.Unix(0, lastRead).Sub(t1).Seconds(), lastRead
	} else if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	rep.VerifyReads, rep.VerifyMaxReadsPerNodeS = reads.reads(t1.UnixNano(), end)
	return nil
}

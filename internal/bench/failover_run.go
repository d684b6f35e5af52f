package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// failoverRun is one RunFailover.
type failoverRun struct {
	o          FailoverOptions
	dir        string
	partitions int
	natsURL    string
	pveURL     string
	kv         jetstream.KeyValue
	execs      []*execProc
	gens       []int
	watch      *failoverWatch
	killed     map[string]bool
}

// RunFailover measures how long an executor's partitions stand still when
// it is SIGKILLed under load (doc.go, "The failover profile"): the
// simulator, NATS, an observer and a planner run in this process, the
// executors in processes of their own (o.ExecutorCommand); a steady stream
// of desired changes keeps actions in flight; one executor at a time is
// killed, the time until its partitions act again measured from the
// journal, and it is restarted before the next kill. Duplicate tasks are
// counted from the simulator's mutating calls.
func RunFailover(ctx context.Context, o FailoverOptions) (FailoverReport, *FailoverDetails, error) {
	if err := o.Validate(); err != nil {
		return FailoverReport{}, nil, err
	}
	if o.Progress == nil {
		o.Progress = noProgress
	}
	start := time.Now()
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "converge-failover-")
		if err != nil {
			return FailoverReport{}, nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	r := &failoverRun{o: o, dir: dir, killed: map[string]bool{}}
	rep, det, err := r.run(ctx)
	if det != nil {
		det.Elapsed = time.Since(start)
	}
	return rep, det, err
}

func (r *failoverRun) run(ctx context.Context) (FailoverReport, *FailoverDetails, error) {
	o := r.o
	cfg := app.DefaultConfig()
	r.partitions = cfg.Bus.Partitions
	r.watch = newFailoverWatch(r.partitions)
	sim, err := proxmoxSim(ProxmoxOptions{Nodes: o.Nodes, Guests: o.Guests, APILatency: o.APILatency, PowerTask: o.PowerTask,
		ConfigTask: o.ConfigTask, ResourcesLag: pvesim.DefaultPvestatdCycle}, nil)
	if err != nil {
		return FailoverReport{}, nil, err
	}
	defer sim.Close()
	// The executors call the simulator through a front that records
	// their mutating calls and the answers.
	front, err := startRecordingFront(sim, r.watch.onMutation)
	if err != nil {
		return FailoverReport{}, nil, err
	}
	defer front.Close()
	r.pveURL = front.url
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Logger = sim.URL(), tokenID, tokenSecret, o.Logger
	px, err := pve.New(pc)
	if err != nil {
		return FailoverReport{}, nil, err
	}
	// The observer and the planner in this process, as `converge up`
	// runs them; the planner's lease TTL is the executors', and the
	// mass-change guard lets the load's shutdowns through, as an operator
	// would for a planned change.
	tr := &convergeTracker{convergedAt: make([]int64, o.Guests)}
	cfg.Name, cfg.Roles = "bench", app.Roles{Observer: true, Planner: true}
	cfg.Embedded = &natsserver.Options{DataDir: filepath.Join(r.dir, "nats"), Listen: "127.0.0.1:0", Name: "bench"}
	cfg.Proxmox, cfg.Logger = px, o.Logger
	cfg.Planner.LeaseTTL, cfg.Planner.Planner.Limits.GuardShare = o.LeaseTTL, 1
	cfg.Planner.Planner.OnDecision = tr.onDecision
	a, err := app.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return FailoverReport{}, nil, err
	}
	defer func() {
		a.Stop()
		if err := a.Wait(); err != nil {
			o.Logger.Error().Err(err).Msg("bench roles stopped")
		}
	}()
	r.natsURL = a.Server().ClientURL()
	b := a.Bus()
	s, err := b.Stream(ctx)
	if err != nil {
		return FailoverReport{}, nil, err
	}
	cc, err := r.watch.start(ctx, s)
	if err != nil {
		return FailoverReport{}, nil, err
	}
	defer cc.Stop()
	r.execs, r.gens = make([]*execProc, o.Executors), make([]int, o.Executors)
	defer func() {
		for _, p := range r.execs {
			if p != nil {
				p.stop(10 * time.Second)
			}
		}
	}()
	for i := range r.execs {
		if r.execs[i], err = startExecutor(o, r.dir, r.execName(i), r.natsURL, r.pveURL); err != nil {
			return FailoverReport{}, nil, err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, "first observation of every guest", func() (int, int, bool) {
		n := int(tr.observed.Load())
		o.Progress("observing guests", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	}); err != nil {
		return FailoverReport{}, nil, err
	}
	if r.kv, err = waitKV(ctx, b.JS); err != nil {
		return FailoverReport{}, nil, err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); r.load(loadCtx, b.JS) }()
	defer func() { stopLoad(); <-loadDone }()

	det := &FailoverDetails{}
	for k := range o.Kills {
		o.Progress("kills", k, o.Kills)
		kt, err := r.killOnce(ctx, k%o.Executors)
		if err != nil {
			return FailoverReport{}, nil, err
		}
		det.PerKill = append(det.PerKill, kt)
	}
	o.Progress("kills", o.Kills, o.Kills)
	lost := 0
	for i := range o.Pauses {
		o.Progress("pauses", i, o.Pauses)
		moved, err := r.pauseOnce(ctx, i%o.Executors)
		if err != nil {
			return FailoverReport{}, nil, err
		}
		if moved {
			lost++
		}
	}
	stopLoad()
	<-loadDone
	// Every action done before counting: a late duplicate would be missed.
	if err := waitForEvery(ctx, 100*time.Millisecond, 3*time.Minute, "every action finished", func() (int, int, bool) {
		n := r.watch.quiet()
		return n, 0, n == 0
	}); err != nil {
		return FailoverReport{}, nil, err
	}
	rep := r.report(det)
	if o.Pauses > 0 {
		rep.Pauses, rep.PauseS, rep.PausesLostLeases = o.Pauses, o.PauseFor.Seconds(), lost
	}
	return rep, det, nil
}

func (r *failoverRun) execName(slot int) string {
	return "ex" + strconv.Itoa(slot) + "-" + strconv.Itoa(r.gens[slot])
}

// waitKV waits for the lease bucket, which the first lease manager
// creates.
func waitKV(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := waitForEvery(ctx, 50*time.Millisecond, time.Minute, "the lease bucket", func() (int, int, bool) {
		var err error
		kv, err = js.KeyValue(ctx, lease.Bucket)
		return 0, 1, err == nil
	})
	return kv, err
}

// load publishes Rate desired changes a second, round-robin over the
// guests: each a new description and the other power state (the guests
// start stopped).
func (r *failoverRun) load(ctx context.Context, js jetstream.JetStream) {
	t := time.NewTicker(time.Duration(float64(time.Second) / r.o.Rate))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		vmid, round := 100+i%r.o.Guests, i/r.o.Guests
		power := "running"
		if round%2 == 1 {
			power = "stopped"
		}
		body := `{"vmid":` + strconv.Itoa(vmid) + `,"power":"` + power + `","description":"failover ` + strconv.Itoa(i) + `"}`
		if _, err := js.PublishAsync(events.Subject(events.KindDesired, events.DefaultCluster, vmid), []byte(body)); err != nil {
			r.o.Logger.Warn().Err(err).Int("vmid", vmid).Msg("bench: desired change not published")
		}
	}
}

// balanced waits until every executor runs and holds its share of the
// partitions, all of which are held.
func (r *failoverRun) balanced(ctx context.Context) error {
	return waitForEvery(ctx, 50*time.Millisecond, 2*time.Minute, "executors sharing the partitions", func() (int, int, bool) {
		owners, err := leaseOwners(ctx, r.kv)
		if err != nil {
			return 0, r.partitions, false
		}
		ok := len(owners) == r.partitions
		for _, p := range r.execs {
			n := 0
			for _, m := range owners {
				if memberOf(m, p) {
					n++
				}
			}
			ok = ok && !p.exited() && n >= r.partitions/len(r.execs)
		}
		return len(owners), r.partitions, ok
	})
}

// killOnce kills the executor in slot under load, measures, and restarts
// it.
func (r *failoverRun) killOnce(ctx context.Context, slot int) (KillTimes, error) {
	o := r.o
	if err := r.balanced(ctx); err != nil {
		return KillTimes{}, err
	}
	if err := sleepCtx(ctx, o.Settle); err != nil {
		return KillTimes{}, err
	}
	victim := r.execs[slot]
	// Under load: a task of the victim in flight, if one comes within a
	// few of them (the load may leave it idle for a moment).
	_ = waitForEvery(ctx, 20*time.Millisecond, 5*(o.PowerTask+time.Second), "a task in flight", func() (int, int, bool) {
		return 0, 1, r.watch.startedBy(victim.resultName()) > 0
	})
	held, err := r.heldBy(ctx, victim)
	if err != nil {
		return KillTimes{}, err
	}
	at := time.Now()
	victim.kill()
	r.killed[victim.resultName()] = true
	var kt KillTimes
	taken := map[int]time.Duration{} // partition → when a survivor held its lease
	limit := 2*time.Minute + 3*max(o.AckWait, o.LeaseTTL)
	err = waitForEvery(ctx, 20*time.Millisecond, limit, "the killed executor's partitions to act again", func() (int, int, bool) {
		if len(taken) < len(held) {
			// Seen after the read: an upper bound, within a poll.
			owners, err := leaseOwners(ctx, r.kv)
			now := time.Now()
			if err == nil {
				for p := range held {
					if m, ok := owners[p]; ok && !memberOf(m, victim) {
						if _, seen := taken[p]; !seen {
							taken[p] = now.Sub(at)
						}
					}
				}
			}
		}
		k, done := r.watch.resumeProgress(victim.resultName(), held, at)
		for _, d := range taken {
			k.Takeover = max(k.Takeover, d)
		}
		kt = k
		return len(taken), len(held), done && len(taken) == len(held)
	})
	if err != nil {
		return kt, fmt.Errorf("bench: kill of %s (partitions %v): %w", victim.name, slices.Sorted(maps.Keys(held)), err)
	}
	for i, p := range r.execs {
		if i != slot && p.exited() {
			return kt, errors.New("bench: executor " + p.name + " exited; its log: " + filepath.Join(r.dir, p.name+".log"))
		}
	}
	r.gens[slot]++
	if r.execs[slot], err = startExecutor(o, r.dir, r.execName(slot), r.natsURL, r.pveURL); err != nil {
		return kt, err
	}
	return kt, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func (r *failoverRun) report(det *FailoverDetails) FailoverReport {
	o := r.o
	var act, take, res []int64
	rep := FailoverReport{Kills: len(det.PerKill), LeaseTTLS: o.LeaseTTL.Seconds(), AckWaitS: o.AckWait.Seconds(),
		Executors: o.Executors, Guests: o.Guests, Nodes: o.Nodes, Partitions: r.partitions, Rate: o.Rate,
		PowerTaskS: o.PowerTask.Seconds(), ConfigTaskS: o.ConfigTask.Seconds(),
		ExpectedS: max(o.LeaseTTL+o.LeaseTTL/lease.RenewDivisor, o.AckWait).Seconds()}
	for _, k := range det.PerKill {
		act, take, res = append(act, int64(k.Act())), append(take, int64(k.Takeover)), append(res, int64(k.Resume))
		rep.InFlightAtKill += k.Started
	}
	// percentiles gives milliseconds.
	a, t, s := percentiles(act), percentiles(take), percentiles(res)
	rep.KillToActSP50, rep.KillToActSP90, rep.KillToActSP99 = a.P50/1000, a.P90/1000, a.P99/1000
	for _, d := range act {
		rep.KillToActSMax = max(rep.KillToActSMax, float64(d)/1e9)
	}
	rep.TakeoverSP50, rep.TakeoverSP99, rep.ResumeSP50, rep.ResumeSP99 = t.P50/1000, t.P99/1000, s.P50/1000, s.P99/1000
	c := r.watch.audit(r.killed)
	rep.DuplicateTasks, rep.RefusedRepeats, rep.Handoffs, rep.SpuriousRedeliveries = c.duplicates, c.refused, c.handoffs, c.spurious
	rep.Actions, rep.Mutations, rep.UnattributedMutations = c.actions, c.mutations, c.orphan
	return rep
}

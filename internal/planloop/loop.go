package planloop

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Journal is what the planner needs of the journal: to follow it, to
// publish its actions (fenced, asynchronously), and what it keeps of every
// guest whatever its retention drops.
type Journal interface {
	journal.Follower
	journal.AsyncAppender
	journal.Kept
}

// CheckpointStore keeps checkpoints by name (bus.Checkpoints).
type CheckpointStore interface {
	Open(ctx context.Context) error
	Get(ctx context.Context, name string) ([]byte, error)
	Put(ctx context.Context, name string, body []byte) error
}

// Loop is the planner role: it runs a planner.Engine against the journal
// and carries out what the engine asks for.
type Loop struct {
	cfg   Config
	eng   *planner.Engine
	j     Journal
	views views.Store
	ckpts CheckpointStore
	clk   clock.Clock
	log   zerolog.Logger
	// heldLog samples the guard's log lines: a fleet change held at once
	// says so for the first guests, not for every one.
	heldLog zerolog.Logger
	leases  *lease.Manager

	// acquired collects partitions the lease manager won, for the loop.
	acqMu    sync.Mutex
	acquired []int
	acqNote  chan struct{}
	leaseWG  sync.WaitGroup
	leaseRun atomic.Bool

	pubs    []pendingPub
	writer  *views.Writer
	rejects *rejections
	stream  journal.Info // as it stood at start
	// ahead are kept entries the journal held at start, in order, until
	// the feed passes them: retention may drop them before it reads them
	// (bridge).
	ahead   []journal.Entry
	bridged int
	// first is the journal's first sequence as last read: an action
	// before it is gone, and fences of actions seen there expect none.
	first   uint64
	ckptOK  bool // the checkpoint store opened
	ckptWG  sync.WaitGroup
	ckptErr chan error

	dirty       atomic.Int64
	ready       atomic.Bool
	resumedFrom atomic.Uint64
	metrics     *metrics
}

// pendingPub is an action publish not yet acknowledged.
type pendingPub struct {
	vmid int
	id   string
	f    journal.Future
}

// New checks cfg and returns an idle loop. leases opens the planner
// group's lease store (bus.Bus.LeaseStore).
func New(cfg Config, j Journal, store views.Store, ckpts CheckpointStore, leases lease.Opener) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Loop{cfg: cfg, j: j, views: store, ckpts: ckpts, clk: cfg.Clock, log: cfg.Logger,
		heldLog: cfg.Logger.Sample(&zerolog.BurstSampler{Burst: 20, Period: time.Minute}), acqNote: make(chan struct{}, 1), ckptErr: make(chan error, 1)}
	pc := cfg.Planner
	pc.DecodeWorkers = runtime.GOMAXPROCS(0)
	var err error
	lc := lease.DefaultConfig()
	lc.Group, lc.Member, lc.Partitions = LeaseGroup(pc.Cluster), lease.MemberID(pc.Name), pc.Partitions
	lc.TTL, lc.Renew, lc.Replicas, lc.Logger, lc.Clock = cfg.LeaseTTL, cfg.LeaseTTL/lease.RenewDivisor, cfg.Replicas, cfg.Logger, cfg.Clock
	lc.OnAcquire = func(p int) {
		l.acqMu.Lock()
		l.acquired = append(l.acquired, p)
		l.acqMu.Unlock()
		select {
		case l.acqNote <- struct{}{}:
		default:
		}
	}
	// Nothing to drain (OnRelease, OnLost): published actions are the
	// executors' now, and a late publish of ours is fenced by the action
	// subject.
	l.leases, err = lease.New(lc, leases)
	if err != nil {
		return nil, err
	}
	pc.Owner = l.leases
	l.metrics = newMetrics(cfg.Registerer, func() int { return len(l.leases.Owned()) })
	if l.eng, err = planner.NewEngine(pc); err != nil {
		return nil, err
	}
	l.writer = views.NewWriter(store, pc.Cluster, pc.Name, l.eng.Config().Policy, l.clk, l.log)
	l.writer.PublishLimits(l.eng.Config().Limits)
	l.rejects = newRejections(l.log, cfg.Registerer, l.writer)
	return l, nil
}

// Ready reports whether the planner has folded the journal up to where it
// stood at start and made its first full pass.
func (l *Loop) Ready() bool { return l.ready.Load() }

// ResumedFrom is the checkpoint sequence the running planner started from,
// 0 if it folded the journal from the start. Valid once Ready.
func (l *Loop) ResumedFrom() uint64 { return l.resumedFrom.Load() }

// ViewsBehind is the number of guests of the partitions this planner holds
// whose document is not yet written: changed since the last flush, or
// being written.
func (l *Loop) ViewsBehind() int { return int(l.dirty.Load()) + l.writer.Writing() }

// Owned returns the partitions this planner holds.
func (l *Loop) Owned() []int { return l.leases.Owned() }

// Run folds the journal from its start (or the newest checkpoint), plans
// every guest once caught up, then plans each guest as its events arrive,
// until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	l.writer.Start()
	defer l.writer.Close(5 * time.Second) // lets the flush in hand finish
	info, err := l.j.Info(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("planner: journal: %w", err)
	}
	l.stream, l.first = info, info.FirstSeq
	if err := l.ckpts.Open(ctx); err != nil {
		l.log.Warn().Err(err).Msg("checkpoints unavailable; folding the journal from the start")
		l.eng.DisableCheckpoints()
	} else {
		l.ckptOK = true
	}
	if cp := l.loadCheckpoint(ctx); cp != nil {
		if err := l.eng.Restore(&cp.Snapshot, l.clk.Now()); err != nil {
			l.log.Warn().Err(err).Msg("checkpoint not usable; folding the journal from the start")
		} else {
			l.resumedFrom.Store(cp.Seq)
			l.log.Info().Uint64("checkpoint_seq", cp.Seq).Time("checkpoint_at", cp.At).Int("guests", len(cp.Views)).
				Uint64("tail", info.LastSeq-min(info.LastSeq, cp.Seq)).Msg("resuming from checkpoint")
		}
	}
	// Catching up to where the journal ends now; what retention dropped
	// since the fold's start comes first, from the kept entries.
	l.eng.Begin(info.LastSeq, l.clk.Now())
	after, err := l.foldKept(ctx)
	if err != nil {
		return err
	}
	feed, err := l.j.Follow(ctx, after)
	if err != nil {
		return fmt.Errorf("planner: follow the journal: %w", err)
	}
	defer feed.Stop()
	rewriteAll := make(chan struct{}, 1)
	go views.WatchBucket(ctx, l.views, l.clk, l.log, func() {
		select {
		case rewriteAll <- struct{}{}:
		default:
		}
	})
	l.log.Info().Uint64("replay_to", info.LastSeq).Msg("planner folding the journal")
	l.carryOut(ctx)
	tick := l.clk.NewTicker(l.cfg.Tick)
	defer tick.Stop()
	entries := feed.C()
	batch := make([]projector.Event, 0, 1024)
	// A prompt flush (planner.Engine.FlushDue): a guest reached a state
	// `wait` stops on, and its document goes out before the next tick.
	var promptC <-chan time.Time
	var prompt clock.Timer
	defer func() {
		if prompt != nil {
			prompt.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			l.shutdown(ctx)
			return nil
		case id := <-l.writer.Failed():
			l.eng.Unwritten([]int{id})
		case <-l.acqNote:
			l.acqMu.Lock()
			ps := l.acquired
			l.acquired = nil
			l.acqMu.Unlock()
			l.eng.Acquired(ps, l.clk.Now())
		case err := <-l.ckptErr:
			l.eng.CheckpointWritten(err)
		case <-rewriteAll:
			l.eng.RewriteAll()
		case e := <-entries:
			// Take what is already buffered too.
			batch = append(l.bridge(batch[:0], e.Seq), event(e))
			pending, cluster := e.Pending, clusterEvent(e)
			for n := len(entries); n > 0; n-- {
				e := <-entries
				batch = append(l.bridge(batch, e.Seq), event(e))
				pending, cluster = e.Pending, cluster || clusterEvent(e)
			}
			if cluster {
				// A heartbeat or a resync runs the time-based work, which
				// starts from settled publishes, as on a tick.
				l.settle()
			}
			l.eng.Fold(batch, pending, l.clk.Now())
			l.metrics.pending.Set(float64(pending))
			// The consequences first (guests marked for their documents),
			// then the count: a reader that sees the count sees them.
			l.dirty.Store(int64(l.eng.Dirty()))
			l.metrics.folded.Add(float64(len(batch)))
			clear(batch) // let the bodies go
			if len(l.pubs) > 1024 {
				l.settle()
			}
		case <-tick.C():
			l.settle()
			l.eng.Tick(l.clk.Now())
		case <-promptC:
			promptC = nil
		}
		l.carryOut(ctx)
		if at := l.eng.FlushDue(); promptC == nil && !at.IsZero() {
			// Not while the writer is busy with the last flush: it would
			// refuse this one, and the documents would wait for a tick.
			now := l.clk.Now()
			if d := at.Sub(now); d <= 0 && l.writer.Writing() == 0 {
				l.eng.FlushPrompt(now)
				l.carryOut(ctx)
			} else {
				if d <= 0 { // due, but the writer is busy: look again soon
					d = planner.PromptFlushInterval
				}
				if prompt == nil {
					prompt = l.clk.NewTimer(d)
				} else {
					prompt.Reset(d)
				}
				promptC = prompt.C()
			}
		}
	}
}

// clusterEvent reports a heartbeat or a control request.
func clusterEvent(e journal.Entry) bool {
	return strings.HasPrefix(e.Subject, heartbeatPrefix) || strings.HasPrefix(e.Subject, controlPrefix)
}

var (
	heartbeatPrefix = events.Prefix + "." + string(events.KindHeartbeat) + "."
	controlPrefix   = events.Prefix + "." + string(events.KindControl) + "."
)

// event is a journal entry as the projector folds it.
func event(e journal.Entry) projector.Event {
	return projector.Event{Seq: e.Seq, Subject: e.Subject, Header: e.Header, Data: e.Data, Time: e.Time}
}

// carryOut does what the engine asks, in the order its Ready documents.
func (l *Loop) carryOut(ctx context.Context) {
	for {
		r := l.eng.Ready()
		if r.Empty() {
			break
		}
		for _, u := range r.Unfolded {
			l.log.Warn().Err(u.Err).Uint64("seq", u.Seq).Str("subject", u.Subject).Msg("event not folded")
			if l.cfg.Poison != nil {
				l.cfg.Poison("planner", u.Subject, u.Seq, u.Err)
			}
		}
		if r.Resync {
			l.log.Info().Msg("resync requested; full pass")
		}
		if r.Rewrite {
			l.log.Info().Int("guests", l.eng.Guests()).Msg("views bucket recreated; rewriting every view")
		}
		if r.Acquired > 0 {
			l.log.Info().Int("guests", r.Acquired).Msg("planning guests of acquired partitions")
		}
		for _, c := range r.Converged {
			l.metrics.convergence.Observe(c.Took.Seconds())
		}
		for _, n := range r.Held {
			l.heldLog.Warn().Int("vmid", n.VMID).Str("reason", n.Reason).Msg("disruptive action held by the mass-change guard")
		}
		ps := l.admit(ctx, r.Actions)
		for i := range ps {
			l.publish(&ps[i])
		}
		if r.Flush != nil {
			l.flush(r.Flush)
		}
		if r.Checkpoint != nil {
			l.checkpoint(ctx, r.Checkpoint)
		}
		if r.CaughtUp {
			l.caughtUp(ctx)
		}
	}
	l.dirty.Store(int64(l.eng.Dirty()))
}

// caughtUp joins the partition group: a restarting planner takes nothing
// it cannot plan yet.
func (l *Loop) caughtUp(ctx context.Context) {
	l.log.Info().Uint64("seq", l.eng.LastSeq()).Int("guests", l.eng.Guests()).Msg("planner caught up; full pass")
	if l.leaseRun.CompareAndSwap(false, true) {
		l.leaseWG.Add(1)
		go func() {
			defer l.leaseWG.Done()
			if err := l.leases.Run(ctx); err != nil {
				l.log.Error().Err(err).Msg("planner cannot join its partition group; planning nothing")
			}
		}()
	}
	l.ready.Store(true)
}

// flush hands documents to the writer; while it is still writing the
// previous flush they stay the engine's, for the next one.
func (l *Loop) flush(f *planner.Flush) {
	counts := l.eng.Counts()
	for _, k := range planner.StatusKinds {
		l.metrics.guests.WithLabelValues(string(k)).Set(float64(counts[k]))
	}
	l.metrics.held.Set(float64(counts[planner.Held]))
	out := 0
	for k, n := range counts {
		if !k.Done() && k != planner.Unmanaged {
			out += n
		}
	}
	l.metrics.outOfSync.Set(float64(out))
	waiting := l.eng.Waiting()
	for _, lim := range planner.LimitNames {
		l.metrics.waiting.WithLabelValues(lim).Set(float64(waiting[lim]))
	}
	l.rejects.note(f.Docs, l.clk.Now())
	if !l.writer.Write(f) {
		ids := make([]int, len(f.Docs))
		for i, d := range f.Docs {
			ids[i] = d.View.VMID
		}
		l.eng.Unwritten(ids)
	}
}

// shutdown flushes, lets the partitions go, and writes a last checkpoint.
func (l *Loop) shutdown(ctx context.Context) {
	l.eng.Shutdown(l.clk.Now())
	if r := l.eng.Ready(); r.Flush != nil {
		l.flush(r.Flush)
	}
	l.leaseWG.Wait() // partitions released
	l.ckptWG.Wait()
	if cp := l.eng.FinalCheckpoint(); cp != nil && l.ckptOK {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := l.writeCheckpoint(cctx, cp); err != nil {
			l.log.Warn().Err(err).Msg("checkpoint on shutdown not written; the next start folds more")
		}
		cancel()
	}
}

package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/projector"
)

// ServiceConfig configures the planner service.
type ServiceConfig struct {
	Cluster string
	// Name identifies this planner in the actions it publishes.
	Name   string
	Policy Policy
	// Tick is how often time-based work runs: due retries, observer
	// staleness, flushing views (default 250ms).
	Tick time.Duration
	// FullPassInterval replans every guest this often (default 60s), on
	// top of planning each guest when its events arrive.
	FullPassInterval time.Duration
	// FlushInterval is how often changed views are materialised (default:
	// every tick). Views are rewritten only when what status shows changed.
	FlushInterval time.Duration
	Registerer    prometheus.Registerer
	Logger        zerolog.Logger
	Clock         func() time.Time
	// OnDecision, if set, is called on the planner's goroutine after each
	// guest is planned (benchmarks and tests; it must not block).
	OnDecision func(v *projector.View, d Decision)
	// LeaseTTL is how long a dead planner's partitions stay its own when
	// several planners run (default 5s; see package lease).
	LeaseTTL time.Duration
	// CheckpointInterval is how often the fold is checkpointed while it
	// advances (default 5m; negative: never). A checkpoint is also written
	// on shutdown; a restarted planner resumes from the newest one and
	// folds only the tail.
	CheckpointInterval time.Duration
}

// Service is the planner role.
type Service struct {
	cfg ServiceConfig
	bus *bus.Bus
	log zerolog.Logger
	now func() time.Time

	proj     *projector.Projector
	decision map[int]Decision
	// counts and retries are kept with decision so that neither a tick nor
	// a flush walks every guest: at 10,000 guests that walk held up
	// planning for milliseconds four times a second.
	counts  map[StatusKind]int
	retries map[int]time.Time
	// awaiting holds guests whose action is published but not folded yet.
	awaiting map[int]string
	// deferred holds the guests folded while the planner was behind the
	// journal, in the order first touched, planned once it is not
	// (behindBy) or deferredSince is maxDefer old.
	deferred      []int
	isDeferred    map[int]bool
	deferredSince time.Time
	// js publishes asynchronously so the loop never waits on the bus;
	// pubs are unresolved action publishes, settled on each tick.
	js   jetstream.JetStream
	pubs []pendingPub
	// mat hands view documents to the materialiser goroutine, which
	// encodes and writes them off the planning loop; matErr returns the
	// guests whose write failed.
	mat    chan matBatch
	matErr chan int
	// written is the signature of each guest's last materialised document:
	// a document is rewritten only when what status shows changed.
	written map[int]docSig
	dirty   map[int]bool
	// viewsDirty and viewsWriting count the views not yet written: dirty
	// after the last flush, and handed to the materialiser (ViewsBehind).
	viewsDirty, viewsWriting atomic.Int64
	caughtUp                 bool
	stale                    bool
	lastFull                 time.Time
	lastFlush                time.Time

	// leases shares the guests' partitions among the cluster's planners
	// (group "planner-<cluster>"): this planner publishes actions and
	// writes views only for guests of partitions it holds. Joined once
	// caught up, so a restarting planner takes nothing it cannot plan yet.
	leases   *lease.Manager
	parts    int
	acqMu    sync.Mutex
	acquired []int         // partitions won, to be planned by the loop
	acqNote  chan struct{} // signals acquired
	leaseWG  sync.WaitGroup

	// ckpt stores checkpoints (nil if the store is unavailable); resumedFrom
	// is the checkpoint sequence this run started from, 0 for none.
	ckpt          jetstream.ObjectStore
	streamCreated time.Time
	resumedFrom   uint64
	lastCkpt      time.Time
	lastCkptSeq   uint64
	ckptBusy      atomic.Bool
	ckptFailed    atomic.Bool
	ckptWG        sync.WaitGroup

	mu      sync.RWMutex // guards cluster and ready, read by other goroutines
	cluster projector.ClusterState
	ready   bool

	metrics *metrics
}

// docSig is what makes a guest's document worth rewriting.
type docSig struct {
	kind                                      StatusKind
	reason                                    string
	desired, observed, action, result, reject uint64
	started                                   bool
}

func sigOf(v *projector.View, d Decision) docSig {
	sg := docSig{kind: d.Status.Kind, reason: d.Status.Reason, desired: v.DesiredSeq, observed: v.ObservedSeq,
		action: v.LastActionSeq, result: v.LastResultSeq, started: v.Started != nil}
	if v.Rejected != nil {
		sg.reject = v.Rejected.Seq
	}
	return sg
}

// slim copies a view for its document without the observations results
// embed (the view's own Observed is the newest of them).
func slim(v *projector.View) *projector.View {
	c := v.Clone()
	if c.LastResult != nil && c.LastResult.Observed != nil {
		r := *c.LastResult
		r.Observed = nil
		c.LastResult = &r
	}
	if c.Started != nil && c.Started.Observed != nil {
		r := *c.Started
		r.Observed = nil
		c.Started = &r
	}
	return c
}

type pendingPub struct {
	vmid int
	id   string
	f    jetstream.PubAckFuture
}

type matBatch struct {
	docs    map[int]GuestDoc
	cluster ClusterDoc
}

// GuestDoc is what the service materialises per guest: the view and the
// decision made from it.
type GuestDoc struct {
	View      *projector.View `json:"view"`
	Status    Status          `json:"status"`
	Next      []Step          `json:"next,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// ClusterKey is the bucket key of the cluster document.
func ClusterKey(cluster string) string { return cluster + "._cluster" }

// GuestKey is the bucket key of a guest's document.
func GuestKey(cluster string, vmid int) string { return cluster + "." + strconv.Itoa(vmid) }

// NewService checks the configuration and returns an idle service.
func NewService(cfg ServiceConfig, b *bus.Bus) (*Service, error) {
	if cfg.Cluster == "" {
		cfg.Cluster = events.DefaultCluster
	}
	if err := events.ValidateCluster(cfg.Cluster); err != nil {
		return nil, err
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "planner"
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 250 * time.Millisecond
	}
	if cfg.FullPassInterval <= 0 {
		cfg.FullPassInterval = time.Minute
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = cfg.Tick
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = 5 * time.Minute
	}
	// A publish lost with a dying server is never acknowledged: without a
	// timeout its guest would await it forever, and the materialiser
	// would block on it. Timed out, an action is re-planned (its msg-id
	// and fence make that safe) and a view rewritten.
	js, err := jetstream.New(b.NC, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(publishTimeout))
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, bus: b, log: cfg.Logger, now: cfg.Clock, js: js,
		proj: projector.New(cfg.Cluster), decision: map[int]Decision{}, counts: map[StatusKind]int{}, retries: map[int]time.Time{}, awaiting: map[int]string{}, isDeferred: map[int]bool{},
		dirty: map[int]bool{}, written: map[int]docSig{}, mat: make(chan matBatch, 1), matErr: make(chan int, 4096), metrics: newMetrics(cfg.Registerer),
		// Until a heartbeat is folded, observations count as stale: the
		// first one flips this and replans every guest it blocked.
		stale: true, parts: b.Config().Partitions, acqNote: make(chan struct{}, 1)}
	s.leases, err = lease.New(lease.Config{Group: "planner-" + cfg.Cluster, Member: lease.MemberID(cfg.Name), Partitions: s.parts,
		TTL: cfg.LeaseTTL, Replicas: b.Config().Replicas, Logger: cfg.Logger,
		OnAcquire: func(p int) {
			s.acqMu.Lock()
			s.acquired = append(s.acquired, p)
			s.acqMu.Unlock()
			select {
			case s.acqNote <- struct{}{}:
			default:
			}
		},
		// Nothing to drain: published actions are the executors' now, and
		// a late publish of ours is fenced by the action subject.
		OnRelease: func(int) {}, OnLost: func(int) {}}, js)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Run folds the journal from its start, plans every guest once caught up,
// then plans each guest as its events arrive, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	stream, info, err := s.bus.WaitStream(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("planner: journal stream: %w", err)
	}
	target := info.State.LastSeq
	s.streamCreated = info.Created
	if s.ckpt, err = OpenCheckpoints(ctx, s.bus.JS, s.bus.Config().Replicas); err != nil {
		s.log.Warn().Err(err).Msg("checkpoints unavailable; folding the journal from the start")
	}
	if cp := s.loadCheckpoint(ctx, info); cp != nil {
		s.proj.Views, s.proj.State, s.proj.LastSeq = cp.Views, cp.State, cp.Seq
		s.mu.Lock()
		s.resumedFrom = cp.Seq
		s.mu.Unlock()
		s.lastCkptSeq, s.lastCkpt = cp.Seq, s.now()
		s.log.Info().Uint64("checkpoint_seq", cp.Seq).Time("checkpoint_at", cp.At).Int("guests", len(cp.Views)).
			Uint64("tail", target-min(target, cp.Seq)).Msg("resuming from checkpoint")
	}
	msgs := make(chan jetstream.Msg, 1024)
	// consume folds on from the event after seq. No subject filter: the
	// projector ignores other clusters' events, and a multi-subject filter
	// costs the server a subject-tree search per message.
	consume := func(seq uint64) (jetstream.ConsumeContext, error) {
		occ := jetstream.OrderedConsumerConfig{}
		if seq > 0 {
			occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
		}
		cons, err := stream.OrderedConsumer(ctx, occ)
		if err != nil {
			return nil, err
		}
		return cons.Consume(func(m jetstream.Msg) {
			select {
			case msgs <- m:
			case <-ctx.Done():
			}
		}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if ctx.Err() == nil { // the server going away at shutdown is no news
					s.log.Warn().Err(err).Msg("journal consumer")
				}
			}))
	}
	cc, err := consume(s.proj.LastSeq)
	if err != nil {
		return fmt.Errorf("planner: consume: %w", err)
	}
	defer func() { cc.Stop() }()
	lag := make(chan uint64, 1)
	go watchLag(ctx, stream, lag)
	var stalledSince time.Time
	var stalledAt uint64
	s.log.Info().Uint64("replay_to", target).Msg("planner folding the journal")
	if target == 0 || s.proj.LastSeq >= target {
		s.catchUp(ctx)
	}
	matDone := make(chan struct{})
	go func() { defer close(matDone); s.materialise() }()
	rewriteAll := make(chan struct{}, 1)
	go s.watchViews(ctx, rewriteAll)
	tick := time.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush(context.WithoutCancel(ctx))
			s.leaseWG.Wait() // partitions released
			s.ckptWG.Wait()
			if s.caughtUp && s.proj.LastSeq > s.lastCkptSeq && s.cfg.CheckpointInterval > 0 {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				if err := s.writeCheckpoint(cctx, s.snapshot()); err != nil {
					s.log.Warn().Err(err).Msg("checkpoint on shutdown not written; the next start folds more")
				}
				cancel()
			}
			close(s.mat)
			select {
			case <-matDone:
			case <-time.After(5 * time.Second):
			}
			return nil
		case id := <-s.matErr:
			s.markDirty(id)
			delete(s.written, id)
		case <-s.acqNote:
			s.planAcquired(ctx)
		case last := <-lag:
			// An ordered consumer can stall for good when the server that
			// held it dies (nats.go re-creates it under the same name, on
			// the dead peer): behind the stream with no progress for a
			// while, fold on through a new one. Events already folded are
			// ignored if they come twice.
			switch {
			case last <= s.proj.LastSeq:
				stalledSince = time.Time{}
			case stalledSince.IsZero() || s.proj.LastSeq != stalledAt:
				stalledSince, stalledAt = time.Now(), s.proj.LastSeq
			case time.Since(stalledSince) >= consumerStall:
				s.log.Warn().Uint64("folded", s.proj.LastSeq).Uint64("stream_last", last).Dur("stalled", time.Since(stalledSince)).
					Msg("journal consumer made no progress; re-creating it")
				if ncc, err := consume(s.proj.LastSeq); err != nil {
					s.log.Warn().Err(err).Msg("journal consumer not re-created; will retry")
				} else {
					cc.Stop()
					cc = ncc
				}
				stalledSince = time.Time{}
			}
		case <-rewriteAll:
			// The bucket was dropped (converge rebuild) or lost: every
			// document this planner owns is written again from the fold.
			clear(s.written)
			for id := range s.proj.Views {
				s.markDirty(id)
			}
			s.log.Info().Int("guests", len(s.proj.Views)).Msg("views bucket recreated; rewriting every view")
		case m := <-msgs:
			// Take what is already buffered too.
			batch := []jetstream.Msg{m}
			for n := len(msgs); n > 0; n-- {
				batch = append(batch, <-msgs)
			}
			s.handleBatch(ctx, batch)
			if !s.caughtUp && s.proj.LastSeq >= target {
				s.catchUp(ctx)
			}
			if len(s.pubs) > 1024 {
				s.settle(ctx)
			}
		case <-tick.C:
			if s.caughtUp {
				if len(s.deferred) > 0 && s.now().Sub(s.deferredSince) >= maxDefer {
					s.planDeferred(ctx) // behind, and no batch came to plan them
				}
				s.tick(ctx)
			} else if stream.CachedInfo() != nil && s.proj.LastSeq >= target {
				s.catchUp(ctx)
			}
		}
	}
}

func (s *Service) catchUp(ctx context.Context) {
	s.caughtUp = true
	s.leaseWG.Add(1)
	go func() {
		defer s.leaseWG.Done()
		if err := s.leases.Run(ctx); err != nil {
			s.log.Error().Err(err).Msg("planner cannot join its partition group; planning nothing")
		}
	}()
	s.log.Info().Uint64("seq", s.proj.LastSeq).Int("guests", len(s.proj.Views)).Msg("planner caught up; full pass")
	s.fullPass(ctx)
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
}

func toEvent(m jetstream.Msg) (projector.Event, bool) {
	md, err := m.Metadata()
	if err != nil {
		return projector.Event{}, false
	}
	return projector.Event{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: md.Timestamp}, true
}

// handle folds one message; behind defers its guest's planning
// (handleEventDeferring).
func (s *Service) handle(ctx context.Context, m jetstream.Msg, behind bool) {
	ev, ok := toEvent(m)
	if !ok {
		s.log.Error().Str("subject", m.Subject()).Msg("planner: message without metadata")
		return
	}
	s.handleEventDeferring(ctx, ev, behind)
}

// handleBatch folds buffered messages; while catching up it decodes them in
// parallel first (nothing is planned until the fold is current).
func (s *Service) handleBatch(ctx context.Context, ms []jetstream.Msg) {
	if s.caughtUp {
		behind := pendingAfter(ms[len(ms)-1]) > behindBy
		for _, m := range ms {
			s.handle(ctx, m, behind)
		}
		if !behind || s.now().Sub(s.deferredSince) >= maxDefer {
			s.planDeferred(ctx)
		}
		return
	}
	evs := make([]projector.Event, 0, len(ms))
	for _, m := range ms {
		if ev, ok := toEvent(m); ok {
			evs = append(evs, ev)
		}
	}
	projector.Predecode(evs, runtime.GOMAXPROCS(0))
	for _, ev := range evs {
		s.handleEvent(ctx, ev)
	}
}

// behindBy is how many events may wait in the journal behind a batch for
// the planner to still plan as it folds. Further behind (a burst of desired
// changes, a planner catching up on a busy journal), it folds first and
// plans each touched guest once, on its newest desired state: acting on a
// state the journal already supersedes costs Proxmox a mutation that the
// next one undoes. maxDefer bounds the wait when the planner stays behind.
const (
	behindBy = 1000
	maxDefer = 500 * time.Millisecond
)

// pendingAfter is how many events the journal holds after m for this
// consumer (0 when unknown).
func pendingAfter(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.NumPending
}

// handleEventDeferring is handleEvent, except that while behind a guest's
// planning waits for planDeferred.
func (s *Service) handleEventDeferring(ctx context.Context, ev projector.Event, behind bool) {
	if !behind {
		s.handleEvent(ctx, ev)
		return
	}
	vmid, ok := s.handleEventFold(ctx, ev, true)
	if ok && !s.isDeferred[vmid] {
		if len(s.deferred) == 0 {
			s.deferredSince = s.now()
		}
		s.isDeferred[vmid] = true
		s.deferred = append(s.deferred, vmid)
	}
}

// planDeferred plans the guests folded while behind, each once, in the
// order they were first touched.
func (s *Service) planDeferred(ctx context.Context) {
	for _, vmid := range s.deferred {
		delete(s.isDeferred, vmid)
		if v := s.proj.Views[vmid]; v != nil {
			s.planGuest(ctx, v)
		}
	}
	s.deferred = s.deferred[:0]
}

func (s *Service) handleEvent(ctx context.Context, ev projector.Event) {
	s.handleEventFold(ctx, ev, false)
}

// handleEventFold folds one event and, when caught up, plans its guest
// (unless deferPlan) or does what it asks for (resync, tick); it returns
// the guest it touched.
func (s *Service) handleEventFold(ctx context.Context, ev projector.Event, deferPlan bool) (int, bool) {
	// Counted once handled (folded, and its guest marked for planning and
	// writing): a reader that sees the count sees the consequences.
	defer s.metrics.folded.Inc()
	ch := s.proj.Apply(ev)
	if ch.Err != nil {
		s.log.Warn().Err(ch.Err).Uint64("seq", ev.Seq).Str("subject", ev.Subject).Msg("event not folded")
	}
	switch {
	case ch.View != nil:
		v := ch.View
		if id, ok := s.awaiting[v.VMID]; ok && v.LastAction != nil && v.LastAction.ID == id {
			delete(s.awaiting, v.VMID)
		}
		s.markDirty(v.VMID)
		if s.caughtUp && !deferPlan {
			s.planGuest(ctx, v)
		}
		return v.VMID, true
	case ch.Resync && s.caughtUp:
		s.log.Info().Msg("resync requested; full pass")
		s.fullPass(ctx)
	case ch.Cluster && s.caughtUp:
		s.tick(ctx)
	}
	return 0, false
}

// tick does the time-based work: observer staleness flips, due retries,
// the periodic full pass, and flushing views.
func (s *Service) tick(ctx context.Context) {
	s.settle(ctx)
	now := s.now()
	st := s.proj.State
	stale := st.HeartbeatAt.IsZero() || now.Sub(st.HeartbeatAt) > s.cfg.Policy.ObserverTimeout || !st.Reachable
	switch {
	case stale != s.stale || now.Sub(s.lastFull) >= s.cfg.FullPassInterval:
		s.stale = stale
		s.fullPass(ctx)
	default:
		var due []int
		for vmid, at := range s.retries {
			if !now.Before(at) {
				due = append(due, vmid)
			}
		}
		for _, vmid := range due {
			if v := s.proj.Views[vmid]; v != nil {
				s.planGuest(ctx, v)
			}
		}
	}
	if now.Sub(s.lastFlush) >= s.cfg.FlushInterval {
		s.flush(ctx)
	}
	s.maybeCheckpoint(ctx, now)
}

// maybeCheckpoint starts a checkpoint in the background when one is due:
// the copy is taken here, the encoding and the write happen off the loop.
func (s *Service) maybeCheckpoint(ctx context.Context, now time.Time) {
	if s.ckptFailed.Swap(false) {
		s.lastCkptSeq = 0
	}
	if s.cfg.CheckpointInterval < 0 || s.ckpt == nil || s.proj.LastSeq <= s.lastCkptSeq ||
		now.Sub(s.lastCkpt) < s.cfg.CheckpointInterval || !s.ckptBusy.CompareAndSwap(false, true) {
		return
	}
	cp := s.snapshot()
	s.lastCkpt, s.lastCkptSeq = now, cp.Seq
	s.ckptWG.Add(1)
	go func() {
		defer s.ckptWG.Done()
		defer s.ckptBusy.Store(false)
		if err := s.writeCheckpoint(ctx, cp); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("checkpoint not written; will retry")
			s.ckptFailed.Store(true)
		}
	}()
}

// ResumedFrom is the checkpoint sequence the running planner started from,
// 0 if it folded the journal from the start. Valid once Ready.
func (s *Service) ResumedFrom() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.resumedFrom
}

func (s *Service) fullPass(ctx context.Context) {
	s.lastFull = s.now()
	ids := make([]int, 0, len(s.proj.Views))
	for id := range s.proj.Views {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		s.planGuest(ctx, s.proj.Views[id])
	}
	s.flush(ctx)
}

// planGuest plans one guest and publishes its first step, at most one
// action in flight per guest.
func (s *Service) planGuest(ctx context.Context, v *projector.View) {
	if _, ok := s.awaiting[v.VMID]; ok {
		return
	}
	d := Plan(v, s.proj.State, s.cfg.Policy, s.now())
	if s.cfg.OnDecision != nil {
		s.cfg.OnDecision(v, d)
	}
	prev, had := s.decision[v.VMID]
	s.decision[v.VMID] = d
	if had {
		s.counts[prev.Status.Kind]--
	}
	s.counts[d.Status.Kind]++
	if d.Status.RetryAt.IsZero() {
		delete(s.retries, v.VMID)
	} else {
		s.retries[v.VMID] = d.Status.RetryAt
	}
	if !had || prev.Status.Kind != d.Status.Kind || prev.Status.Reason != d.Status.Reason || !stepsEqual(prev.Steps, d.Steps) {
		s.markDirty(v.VMID)
	}
	if len(d.Steps) == 0 || !s.mine(v.VMID) {
		return
	}
	step := d.Steps[0]
	a := events.Action{
		Meta: events.NewMeta(s.cfg.Name, v.CorrelationID, s.now()),
		ID:   fmt.Sprintf("%s-%d-%d-%d", v.Cluster, v.VMID, v.DesiredSeq, v.RevisionActions+1),
		VMID: v.VMID, Cluster: v.Cluster, Node: v.Observed.Node, Kind: v.Observed.Kind,
		Op: step.Op, Set: step.Set, Delete: step.Delete, Timeout: step.Timeout, Reason: step.Reason,
		Digest: v.Observed.Digest, DesiredSeq: v.DesiredSeq, BasisSeq: v.BasisSeq(), Attempt: v.Failures + 1,
	}
	body, err := events.Encode(a)
	if err != nil {
		s.log.Error().Err(err).Int("vmid", v.VMID).Msg("encode action")
		return
	}
	hdr := nats.Header{}
	hdr.Set(events.HeaderCorrelationID, v.CorrelationID)
	// The fence: the action subject must still end at the action this plan
	// saw; the msg-id makes a blind retry or a restarted planner's replan of
	// the same step a duplicate. The outcome is settled on the next tick.
	f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: events.Subject(events.KindAction, v.Cluster, v.VMID), Data: body, Header: hdr},
		jetstream.WithExpectLastSequencePerSubject(v.LastActionSeq), jetstream.WithMsgID(a.ID))
	if err != nil {
		s.log.Warn().Err(err).Int("vmid", v.VMID).Str("action", a.ID).Msg("publish action failed; will retry")
		return
	}
	s.awaiting[v.VMID] = a.ID
	s.pubs = append(s.pubs, pendingPub{vmid: v.VMID, id: a.ID, f: f})
	s.metrics.planned.WithLabelValues(string(a.Op)).Inc()
	s.log.Info().Int("vmid", v.VMID).Str("op", string(a.Op)).Str("action", a.ID).Str("reason", a.Reason).
		Str("correlation_id", v.CorrelationID).Msg("action planned")
}

// settle resolves finished asynchronous publishes. A refused action (the
// fence moved: another planner, or this one before a restart, acted first)
// or a failed one frees its guest to be planned again from the fold; a
// duplicate of an action already folded frees it too.
func (s *Service) settle(ctx context.Context) {
	keep := s.pubs[:0]
	var replan []int
	for _, p := range s.pubs {
		select {
		case ack := <-p.f.Ok():
			if v := s.proj.Views[p.vmid]; ack.Duplicate && v != nil && v.LastAction != nil && v.LastAction.ID == p.id && s.awaiting[p.vmid] == p.id {
				delete(s.awaiting, p.vmid)
			}
		case err := <-p.f.Err():
			if s.awaiting[p.vmid] == p.id {
				delete(s.awaiting, p.vmid)
				replan = append(replan, p.vmid)
			}
			if bus.IsWrongLastSequence(err) {
				s.log.Info().Int("vmid", p.vmid).Str("action", p.id).Msg("action fence moved; not planned twice")
			} else {
				s.log.Warn().Err(err).Int("vmid", p.vmid).Str("action", p.id).Msg("publish action failed; will replan")
			}
		default:
			keep = append(keep, p)
		}
	}
	clear(s.pubs[len(keep):]) // settled futures hold their messages: let them go
	s.pubs = keep

	for _, id := range replan {
		if v := s.proj.Views[id]; v != nil {
			s.planGuest(ctx, v)
		}
	}
}

func stepsEqual(a, b []Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Op != b[i].Op || a[i].Reason != b[i].Reason {
			return false
		}
	}
	return true
}

// maxDocsPerFlush bounds the views written per flush: during a mass change
// every guest's view changes at once, and writing them all each tick would
// cost the planner's loop and crowd the journal's own writes. The rest are
// written on the following ticks (status lags, decisions do not).
const maxDocsPerFlush = 1000

// flush materialises changed views into the bucket.
func (s *Service) flush(ctx context.Context) {
	now := s.now()
	s.lastFlush = now
	s.mu.Lock()
	s.cluster = s.proj.State
	docs := map[int]GuestDoc{}
	for id := range s.dirty {
		if len(docs) >= maxDocsPerFlush {
			break
		}
		v := s.proj.Views[id]
		if v == nil || !s.mine(id) {
			continue
		}
		d, ok := s.decision[id]
		if !ok {
			d = Plan(v, s.proj.State, s.cfg.Policy, now)
		}
		if sg := sigOf(v, d); s.written[id] != sg {
			s.written[id] = sg
			docs[id] = GuestDoc{View: slim(v), Status: d.Status, Next: d.Steps, UpdatedAt: now}
		}
	}
	cluster := s.cluster
	s.mu.Unlock()
	for _, k := range []StatusKind{Converged, Pending, Acting, Error, Blocked, Rejected, Unmanaged} {
		s.metrics.guests.WithLabelValues(string(k)).Set(float64(s.counts[k]))
	}
	// Views not written this time stay dirty for the next flush.
	for id := range docs {
		delete(s.dirty, id)
	}
	for id := range s.dirty {
		if v := s.proj.Views[id]; v != nil {
			if d, ok := s.decision[id]; ok && s.written[id] == sigOf(v, d) {
				delete(s.dirty, id) // unchanged since written
			}
		} else {
			delete(s.dirty, id) // a guest that never was (undecodable first event)
		}
		if !s.mine(id) {
			delete(s.dirty, id) // its owner writes it; marked again if it comes here
		}
	}
	batch := matBatch{docs: docs, cluster: ClusterDoc{State: cluster, Seq: s.proj.LastSeq, UpdatedAt: now, Planner: s.cfg.Name}}
	s.viewsWriting.Add(int64(len(docs)))
	select {
	case s.mat <- batch:
	default:
		// The materialiser is still writing the previous batch: these
		// views stay dirty for the next flush.
		s.viewsWriting.Add(-int64(len(docs)))
		for id := range docs {
			delete(s.written, id)
			s.dirty[id] = true
		}
	}
	s.viewsDirty.Store(int64(len(s.dirty)))
}

// markDirty marks a guest's view for the next flush.
func (s *Service) markDirty(vmid int) {
	s.dirty[vmid] = true
	s.viewsDirty.Store(int64(len(s.dirty)))
}

// ViewsBehind is the number of guests of the partitions this planner holds
// whose view document is not yet written: changed since the last flush, or
// being written.
func (s *Service) ViewsBehind() int {
	return int(s.viewsDirty.Load() + s.viewsWriting.Load())
}

// materialise encodes and writes view documents, one batch at a time, until
// mat is closed. A KV put is a publish on the bucket's subject.
func (s *Service) materialise() {
	prefix := "$KV." + s.bus.Config().Bucket + "."
	type pending struct {
		vmid int
		f    jetstream.PubAckFuture
	}
	for batch := range s.mat {
		var ps []pending
		for id, doc := range batch.docs {
			b, err := json.Marshal(doc)
			if err != nil {
				s.log.Error().Err(err).Int("vmid", id).Msg("encode view")
				continue
			}
			f, err := s.js.PublishAsync(prefix+GuestKey(s.cfg.Cluster, id), b)
			if err != nil {
				s.failed(id)
				continue
			}
			ps = append(ps, pending{id, f})
		}
		if b, err := json.Marshal(batch.cluster); err == nil {
			_, _ = s.js.PublishAsync(prefix+ClusterKey(s.cfg.Cluster), b)
		}
		for _, p := range ps {
			select {
			case <-p.f.Ok():
			case err := <-p.f.Err():
				s.log.Warn().Err(err).Int("vmid", p.vmid).Msg("materialise view failed; will retry")
				s.failed(p.vmid)
			}
		}
		s.viewsWriting.Add(-int64(len(batch.docs)))
	}
}

// publishTimeout bounds the wait for an asynchronous publish's
// acknowledgement.
const publishTimeout = 15 * time.Second

// consumerStall is how long the fold may stay behind the stream without
// progress before its consumer is re-created; lagCheck how often the
// stream's end is sampled.
const (
	consumerStall = 15 * time.Second
	lagCheck      = 5 * time.Second
)

// watchLag samples the stream's last sequence for the stall check.
func watchLag(ctx context.Context, stream jetstream.Stream, lag chan uint64) {
	t := time.NewTicker(lagCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ictx, cancel := context.WithTimeout(ctx, lagCheck)
		info, err := stream.Info(ictx)
		cancel()
		if err != nil {
			continue
		}
		select {
		case <-lag: // replace an unread sample
		default:
		}
		lag <- info.State.LastSeq
	}
}

// viewsCheck is how often the planner checks that its views bucket is the
// one it has been writing to.
const viewsCheck = 2 * time.Second

// watchViews notices the views bucket being deleted or replaced: it
// recreates a missing bucket and asks the loop to rewrite every view, so
// projections dropped while converge runs come back from the fold.
func (s *Service) watchViews(ctx context.Context, rewriteAll chan<- struct{}) {
	name := "KV_" + s.bus.Config().Bucket
	var seen time.Time
	t := time.NewTicker(viewsCheck)
	defer t.Stop()
	for {
		info, err := s.js.Stream(ctx, name)
		var created time.Time
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			s.log.Warn().Str("bucket", s.bus.Config().Bucket).Msg("views bucket missing; recreating it")
			if err := s.bus.ProvisionViews(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("views bucket not recreated; will retry")
			}
		case err == nil:
			created = info.CachedInfo().Created
		}
		if !created.IsZero() {
			if !seen.IsZero() && !created.Equal(seen) {
				select {
				case rewriteAll <- struct{}{}:
				default:
				}
			}
			seen = created
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// mine reports whether this planner holds the lease of vmid's partition.
func (s *Service) mine(vmid int) bool {
	return s.leases.Held(events.Partition(s.cfg.Cluster, vmid, s.parts))
}

// planAcquired plans and marks for writing every guest of the partitions
// won since the last call: their previous owner may have left work.
func (s *Service) planAcquired(ctx context.Context) {
	s.acqMu.Lock()
	ps := s.acquired
	s.acquired = nil
	s.acqMu.Unlock()
	if len(ps) == 0 || !s.caughtUp {
		return
	}
	won := map[int]bool{}
	for _, p := range ps {
		won[p] = true
	}
	ids := make([]int, 0, len(s.proj.Views))
	for id := range s.proj.Views {
		if won[events.Partition(s.cfg.Cluster, id, s.parts)] {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	s.log.Info().Ints("partitions", ps).Int("guests", len(ids)).Msg("planning guests of acquired partitions")
	for _, id := range ids {
		delete(s.written, id) // rewrite: the previous owner's document may be older
		s.markDirty(id)
		s.planGuest(ctx, s.proj.Views[id])
	}
}

func (s *Service) failed(vmid int) {
	select {
	case s.matErr <- vmid:
	default: // rewritten on its next change
	}
}

// ClusterDoc is the materialised cluster state.
type ClusterDoc struct {
	State     projector.ClusterState `json:"state"`
	Seq       uint64                 `json:"seq"`
	Planner   string                 `json:"planner"`
	UpdatedAt time.Time              `json:"updated_at"`
}

// Ready reports whether the planner has folded the journal up to where it
// stood at start and made its first full pass.
func (s *Service) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ready
}

// Cluster returns the cluster state as last materialised.
func (s *Service) Cluster() projector.ClusterState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cluster
}

type metrics struct {
	folded  prometheus.Counter
	planned *prometheus.CounterVec
	guests  *prometheus.GaugeVec
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		folded: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_planner_events_folded_total",
			Help: "Journal events folded into views."}),
		planned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_planner_actions_planned_total",
			Help: "Actions published, by operation."}, []string{"op"}),
		guests: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "converge_guests",
			Help: "Guests by state."}, []string{"state"}),
	}
	if r != nil {
		r.MustRegister(m.folded, m.planned, m.guests)
	}
	return m
}

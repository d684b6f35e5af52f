package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/lograte"
)

// Executor runs a cluster's actions against Proxmox. Create it with [New]
// and run it with [Executor.Run].
type Executor struct {
	cfg    Config
	px     Proxmox
	finder TaskFinder // nil unless px implements it
	j      Journal
	clk    clock.Clock
	log    zerolog.Logger

	workCtx context.Context // set by Run: in-flight work, cancelled after the drain
	leases  *lease.Manager  // nil without a lease store
	// owner fences mutations: the action's partition must be held (nil:
	// every partition is, as for an executor outside any group).
	owner  interface{ Held(p int) bool }
	member string        // this instance's id in the executor group
	sem    chan struct{} // bounds actions in progress in this process
	rates  *nodeRates    // paces mutating calls per node
	pace   taskPace      // how long each node's tasks run (first poll)
	// failures rate-limits the log lines of failed actions: an outage
	// fails every action at once, and the journal keeps each failure.
	failures *lograte.Limiter
	// workers hands an action to an idle worker goroutine; stopWorkers
	// ends the idle ones once Run is done.
	workers     chan func()
	stopWorkers chan struct{}
	idle        atomic.Int32 // workers waiting; at most Concurrency stay
	ran         atomic.Bool

	mu       sync.Mutex
	closed   bool                // no new handlers once set
	parts    map[int]*partition  // owned partitions being consumed
	inFlight map[string]struct{} // action ids being handled here
	guests   map[int]*guestLock  // per-vmid exclusion
	wg       sync.WaitGroup
}

// guestLock serialises one guest's actions; refs counts holders and
// waiters so the map entry can go when nobody needs it.
type guestLock struct {
	ch   chan struct{}
	refs int
}

// New validates cfg and returns an Executor. It does no I/O. leases opens
// the store of the executor group's partition leases (bus.Bus.LeaseStore).
func New(cfg Config, px Proxmox, j Journal, leases lease.Opener) (*Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if px == nil || j == nil || leases == nil {
		return nil, errNilDependency
	}
	e := &Executor{
		cfg:         cfg,
		px:          px,
		j:           j,
		clk:         cfg.Clock,
		log:         cfg.Logger.With().Str("role", "executor").Str("executor", cfg.Name).Str("cluster", cfg.Cluster).Logger(),
		inFlight:    map[string]struct{}{},
		parts:       map[int]*partition{},
		member:      lease.MemberID(cfg.Name),
		sem:         make(chan struct{}, cfg.Concurrency),
		workers:     make(chan func()),
		stopWorkers: make(chan struct{}),
		guests:      map[int]*guestLock{},
	}
	if f, ok := px.(TaskFinder); ok {
		e.finder = f
	}
	lc := cfg.leaseConfig(e.member, e.log)
	lc.OnAcquire, lc.OnRelease, lc.OnLost = e.startPartition, e.releasePartition, e.losePartition
	var err error
	e.leases, err = lease.New(lc, leases)
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	e.owner = e.leases
	cfg.Metrics.add(e)
	e.rates = newNodeRates(cfg.perNode(), func() int { return len(e.leases.Members()) })
	e.failures = lograte.New(failLogRate, failLogBurst)
	return e, nil
}

// ConsumerName is the durable consumer of partition p's actions.
func (e *Executor) ConsumerName(p int) string {
	return journal.PartitionConsumer(journal.ExecutorGroup(e.cfg.Cluster), p)
}

// WorkSpec is the durable consumer of partition p that an owner of p
// creates or updates: explicit acks, redelivery without limit after
// AckWait (a poison action is Termed by the handler instead).
func (e *Executor) WorkSpec(p int) journal.WorkSpec {
	return journal.WorkSpec{
		Durable:     e.ConsumerName(p),
		Description: fmt.Sprintf("converge executors of cluster %s, partition %d", e.cfg.Cluster, p),
		// Stored form: the stream appends the partition token.
		Filter:  events.ClusterSubject(events.KindAction, e.cfg.Cluster) + ".*." + strconv.Itoa(p),
		AckWait: e.cfg.AckWait,
		// Guests of a partition run in parallel; Concurrency also bounds
		// the whole process (sem).
		MaxAckPending: e.cfg.Concurrency,
		Batch:         min(e.cfg.Concurrency, pullBatch),
		Expiry:        pullExpiry,
		Recreated:     func() { e.cfg.Metrics.recreated.WithLabelValues(e.ConsumerName(p)).Inc() },
	}
}

// partition is the work of one owned partition.
type partition struct {
	p      int
	ctx    context.Context // cancelled when the partition is lost
	cancel context.CancelFunc
	stop   func()         // stops the consumer; nil until it runs
	closed bool           // no new handlers once set (under Executor.mu)
	wg     sync.WaitGroup // its handlers
}

// Run takes part in the cluster's executor group until ctx ends: it owns a
// share of the partitions (package lease) and consumes each owned
// partition's actions. Then it stops taking actions, lets the in-flight
// ones finish for up to Config.DrainTimeout, abandons the rest
// un-acknowledged (they are redelivered and resumed from the journal),
// releases its partitions and returns nil. It returns an error if the
// group cannot be joined (unless ctx ended first). Signal handling is the
// caller's. Run may be called once per Executor.
func (e *Executor) Run(ctx context.Context) error {
	if !e.ran.CompareAndSwap(false, true) {
		return errors.New("executor: Run called twice")
	}
	if _, err := e.j.Info(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("executor: journal: %w", err)
	}

	// workCtx outlives ctx by the drain bound: in-flight actions finish.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	e.workCtx = workCtx

	e.log.Info().Str("member", e.member).Int("concurrency", e.cfg.Concurrency).
		Dur("ack_wait", e.cfg.AckWait).Bool("task_finder", e.finder != nil).Msg("executor running")

	// Run returns once every partition is released (drained or, after
	// DrainTimeout, abandoned).
	stopDrain := make(chan struct{})
	go func() {
		<-ctx.Done()
		if ids := e.inFlightIDs(); len(ids) > 0 {
			e.log.Info().Strs("actions", ids).Dur("drain_timeout", e.cfg.DrainTimeout).
				Msg("draining: waiting for the in-flight actions to finish (a second interrupt exits at once; they are resumed from the journal)")
		}
		if e.cfg.DrainTimeout == 0 {
			cancelWork()
			return
		}
		t := e.clk.NewTimer(e.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C():
			e.log.Warn().Msg("drain timeout: abandoning in-flight actions; they will be redelivered and resumed")
			cancelWork()
		case <-stopDrain:
		}
	}()
	err := e.leases.Run(ctx)
	close(stopDrain)
	e.mu.Lock()
	e.closed = true
	parts := make([]*partition, 0, len(e.parts))
	for _, pt := range e.parts {
		parts = append(parts, pt)
	}
	e.mu.Unlock()
	// Partitions not released in time (or never released) stop here.
	for _, pt := range parts {
		e.stopPartition(pt, true)
	}
	cancelWork()
	e.wg.Wait()
	close(e.stopWorkers)
	e.log.Info().Msg("executor stopped")
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("executor: %w", err)
	}
	return nil
}

// startPartition starts consuming partition p's actions. Consumer set-up
// is retried until it works or the partition goes.
func (e *Executor) startPartition(p int) {
	pctx, cancel := context.WithCancel(e.workCtx)
	pt := &partition{p: p, ctx: pctx, cancel: cancel}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		cancel()
		return
	}
	e.parts[p] = pt
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		delay := 100 * time.Millisecond
		for {
			stop, err := e.j.Consume(pctx, e.WorkSpec(p), func(d journal.Delivery) { e.dispatch(pt, d) })
			if err == nil {
				e.mu.Lock()
				if pt.closed {
					e.mu.Unlock()
					stop()
					return
				}
				pt.stop = stop
				e.mu.Unlock()
				e.log.Debug().Int("partition", p).Str("consumer", e.ConsumerName(p)).Msg("consuming partition")
				return
			}
			e.log.Warn().Err(err).Int("partition", p).Msg("partition consumer not started; retrying")
			if clock.Sleep(pctx, e.clk, delay) != nil {
				return
			}
			delay = min(2*delay, 5*time.Second)
		}
	}()
}

// releasePartition hands a partition over: stop taking its actions, let
// the in-flight ones finish (bounded by DrainTimeout through workCtx).
func (e *Executor) releasePartition(p int) {
	e.mu.Lock()
	pt := e.parts[p]
	e.mu.Unlock()
	if pt != nil {
		e.stopPartition(pt, false)
	}
}

// losePartition stops a partition whose lease is gone: another executor
// may own it already, so its in-flight actions are abandoned at once (the
// new owner resumes them from the journal; a late write of ours is fenced).
func (e *Executor) losePartition(p int) {
	e.mu.Lock()
	pt := e.parts[p]
	e.mu.Unlock()
	if pt != nil {
		e.stopPartition(pt, true)
	}
}

func (e *Executor) stopPartition(pt *partition, abandon bool) {
	e.mu.Lock()
	pt.closed = true
	stop := pt.stop
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
	if abandon {
		pt.cancel()
	}
	pt.wg.Wait()
	pt.cancel()
	e.mu.Lock()
	if e.parts[pt.p] == pt {
		delete(e.parts, pt.p)
	}
	e.mu.Unlock()
	e.log.Debug().Int("partition", pt.p).Bool("abandoned", abandon).Msg("partition stopped")
}

// Partitions returns the partitions this executor owns now.
func (e *Executor) Partitions() []int {
	return e.leases.Owned()
}

// dispatch hands one delivery to its own goroutine. It runs on the
// consumer's callback goroutine, so it must not block.
func (e *Executor) dispatch(pt *partition, d journal.Delivery) {
	e.mu.Lock()
	if e.closed || pt.closed {
		e.mu.Unlock()
		return // left un-acked: redelivered to whoever consumes next
	}
	e.wg.Add(1)
	pt.wg.Add(1)
	e.mu.Unlock()
	job := func() {
		defer e.wg.Done()
		defer pt.wg.Done()
		e.Handle(pt.ctx, pt.p, d)
	}
	select {
	case e.workers <- job:
	default:
		go e.worker(job)
	}
}

// worker runs actions until the executor stops, waiting for the next one
// when idle. Reusing goroutines keeps their grown stacks: with a new
// goroutine per action, every action grew one by copying (the HTTP
// client's call chains are deep), some 40 µs of CPU per action. After a
// burst, the workers beyond Concurrency end instead of waiting.
func (e *Executor) worker(job func()) {
	for {
		job()
		if e.idle.Add(1) > int32(e.cfg.Concurrency) {
			e.idle.Add(-1)
			return
		}
		select {
		case job = <-e.workers:
			e.idle.Add(-1)
		case <-e.stopWorkers:
			e.idle.Add(-1)
			return
		}
	}
}

// claim marks an action id as being handled here; false if it already is
// (a redelivery of an action this process is still working on).
func (e *Executor) claim(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.inFlight[id]; ok {
		return false
	}
	e.inFlight[id] = struct{}{}
	return true
}

// inFlightIDs are the ids of the actions handled here now, sorted.
func (e *Executor) inFlightIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.inFlight))
	for id := range e.inFlight {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (e *Executor) release(id string) {
	e.mu.Lock()
	delete(e.inFlight, id)
	e.mu.Unlock()
}

// lockGuest waits for exclusive use of a guest, or for ctx to end.
func (e *Executor) lockGuest(ctx context.Context, vmid int) (unlock func(), err error) {
	e.mu.Lock()
	g := e.guests[vmid]
	if g == nil {
		g = &guestLock{ch: make(chan struct{}, 1)}
		e.guests[vmid] = g
	}
	g.refs++
	e.mu.Unlock()
	drop := func() {
		e.mu.Lock()
		if g.refs--; g.refs == 0 {
			delete(e.guests, vmid)
		}
		e.mu.Unlock()
	}
	select {
	case g.ch <- struct{}{}:
		return func() { <-g.ch; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}

package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
)

// Executor runs a cluster's actions against Proxmox. Create it with [New]
// and run it with [Executor.Run].
type Executor struct {
	cfg    Config
	px     Proxmox
	finder TaskFinder // nil unless px implements it
	bus    *bus.Bus
	log    zerolog.Logger

	stream jetstream.Stream // set by Run
	ran    atomic.Bool

	mu       sync.Mutex
	closed   bool                // no new handlers once set
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

// New validates cfg and returns an Executor. It does no I/O.
func New(cfg Config, px Proxmox, b *bus.Bus) (*Executor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if px == nil || b == nil {
		return nil, errNilDependency
	}
	e := &Executor{
		cfg:      cfg,
		px:       px,
		bus:      b,
		log:      cfg.Logger.With().Str("role", "executor").Str("executor", cfg.Name).Str("cluster", cfg.Cluster).Logger(),
		inFlight: map[string]struct{}{},
		guests:   map[int]*guestLock{},
	}
	if f, ok := px.(TaskFinder); ok {
		e.finder = f
	}
	return e, nil
}

// ConsumerConfig is the durable consumer Run creates or updates.
func (e *Executor) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     e.cfg.Consumer,
		Description: "converge executors of cluster " + e.cfg.Cluster,
		// Stored form: the stream appends the partition token.
		FilterSubject: events.ClusterSubject(events.KindAction, e.cfg.Cluster) + ".*.*",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       e.cfg.AckWait,
		MaxAckPending: e.cfg.Concurrency,
		// Unlimited: an action must never be dropped silently (invariant 4);
		// a poison action is Termed by the handler instead.
		MaxDeliver: -1,
	}
}

// Run consumes actions until ctx ends. Then it stops taking new actions,
// lets the in-flight ones finish for up to Config.DrainTimeout, abandons
// the rest un-acknowledged (they are redelivered and resumed from the
// journal), and returns nil. It returns an error if the consumer cannot be
// set up (unless ctx ended first) or is deleted while running. Signal
// handling is the caller's. Run may be called once per Executor.
func (e *Executor) Run(ctx context.Context) error {
	if !e.ran.CompareAndSwap(false, true) {
		return errors.New("executor: Run called twice")
	}
	s, err := e.bus.Stream(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("executor: stream %s: %w", e.bus.Config().Stream, err)
	}
	e.stream = s
	cons, err := s.CreateOrUpdateConsumer(ctx, e.ConsumerConfig())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("executor: consumer %s: %w", e.cfg.Consumer, err)
	}

	// workCtx outlives ctx by the drain bound: in-flight actions finish.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	fatal := make(chan error, 1)
	cc, err := cons.Consume(func(msg jetstream.Msg) { e.dispatch(workCtx, msg) },
		jetstream.PullMaxMessages(min(e.cfg.Concurrency, pullBatch)),
		// Short pull requests: a request that stops making progress under load
		// is replaced within seconds rather than after the 30 s default.
		jetstream.PullExpiry(5*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				select {
				case fatal <- err:
				default:
				}
				return
			}
			e.log.Warn().Err(err).Msg("consume")
		}))
	if err != nil {
		return fmt.Errorf("executor: consume %s: %w", e.cfg.Consumer, err)
	}
	e.log.Info().Str("consumer", e.cfg.Consumer).Int("concurrency", e.cfg.Concurrency).
		Dur("ack_wait", e.cfg.AckWait).Bool("task_finder", e.finder != nil).Msg("executor running")

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-fatal:
		runErr = fmt.Errorf("executor: consumer %s: %w", e.cfg.Consumer, err)
		e.log.Error().Err(err).Msg("consumer gone; stopping")
	}

	// Stop taking actions. Buffered, undispatched ones are redelivered.
	cc.Stop()
	<-cc.Closed()
	e.mu.Lock()
	e.closed = true
	n := len(e.inFlight)
	e.mu.Unlock()

	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	if n > 0 {
		e.log.Info().Int("in_flight", n).Dur("drain_timeout", max(e.cfg.DrainTimeout, 0)).Msg("finishing in-flight actions")
	}
	if e.cfg.DrainTimeout > 0 {
		t := time.NewTimer(e.cfg.DrainTimeout)
		select {
		case <-done:
		case <-t.C:
			e.log.Warn().Msg("drain timeout: abandoning in-flight actions; they will be redelivered and resumed")
		}
		t.Stop()
	}
	cancelWork()
	<-done
	e.log.Info().Msg("executor stopped")
	return runErr
}

// dispatch hands one delivery to its own goroutine. It runs on the
// consumer's callback goroutine, so it must not block.
func (e *Executor) dispatch(ctx context.Context, msg jetstream.Msg) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return // left un-acked: redelivered to whoever consumes next
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		e.handle(ctx, msg)
	}()
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

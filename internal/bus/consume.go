package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

var _ journal.Consumer = (*Bus)(nil)

// ConsumerConfig is the durable consumer a WorkSpec stands for.
func ConsumerConfig(spec journal.WorkSpec) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       spec.Durable,
		Description:   spec.Description,
		FilterSubject: spec.Filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxAckPending: spec.MaxAckPending,
		// Unlimited: work must never be dropped silently (invariant 4); a
		// poison entry is Termed by its worker instead.
		MaxDeliver: -1,
	}
}

// Consume implements journal.Consumer. A message without JetStream
// metadata (never seen from a server) is terminated and logged.
//
// A durable consumer deleted while it is consumed (`nats consumer rm`, a
// stream restored without it) is created again: nats.go ends a pull
// consumption for good when the server says the consumer was deleted, and
// one whose consumer vanished unnoticed only misses heartbeats. Either
// makes the watch check the consumer and create it anew with the same
// spec (DeliverAll: every entry not acknowledged comes again; workers
// settle the finished ones from the journal). It is logged once per
// recreation and told to spec.Recreated.
func (b *Bus) Consume(ctx context.Context, spec journal.WorkSpec, fn func(journal.Delivery)) (func(), error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, ConsumerConfig(spec))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &work{b: b, s: s, spec: spec, fn: fn, check: make(chan struct{}, 1), done: make(chan struct{})}
	cc, err := w.consume(cons)
	if err != nil {
		cancel()
		return nil, err
	}
	go w.watch(ctx, cc)
	return func() { cancel(); <-w.done }, nil
}

// work is one Consume: its current consumption, and what checks that its
// consumer still exists.
type work struct {
	b     *Bus
	s     jetstream.Stream
	spec  journal.WorkSpec
	fn    func(journal.Delivery)
	check chan struct{} // a sign the consumer may be gone
	done  chan struct{}
}

// consume starts a consumption of cons.
func (w *work) consume(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	opts := []jetstream.PullConsumeOpt{jetstream.PullHeartbeat(ConsumeHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
				errors.Is(err, jetstream.ErrConsumerNotFound) {
				select {
				case w.check <- struct{}{}:
				default:
				}
			}
			if !errors.Is(err, jetstream.ErrConsumerDeleted) { // that one is logged once, below
				w.b.log.Warn().Err(err).Str("consumer", w.spec.Durable).Msg("consume")
			}
		})}
	if w.spec.Batch > 0 {
		opts = append(opts, jetstream.PullMaxMessages(w.spec.Batch))
	}
	if w.spec.Expiry > 0 {
		opts = append(opts, jetstream.PullExpiry(w.spec.Expiry))
	}
	return cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			w.b.log.Error().Err(err).Str("subject", m.Subject()).Msg("message without JetStream metadata; terminating it")
			_ = m.Term()
			return
		}
		w.fn(delivery{m: m, e: journal.Entry{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: events.Header(m.Headers()),
			Data: m.Data(), Time: md.Timestamp, Pending: md.NumPending}, n: md.NumDelivered})
	}, opts...)
}

// watch creates the consumer again whenever its consumption ended for
// good (nats.go ends it when the server says the consumer was deleted, or
// the stream went) or a sign says the consumer may be gone and the server
// confirms it is, until ctx ends; then it stops the consumption.
func (w *work) watch(ctx context.Context, cc jetstream.ConsumeContext) {
	defer close(w.done)
	defer func() { cc.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cc.Closed():
			// Ended for good: whatever a lookup would say now (the stream
			// being restored, no leader yet), only a new one goes on.
		case <-w.check:
			qctx, cancel := context.WithTimeout(ctx, recreateTimeout)
			_, err := w.s.Consumer(qctx, w.spec.Durable)
			cancel()
			if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue // there (missed heartbeats have other causes), or not known: nats.go goes on pulling
			}
		}
		// The old one first: its pulls would take entries nobody handles
		// until their AckWait.
		cc.Stop()
		ncc, ok := w.recreate(ctx)
		if !ok {
			return
		}
		cc = ncc
		w.b.log.Warn().Str("consumer", w.spec.Durable).Msg("durable consumer was deleted; created it again (its unacknowledged entries come again)")
		if w.spec.Recreated != nil {
			w.spec.Recreated()
		}
	}
}

// recreate creates the consumer again and consumes it, retrying with
// backoff until it works or ctx ends.
func (w *work) recreate(ctx context.Context) (jetstream.ConsumeContext, bool) {
	delay := 100 * time.Millisecond
	for {
		qctx, cancel := context.WithTimeout(ctx, recreateTimeout)
		cons, err := w.s.CreateOrUpdateConsumer(qctx, ConsumerConfig(w.spec))
		cancel()
		if err == nil {
			cc, err := w.consume(cons)
			if err == nil {
				return cc, true
			}
		}
		w.b.log.Warn().Err(err).Str("consumer", w.spec.Durable).Msg("durable consumer deleted; creating it again failed, retrying")
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// recreateTimeout bounds one request of the consumer's check or
// recreation.
const recreateTimeout = 5 * time.Second

var _ journal.Backlog = (*Bus)(nil)

// Backlog implements journal.Backlog from the consumer's info: one
// request to the server (looking the consumer up fetches its info).
func (b *Bus) Backlog(ctx context.Context, durable string) (pending, ackPending uint64, err error) {
	s, err := b.stream(ctx)
	if err != nil {
		return 0, 0, err
	}
	c, err := s.Consumer(ctx, durable)
	if err != nil {
		return 0, 0, err
	}
	info := c.CachedInfo()
	return info.NumPending, uint64(info.NumAckPending), nil
}

type delivery struct {
	m jetstream.Msg
	e journal.Entry
	n uint64
}

func (d delivery) Entry() journal.Entry          { return d.e }
func (d delivery) Delivered() uint64             { return d.n }
func (d delivery) InProgress() error             { return d.m.InProgress() }
func (d delivery) Term() error                   { return d.m.Term() }
func (d delivery) Ack(ctx context.Context) error { return d.m.DoubleAck(ctx) }

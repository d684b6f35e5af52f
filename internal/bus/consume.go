package bus

import (
	"context"

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
func (b *Bus) Consume(ctx context.Context, spec journal.WorkSpec, fn func(journal.Delivery)) (func(), error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, ConsumerConfig(spec))
	if err != nil {
		return nil, err
	}
	opts := []jetstream.PullConsumeOpt{jetstream.PullHeartbeat(ConsumeHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			b.log.Warn().Err(err).Str("consumer", spec.Durable).Msg("consume")
		})}
	if spec.Batch > 0 {
		opts = append(opts, jetstream.PullMaxMessages(spec.Batch))
	}
	if spec.Expiry > 0 {
		opts = append(opts, jetstream.PullExpiry(spec.Expiry))
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			b.log.Error().Err(err).Str("subject", m.Subject()).Msg("message without JetStream metadata; terminating it")
			_ = m.Term()
			return
		}
		fn(delivery{m: m, e: journal.Entry{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: events.Header(m.Headers()),
			Data: m.Data(), Time: md.Timestamp, Pending: md.NumPending}, n: md.NumDelivered})
	}, opts...)
	if err != nil {
		return nil, err
	}
	return cc.Stop, nil
}

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

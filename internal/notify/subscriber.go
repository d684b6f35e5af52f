package notify

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Metadata a subscriber sets on each message.
const (
	mdSource  = "notify_source" // srcViews or srcEvents
	mdSubject = "notify_subject"
	mdSeq     = "notify_seq"
	mdOp      = "notify_op" // the KV operation (KV-Operation header): "" for a put
)

// Sources of a route's messages.
const (
	srcViews  = "views"
	srcEvents = "events"
)

// source is one durable consumer a route reads: pre-created, bound here.
// bind creates it again when it is found gone (the views bucket dropped
// and created again by converge rebuild, a consumer deleted by hand).
type source struct {
	name string
	cons jetstream.Consumer
	bind func(context.Context) (jetstream.Consumer, error)
}

// subscriber is a watermill Subscriber over a route's durable JetStream
// consumers (watermill-nats is not used: its initializers create
// consumers that vanish, and it cannot extend an ack's deadline). Each
// source hands the router one message at a time and waits for its ack or
// nack: the consumer's MaxAckPending is 1 as well, so a route sees each
// guest's documents in order. While the router holds a message (its
// retries), the subscriber tells the server it is in progress, so AckWait
// can stay short and a killed notifier's message comes back soon.
type subscriber struct {
	sources   []source
	heartbeat time.Duration
	log       zerolog.Logger

	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func newSubscriber(heartbeat time.Duration, log zerolog.Logger, sources ...source) *subscriber {
	return &subscriber{sources: sources, heartbeat: heartbeat, log: log, closing: make(chan struct{})}
}

// Subscribe starts every source; the topic is the route's name (logs).
func (s *subscriber) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	out := make(chan *message.Message)
	for _, src := range s.sources {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run(ctx, src, out)
		}()
	}
	go func() { s.wg.Wait(); close(out) }()
	return out, nil
}

// Close stops fetching; a message still held is nacked (redelivered to
// the next run at once rather than after AckWait).
func (s *subscriber) Close() error {
	s.once.Do(func() { close(s.closing) })
	s.wg.Wait()
	return nil
}

func (s *subscriber) stopped(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-s.closing:
		return true
	default:
		return false
	}
}

// fetchWait bounds one pull, so that Close is noticed; nakDelay is when
// a nacked message comes again.
const (
	fetchWait  = time.Second
	nakDelay   = time.Second
	checkEvery = 3 * time.Second
)

func (s *subscriber) run(ctx context.Context, src source, out chan<- *message.Message) {
	checked := time.Now()
	for !s.stopped(ctx) {
		jm, err := src.cons.Next(jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			idle := errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded)
			// A pull from a deleted consumer has nobody to answer it (no
			// responders, or a timeout): ask whether it is still there, on
			// a failure at once, while idle now and then.
			if !idle || time.Since(checked) >= checkEvery {
				checked = time.Now()
				if _, ierr := src.cons.Info(ctx); (gone(err) || gone(ierr)) && src.bind != nil {
					if c, berr := src.bind(ctx); berr == nil {
						s.log.Warn().Str("source", src.name).Msg("notify: consumer gone; created again (the route reads the stream again, its records keep it from repeating itself)")
						src.cons = c
						continue
					}
				}
			}
			if idle {
				continue
			}
			// The server or the consumer is away (a restart, a leader
			// election): try again shortly.
			s.log.Debug().Err(err).Str("source", src.name).Msg("fetch failed; retrying")
			select {
			case <-ctx.Done():
			case <-s.closing:
			case <-time.After(fetchWait):
			}
			continue
		}
		s.hand(ctx, src, jm, out)
	}
}

// closeWait is how long a stopping subscriber waits for the message the
// router holds to be settled.
const closeWait = 5 * time.Second

func (s *subscriber) settle(jm jetstream.Msg, wm *message.Message) {
	select {
	case <-wm.Acked():
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = jm.DoubleAck(ctx)
	case <-wm.Nacked():
		_ = jm.Nak()
	case <-time.After(closeWait):
		_ = jm.Nak()
	}
}

// gone reports an error saying the consumer or its stream is no more.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// hand gives one message to the router and settles it with the server as
// the router settled it.
func (s *subscriber) hand(ctx context.Context, src source, jm jetstream.Msg, out chan<- *message.Message) {
	md, err := jm.Metadata()
	if err != nil {
		_ = jm.Term() // not a JetStream message: nothing to notify
		return
	}
	wm := message.NewMessage(watermill.NewUUID(), jm.Data())
	wm.Metadata.Set(mdSource, src.name)
	wm.Metadata.Set(mdSubject, jm.Subject())
	wm.Metadata.Set(mdSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	wm.Metadata.Set(mdOp, jm.Headers().Get("KV-Operation"))
	wm.SetContext(ctx)
	select {
	case out <- wm:
	case <-ctx.Done():
		_ = jm.Nak()
		return
	case <-s.closing:
		_ = jm.Nak()
		return
	}
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-wm.Acked():
			// Confirmed: once the server has it, a restart does not repeat
			// the notification.
			actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := jm.DoubleAck(actx); err != nil {
				s.log.Warn().Err(err).Str("source", src.name).Msg("ack not confirmed; the message may be delivered again")
			}
			cancel()
			return
		case <-wm.Nacked():
			// Not a receiver's failure (those are parked): the bus or a
			// shutdown. Again shortly, not in a tight loop.
			_ = jm.NakWithDelay(nakDelay)
			return
		case <-tick.C:
			_ = jm.InProgress()
		case <-s.closing:
			// The router is stopping: a handler past its delivery still
			// records it and acks; give it a moment before handing the
			// message back.
			s.settle(jm, wm)
			return
		}
	}
}

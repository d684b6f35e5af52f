package control

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
)

// PublishResync journals a resync request and returns its sequence.
func PublishResync(ctx context.Context, b *bus.Bus, cluster, publisher string) (uint64, error) {
	body, err := events.Encode(events.Control{Meta: events.NewMeta(publisher, "", time.Now()), Command: events.CommandResync})
	if err != nil {
		return 0, err
	}
	ack, err := b.Publish(ctx, events.ClusterSubject(events.KindControl, cluster), body, nil)
	if err != nil {
		return 0, fmt.Errorf("publish resync: %w", err)
	}
	return ack.Sequence, nil
}

// Handlers are the reactions of one process to control requests.
type Handlers struct {
	Resync func()
}

// Run routes control requests for a cluster to the handlers until ctx
// ends. nc must be a connection of its own: watermill drains the
// connection it subscribes on when it closes.
func Run(ctx context.Context, nc *nats.Conn, cluster string, h Handlers, log zerolog.Logger) error {
	logger := zerologAdapter{log: log.With().Str("component", "control").Logger()}
	sub, err := wmnats.NewSubscriberWithNatsConn(nc, wmnats.SubscriberSubscriptionConfig{
		Unmarshaler:      rawUnmarshaler{},
		JetStream:        wmnats.JetStreamConfig{Disabled: true}, // live requests; the journal has them too
		SubscribeTimeout: 10 * time.Second,
		CloseTimeout:     5 * time.Second,
	}, logger)
	if err != nil {
		return fmt.Errorf("control: subscriber: %w", err)
	}
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, logger)
	if err != nil {
		return fmt.Errorf("control: router: %w", err)
	}
	r.AddMiddleware(middleware.Recoverer, middleware.CorrelationID)
	r.AddConsumerHandler("control", events.ClusterSubject(events.KindControl, cluster), sub, func(m *message.Message) error {
		c, err := events.Decode[events.Control](m.Payload)
		if err != nil {
			log.Warn().Err(err).Msg("undecodable control request ignored")
			return nil
		}
		switch c.Command {
		case events.CommandResync:
			log.Info().Str("publisher", c.Publisher).Msg("resync requested")
			if h.Resync != nil {
				h.Resync()
			}
		default:
			log.Warn().Str("command", c.Command).Msg("unknown control command ignored")
		}
		return nil
	})
	return r.Run(ctx)
}

// rawUnmarshaler takes any NATS message as a watermill message: control
// requests are plain JSON published by any client, not watermill-framed.
type rawUnmarshaler struct{}

func (rawUnmarshaler) Unmarshal(m *nats.Msg) (*message.Message, error) {
	// Requests are journalled with a JetStream publish, whose reply subject
	// awaits the stream's PubAck. watermill acks by answering the reply
	// subject, which would reach the publisher first and corrupt its ack:
	// this local copy of the message must not answer anyone.
	m.Reply = ""
	id := m.Header.Get("Nats-Msg-Id")
	if id == "" {
		id = watermill.NewUUID()
	}
	msg := message.NewMessage(id, m.Data)
	for k, v := range m.Header {
		if len(v) > 0 {
			msg.Metadata.Set(k, v[0])
		}
	}
	return msg, nil
}

// zerologAdapter routes watermill's logs to zerolog, Info demoted to Debug
// (watermill is chatty per message).
type zerologAdapter struct {
	log    zerolog.Logger
	fields watermill.LogFields
}

func (a zerologAdapter) ev(e *zerolog.Event, fields watermill.LogFields) *zerolog.Event {
	for k, v := range a.fields {
		e = e.Interface(k, v)
	}
	for k, v := range fields {
		e = e.Interface(k, v)
	}
	return e
}

func (a zerologAdapter) Error(msg string, err error, f watermill.LogFields) {
	a.ev(a.log.Error().Err(err), f).Msg(msg)
}
func (a zerologAdapter) Info(msg string, f watermill.LogFields)  { a.ev(a.log.Debug(), f).Msg(msg) }
func (a zerologAdapter) Debug(msg string, f watermill.LogFields) { a.ev(a.log.Debug(), f).Msg(msg) }
func (a zerologAdapter) Trace(msg string, f watermill.LogFields) { a.ev(a.log.Trace(), f).Msg(msg) }
func (a zerologAdapter) With(f watermill.LogFields) watermill.LoggerAdapter {
	return zerologAdapter{log: a.log, fields: a.fields.Add(f)}
}

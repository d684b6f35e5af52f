package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// PublishResync journals a resync request and returns its sequence.
func PublishResync(ctx context.Context, j journal.Appender, cluster, publisher string, now time.Time) (uint64, error) {
	return Publish(ctx, j, cluster, events.Control{Meta: events.NewMeta(publisher, "", now), Command: events.CommandResync})
}

// Publish journals an operator's request (resync, pause, resume, approve,
// release) on the cluster's control subject, after checking it, and
// returns its sequence. Who asked is c.Publisher.
func Publish(ctx context.Context, j journal.Appender, cluster string, c events.Control) (uint64, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	body, err := events.Encode(c)
	if err != nil {
		return 0, err
	}
	m := events.Message{Subject: events.ClusterSubject(events.KindControl, cluster), Data: body, Header: events.Header{}}
	m.Header.Set(events.HeaderPublisher, c.Publisher)
	ack, err := j.Append(ctx, m, journal.Expect{})
	if err != nil {
		return 0, fmt.Errorf("publish %s: %w", c.Command, err)
	}
	return ack.Seq, nil
}

// Subscriber delivers the messages published on a subject as they are
// published (core NATS on the process's connection: bus.Bus.Subscribe).
type Subscriber interface {
	Subscribe(subject string, fn func(events.Message)) (unsubscribe func() error, err error)
}

// Handlers are the reactions of one process to control requests.
type Handlers struct {
	Resync func()
}

// Topics of the router.
const (
	topicControl = "control"
	topicPoison  = "poison"
)

// Router routes one process's control requests and poisoned messages.
type Router struct {
	cluster string
	h       Handlers
	log     zerolog.Logger
	// resyncLog samples resync requests: the first of each minute.
	resyncLog zerolog.Logger
	pubsub    *gochannel.GoChannel
	router    *message.Router
	poison    prometheus.Counter
}

// New builds a router for cluster. reg, if set, receives the router's
// metrics (watermill's handler and subscriber metrics, and
// converge_poisoned_total).
func New(cluster string, h Handlers, log zerolog.Logger, reg prometheus.Registerer) (*Router, error) {
	logger := zerologAdapter{log: log.With().Str("component", "control").Logger()}
	r := &Router{cluster: cluster, h: h, log: log,
		resyncLog: log.Sample(&zerolog.BurstSampler{Burst: 1, Period: time.Minute}),
		pubsub:    gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 64}, logger),
		poison: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_poisoned_total",
			Help: "Messages that could not be decoded or handled (control requests, journal events, actions)."})}
	var err error
	if r.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, logger); err != nil {
		return nil, fmt.Errorf("control: router: %w", err)
	}
	poisonMW, err := middleware.PoisonQueue(r.pubsub, topicPoison)
	if err != nil {
		return nil, fmt.Errorf("control: poison queue: %w", err)
	}
	r.router.AddMiddleware(middleware.Recoverer, middleware.CorrelationID, poisonMW)
	if reg != nil {
		reg.MustRegister(r.poison)
		metrics.NewPrometheusMetricsBuilder(reg, "converge", "control").AddPrometheusRouterMetrics(r.router)
	}
	r.router.AddConsumerHandler("control", topicControl, r.pubsub, r.handleControl)
	r.router.AddConsumerHandler("poison", topicPoison, r.pubsub, r.handlePoison)
	return r, nil
}

// errUndecodable sends a control request to the poison queue.
var errUndecodable = errors.New("undecodable control request")

func (r *Router) handleControl(m *message.Message) error {
	c, err := events.Decode[events.Control](m.Payload)
	if err != nil {
		return fmt.Errorf("%w: %w", errUndecodable, err)
	}
	switch c.Command {
	case events.CommandResync:
		// Requests may come in floods; the observer merges them and logs
		// what it carries out, so one line a minute is enough here.
		r.resyncLog.Info().Str("publisher", c.Publisher).Msg("resync requested (further requests within a minute are not logged; the observer merges them)")
		if r.h.Resync != nil {
			r.h.Resync()
		}
	case events.CommandPause, events.CommandResume, events.CommandApprove, events.CommandRelease:
		// Per-guest requests: the planner and executors read them from
		// the journal (the fold); nothing to do here.
		r.log.Debug().Str("command", c.Command).Str("publisher", c.Publisher).Msg("control request journalled")
	default:
		r.log.Warn().Str("command", c.Command).Msg("unknown control command ignored")
	}
	return nil
}

// handlePoison records a poisoned message: a log line with why, and the
// metric. The journal keeps the message itself.
func (r *Router) handlePoison(m *message.Message) error {
	r.poison.Inc()
	r.log.Warn().Str("reason", m.Metadata.Get(middleware.ReasonForPoisonedKey)).Str("source", m.Metadata.Get("source")).
		Str("subject", m.Metadata.Get("subject")).Str("seq", m.Metadata.Get("seq")).Msg("poisoned message")
	return nil
}

// Poison reports a message that could not be decoded or handled elsewhere
// in the process (a journal event the planner cannot fold, an action the
// executor terminates): it goes through the router's poison queue.
func (r *Router) Poison(source, subject string, seq uint64, reason error) {
	m := message.NewMessage(watermill.NewUUID(), nil)
	m.Metadata.Set(middleware.ReasonForPoisonedKey, reason.Error())
	m.Metadata.Set("source", source)
	m.Metadata.Set("subject", subject)
	m.Metadata.Set("seq", fmt.Sprint(seq))
	if err := r.pubsub.Publish(topicPoison, m); err != nil {
		r.log.Warn().Err(err).Str("subject", subject).Msg("poisoned message not recorded")
	}
}

// Run subscribes to the cluster's control subject on sub and routes
// requests until ctx ends.
func (r *Router) Run(ctx context.Context, sub Subscriber) error {
	unsubscribe, err := sub.Subscribe(events.ClusterSubject(events.KindControl, r.cluster), func(m events.Message) {
		id := m.Header.Get("Nats-Msg-Id")
		if id == "" {
			id = watermill.NewUUID()
		}
		wm := message.NewMessage(id, m.Data)
		for k, v := range m.Header {
			if len(v) > 0 {
				wm.Metadata.Set(k, v[0])
			}
		}
		if err := r.pubsub.Publish(topicControl, wm); err != nil {
			// Only once the router has stopped: the process is stopping.
			r.log.Debug().Err(err).Msg("control request dropped")
		}
	})
	if err != nil {
		return fmt.Errorf("control: subscribe: %w", err)
	}
	defer func() { _ = unsubscribe() }()
	return r.router.Run(ctx)
}

// Running is closed once the router runs.
func (r *Router) Running() chan struct{} { return r.router.Running() }

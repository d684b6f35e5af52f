package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/lease"
)

// Options are what a notifier runs with besides its file.
type Options struct {
	Config Config
	// Cluster is the cluster watched when the file names none.
	Cluster string
	// ViewsBucket is the planner's views bucket (bus.DefaultBucket).
	ViewsBucket string
	// JS is the notifier's JetStream context, on a connection as the
	// notify NATS user.
	JS jetstream.JetStream
	// Replicas of the notifier's bucket when it creates it.
	Replicas int
	// AckWait is its consumers' AckWait (default 10s): how long after a
	// notifier was killed the message it held is delivered again. A
	// message held longer (retries) is kept by in-progress heartbeats.
	AckWait    time.Duration
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
	// Client sends the notifications (default: one with no timeout of
	// its own; each route's timeout applies). Its CheckRedirect is
	// replaced: redirects are never followed.
	Client *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Notifier routes converge's events to webhooks.
type Notifier struct {
	cfg     Config
	cluster string
	opts    Options
	js      jetstream.JetStream
	log     zerolog.Logger
	now     func() time.Time
	client  *http.Client
	kv      jetstream.KeyValue // its own bucket
	views   jetstream.KeyValue

	sent, failed, parked *prometheus.CounterVec
	runCtx               context.Context

	id       string // this notifier's, in the owner key
	ownerRev uint64 // the owner key's revision it wrote last (the poller's alone once running)
}

// New checks the options; Run does the rest.
func New(o Options) (*Notifier, error) {
	if o.JS == nil {
		return nil, errors.New("notify: no JetStream")
	}
	if o.ViewsBucket == "" {
		return nil, errors.New("notify: no views bucket")
	}
	n := &Notifier{cfg: o.Config, cluster: o.Config.Cluster, opts: o, js: o.JS, log: o.Logger, now: o.Now, client: o.Client,
		id: watermill.NewShortUUID()}
	if n.cluster == "" {
		n.cluster = o.Cluster
	}
	if n.cluster == "" {
		return nil, errors.New("notify: no cluster")
	}
	if len(n.cfg.Routes) == 0 {
		return nil, errors.New("notify: no routes")
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.client == nil {
		n.client = &http.Client{}
	}
	// Redirects are not followed: a 302 or 303 would turn the POST into
	// a GET, a 307 or 308 to another host would take the route's secret
	// headers there. deliver counts a 3xx as a failed attempt.
	c := *n.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	n.client = &c
	if n.opts.AckWait <= 0 {
		n.opts.AckWait = 10 * time.Second
	}
	label := []string{"route"}
	n.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_notify_sent_total",
		Help: "Notifications a route's receiver accepted (2xx)."}, label)
	n.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_notify_failed_total",
		Help: "Delivery attempts of a route that failed (an error, a timeout or an answer other than 2xx); each retry counts."}, label)
	n.parked = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_notify_parked_total",
		Help: "Notifications a route gave up on after its retries (kept as parked.<route>.* in the converge_notify bucket)."}, label)
	for _, r := range n.cfg.Routes {
		for _, c := range []*prometheus.CounterVec{n.sent, n.failed, n.parked} {
			c.WithLabelValues(r.Name) // present at 0 from the start
		}
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{n.sent, n.failed, n.parked} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("notify: metrics: %w", err)
			}
		}
	}
	return n, nil
}

// heartbeat is how often a held message's deadline is extended.
func (n *Notifier) heartbeat() time.Duration { return max(n.opts.AckWait/3, 100*time.Millisecond) }

// Run binds the notifier's bucket and consumers (creating what is
// missing), then routes until ctx ends.
func (n *Notifier) Run(ctx context.Context) error {
	n.runCtx = ctx
	var err error
	if n.kv, err = openBucket(ctx, n.js, n.opts.Replicas); err != nil {
		return err
	}
	if n.views, err = n.js.KeyValue(ctx, n.opts.ViewsBucket); err != nil {
		return fmt.Errorf("notify: views bucket %s: %w", n.opts.ViewsBucket, err)
	}
	// A poll must come within the leases' TTL, or a member's delete
	// marker (it left) may age out unseen and its leaving be taken for
	// a loss (the poller then tells neither).
	if st, err := n.js.Stream(ctx, "KV_"+lease.Bucket); err == nil {
		if ttl := st.CachedInfo().Config.MaxAge; ttl > 0 && time.Duration(n.cfg.Poll) >= ttl {
			return fmt.Errorf("notify: poll %s must be shorter than the leases bucket's TTL %s", time.Duration(n.cfg.Poll), ttl)
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("notify: leases bucket: %w", err)
	}
	if err := n.acquire(ctx); err != nil {
		return err
	}
	defer n.release()
	logger := control.WatermillLogger(n.log.With().Str("component", "notify").Logger())
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, logger)
	if err != nil {
		return err
	}
	router.AddMiddleware(middleware.Recoverer)
	if n.opts.Registerer != nil {
		metrics.NewPrometheusMetricsBuilder(n.opts.Registerer, "converge", "notify").AddPrometheusRouterMetrics(router)
	}
	for i := range n.cfg.Routes {
		if err := n.addRoute(ctx, router, &n.cfg.Routes[i]); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	// The router stops, with the cause, when the owner key is lost.
	rctx, stop := context.WithCancelCause(ctx)
	defer func() { stop(nil); wg.Wait() }()
	wg.Go(func() { poller{n, stop}.run(rctx) })
	n.log.Info().Str("cluster", n.cluster).Strs("routes", n.cfg.Names()).Msg("notify: routing")
	err = router.Run(rctx)
	if cause := context.Cause(rctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// consumer pre-creates (or updates) a route's durable consumer on a
// stream and binds it: only the notifier's own names, never watermill's.
// A consumer created reads from deliver on (DeliverAll for the views,
// whose documents the route compares with its records; DeliverNew for
// the poller's notices, so that a route created now is not sent every
// notice found before it); one that exists keeps where it reads from.
func (n *Notifier) consumer(ctx context.Context, stream, route, filter string, deliver jetstream.DeliverPolicy) (jetstream.Consumer, error) {
	name := Consumer(n.cluster, route)
	if old, err := n.js.Consumer(ctx, stream, name); err == nil {
		deliver = old.CachedInfo().Config.DeliverPolicy
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("notify: route %s: consumer on %s: %w", route, stream, err)
	}
	c, err := n.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name,
		Description: "converge notify route " + route, DeliverPolicy: deliver,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: n.opts.AckWait, MaxDeliver: -1,
		// One at a time: a route sees each guest's documents in order.
		MaxAckPending: 1, FilterSubject: filter})
	if err != nil {
		return nil, fmt.Errorf("notify: route %s: consumer on %s: %w", route, stream, err)
	}
	return c, nil
}

func (n *Notifier) addRoute(ctx context.Context, router *message.Router, r *Route) error {
	bindViews := func(ctx context.Context) (jetstream.Consumer, error) {
		return n.consumer(ctx, "KV_"+n.opts.ViewsBucket, r.Name, "$KV."+n.opts.ViewsBucket+"."+n.cluster+".>", jetstream.DeliverAllPolicy)
	}
	bindEvents := func(ctx context.Context) (jetstream.Consumer, error) {
		return n.consumer(ctx, "KV_"+Bucket, r.Name, eventsFilter(n.cluster), jetstream.DeliverNewPolicy)
	}
	vc, err := bindViews(ctx)
	if err != nil {
		return err
	}
	ec, err := bindEvents(ctx)
	if err != nil {
		return err
	}
	rt := &route{n: n, r: r, since: vc.CachedInfo().Created, records: map[string]*guestRecord{}}
	log := n.log.With().Str("route", r.Name).Logger()
	sub := newSubscriber(n.heartbeat(), log, source{name: srcViews, cons: vc, bind: bindViews},
		source{name: srcEvents, cons: ec, bind: bindEvents})
	h := router.AddConsumerHandler(r.Name, r.Name, sub, rt.handle)
	// Only a receiver's failure is parked, and only while running: a
	// delivery cut short by shutdown, or the bus failing, is nacked and
	// delivered again (by the next run).
	// A handler that panics on a message would panic on it for ever:
	// parked too.
	poison, err := middleware.PoisonQueueWithFilter(parker{rt}, "parked."+r.Name, func(err error) bool {
		var panicked middleware.RecoveredPanicError
		return ctx.Err() == nil && (errors.Is(err, errReceiver) || errors.As(err, &panicked))
	})
	if err != nil {
		return err
	}
	if r.Throttle.Count > 0 {
		// Around the deliveries alone (route.send), not the handler: most
		// documents a route reads notify nobody and must not wait.
		rt.throttle = middleware.NewThrottle(r.Throttle.Count, time.Duration(r.Throttle.Per))
	}
	mws := []message.HandlerMiddleware{poison, middleware.Recoverer, middleware.Retry{MaxRetries: r.Retry.Max, InitialInterval: time.Duration(r.Retry.Initial),
		MaxInterval: time.Duration(r.Retry.MaxInterval), Multiplier: r.Retry.Multiplier, RandomizationFactor: 0.2,
		ResetContextOnRetry: true}.Middleware, middleware.Timeout(time.Duration(r.Timeout))}
	// The first is outermost: parked after the retries, each attempt with
	// its own timeout.
	h.AddMiddleware(mws...)
	return nil
}

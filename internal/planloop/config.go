package planloop

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/planner"
)

// Config configures a Loop. Start from [DefaultConfig]: a field left zero
// is refused by [Config.Validate], not read as its default.
type Config struct {
	// Planner configures the engine (cluster, name, partitions, policy,
	// intervals); its Owner and DecodeWorkers are the loop's to set.
	Planner planner.Config
	// Stream is the journal stream's name, recorded in checkpoints.
	Stream string
	// Tick is how often time-based work runs: due retries, observer
	// staleness, settling publishes, flushing documents.
	Tick time.Duration
	// LeaseTTL is how long a dead planner's partitions stay its own when
	// several planners run (package lease); Replicas the lease bucket's
	// replica count when this planner creates it.
	LeaseTTL time.Duration
	Replicas int
	// Registerer receives the planner's metrics (nil: none).
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
	// Clock ticks the loop and stamps inputs.
	Clock clock.Clock
	// Ledger is the cluster's limits ledger (bus.LimitsStore); nil
	// enforces the limits from this planner's fold alone (one planner).
	Ledger Ledger
	// Poison, if set, receives the events the engine could not fold
	// (control.Router.Poison); they are logged either way.
	Poison func(source, subject string, seq uint64, err error)
}

// Defaults, each with its reason.
const (
	// DefaultTick: a retry, a flush or a settled publish waits a quarter
	// second at most, for four wake-ups a second.
	DefaultTick = 250 * time.Millisecond
	// DefaultLeaseTTL: a dead planner's guests are planned again by a
	// survivor within about five seconds.
	DefaultLeaseTTL = lease.DefaultTTL
	// DefaultStream is the journal stream's default name.
	DefaultStream = "PVE"
)

// DefaultConfig returns the defaults above, with the planner's.
func DefaultConfig() Config {
	return Config{Planner: planner.DefaultConfig(), Stream: DefaultStream, Tick: DefaultTick, LeaseTTL: DefaultLeaseTTL,
		Replicas: 1, Clock: clock.Real}
}

// Validate refuses a Config that makes no sense, naming the field (of
// the planner's Config too); New calls it.
func (c Config) Validate() error {
	const f = "planloop.Config."
	switch {
	case c.Stream == "":
		return errors.New(f + "Stream: must be set")
	case c.Tick <= 0:
		return fmt.Errorf(f+"Tick: must be > 0, got %v", c.Tick)
	case c.LeaseTTL < lease.MinTTL: // the lease store's TTL, as package lease checks it at start
		return fmt.Errorf(f+"LeaseTTL: must be at least %s, got %s", lease.MinTTL, c.LeaseTTL)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf(f+"Replicas: must be within 1..5, got %d", c.Replicas)
	case c.Clock == nil:
		return errors.New(f + "Clock: must be set (clock.Real)")
	}
	return c.Planner.Validate()
}

type metrics struct {
	folded      prometheus.Counter
	planned     *prometheus.CounterVec
	guests      *prometheus.GaugeVec
	outOfSync   prometheus.Gauge
	held        prometheus.Gauge
	waiting     *prometheus.GaugeVec
	refused     *prometheus.CounterVec
	convergence prometheus.Histogram
	// pending is the feed's backlog (consumer "planner"): entries the
	// journal held after the last one folded. A vector, as the executors'
	// (a variable label), so that one registry takes both.
	pending prometheus.Gauge
}

// newMetrics builds the loop's metrics and registers them on r (nil:
// none); owned reads the partitions held, at scrape.
func newMetrics(r prometheus.Registerer, owned func() int) *metrics {
	m := &metrics{
		folded: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_planner_events_folded_total",
			Help: "Journal events folded into views."}),
		planned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_planner_actions_planned_total",
			Help: "Actions published, by operation."}, []string{"op"}),
		guests: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "converge_guests",
			Help: "Guests by state."}, []string{"state"}),
		outOfSync: prometheus.NewGauge(prometheus.GaugeOpts{Name: "converge_guests_out_of_sync",
			Help: "Guests with desired state that are not as desired (every state but converged, absent and unmanaged)."}),
		// A config write converges in about a second, a clone or a
		// shutdown behind the guard in minutes or hours: 0.25 s to ~3 h.
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "converge_convergence_seconds",
			Help:    "Time from a desired revision's journal time to the plan that found the guest converged (or absent, as desired); once per revision, by the guest's planner.",
			Buckets: prometheus.ExponentialBuckets(0.25, 3, 10)}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "converge_held_actions",
			Help: "Guests whose disruptive action the mass-change guard holds until `converge approve`."}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "converge_limit_waiting_guests",
			Help: "Guests whose next action waits for a limit: node (task slots), storage (full clones), create_rate, max_guests."}, []string{"limit"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_limit_refusals_total",
			Help: "Actions the cluster's limits ledger refused room for (another planner took it), by limit."}, []string{"limit"}),
	}
	pending := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "converge_consumer_pending",
		Help: "Journal entries a consumer has not delivered yet (an executor's partition consumer, or the planner's feed)."}, []string{"consumer"})
	m.pending = pending.WithLabelValues("planner")
	if r != nil {
		r.MustRegister(pending, m.folded, m.planned, m.guests, m.outOfSync, m.held, m.waiting, m.refused, m.convergence,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "converge_partitions_owned",
				Help:        "Journal partitions this process's role holds a lease on.",
				ConstLabels: prometheus.Labels{"role": "planner"}}, func() float64 { return float64(owned()) }))
	}
	return m
}

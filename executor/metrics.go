package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// Metrics are the executors' Prometheus series. One Metrics serves every
// executor of a process (Config.Metrics): a process that runs several
// registers the names once, and the per-executor figures (partitions,
// consumers) are summed or listed over all of them.
type Metrics struct {
	actions  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// recreated counts partition consumers found deleted and created
	// again (package bus).
	recreated *prometheus.CounterVec
	// reachable is what the executors' own Proxmox calls found: 0 unknown
	// (no call yet: the series is left out rather than read as down),
	// 1 answered, 2 not.
	reachable atomic.Int32

	mu    sync.Mutex
	execs []*Executor

	partitionsDesc, pendingDesc, ackPendingDesc, reachableDesc *prometheus.Desc
}

// backlogTimeout bounds the consumer-info requests of one scrape: a
// journal that does not answer leaves the consumers' series out rather
// than holding the scrape up.
const backlogTimeout = 2 * time.Second

// NewMetrics returns the executors' metrics, registered on reg (nil: not
// registered, as for an executor whose process exposes none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_actions_total",
			Help: "Actions whose final result an executor journalled, by operation, result (succeeded, failed, skipped) and error class (empty when none)."},
			[]string{"op", "result", "class"}),
		// A config write takes milliseconds, a clone or a graceful
		// shutdown minutes: 50 ms to about 16 min.
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "converge_action_duration_seconds",
			Help:    "Time from an action's delivery to its final result journalled, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.05, 3, 10)}, []string{"op"}),
		recreated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_consumer_recreated_total",
			Help: "Partition consumers an executor found deleted (by an operator, or lost with the stream) and created again."},
			[]string{"consumer"}),
		partitionsDesc: prometheus.NewDesc("converge_partitions_owned",
			"Journal partitions this process's role holds a lease on.", nil, prometheus.Labels{"role": "executor"}),
		pendingDesc: prometheus.NewDesc("converge_consumer_pending",
			"Journal entries a consumer has not delivered yet (an executor's partition consumer, or the planner's feed).", []string{"consumer"}, nil),
		ackPendingDesc: prometheus.NewDesc("converge_consumer_ack_pending",
			"Actions an executor's partition consumer delivered and has not had acknowledged.", []string{"consumer"}, nil),
		reachableDesc: prometheus.NewDesc("converge_pve_reachable",
			"Whether Proxmox VE answers: the observer's last pass (role=observer), the executors' last call (role=executor).", nil, prometheus.Labels{"role": "executor"}),
	}
	if reg != nil {
		reg.MustRegister(m.actions, m.duration, m.recreated, m, backlog{m})
	}
	return m
}

func (m *Metrics) add(e *Executor) {
	m.mu.Lock()
	m.execs = append(m.execs, e)
	m.mu.Unlock()
}

// finished records an action's final result, journalled.
func (m *Metrics) finished(op events.Op, r *events.Result, took time.Duration) {
	m.actions.WithLabelValues(string(op), string(r.Status), string(r.ErrorClass)).Inc()
	m.duration.WithLabelValues(string(op)).Observe(max(took, 0).Seconds())
}

// Answered records whether Proxmox answered a call made for the
// executors: their own (pve.WithAnswered), or the inventory calls of the
// process they run in (its observer, its readiness probe), so that the
// gauge follows an outage while no action runs.
func (m *Metrics) Answered(ok bool) { m.answered(ok) }

func (m *Metrics) answered(ok bool) {
	if ok {
		m.reachable.Store(1)
	} else {
		m.reachable.Store(2)
	}
}

// Describe implements prometheus.Collector for the series read at scrape.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.partitionsDesc
	ch <- m.reachableDesc
}

// Collect implements prometheus.Collector: the partitions owned, and
// whether Proxmox answered the last call.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if r := m.reachable.Load(); r != 0 {
		ch <- prometheus.MustNewConstMetric(m.reachableDesc, prometheus.GaugeValue, float64(2-r))
	}
	owned := 0
	for _, e := range m.executors() {
		owned += len(e.Partitions())
	}
	ch <- prometheus.MustNewConstMetric(m.partitionsDesc, prometheus.GaugeValue, float64(owned))
}

func (m *Metrics) executors() []*Executor {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Executor(nil), m.execs...)
}

// backlog collects the consumers' backlogs. It is an unchecked collector
// (it describes nothing): the planner registers converge_consumer_pending
// too, for its own feed, and a registry refuses one descriptor described
// by two collectors; their series differ by the consumer label.
type backlog struct{ m *Metrics }

func (backlog) Describe(chan<- *prometheus.Desc) {}

// Collect asks the journal now for each owned partition consumer's
// backlog (one request per partition, in parallel, bounded by
// backlogTimeout).
func (b backlog) Collect(ch chan<- prometheus.Metric) {
	m := b.m
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, e := range m.executors() {
		parts := e.Partitions()
		bl, ok := e.j.(journal.Backlog)
		if !ok {
			continue
		}
		for _, p := range parts {
			wg.Go(func() {
				name := e.ConsumerName(p)
				pending, ackPending, err := bl.Backlog(ctx, name)
				if err != nil {
					// Not created yet, or the journal does not answer: left
					// out of this scrape.
					e.log.Debug().Err(err).Str("consumer", name).Msg("consumer backlog not read for metrics")
					return
				}
				ch <- prometheus.MustNewConstMetric(m.pendingDesc, prometheus.GaugeValue, float64(pending), name)
				ch <- prometheus.MustNewConstMetric(m.ackPendingDesc, prometheus.GaugeValue, float64(ackPending), name)
			})
		}
	}
	wg.Wait()
}

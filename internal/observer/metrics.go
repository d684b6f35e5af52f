package observer

import "github.com/prometheus/client_golang/prometheus"

// metrics are the observer's Prometheus series (Config.Registerer): the
// verification delay the estate's size allows, reads by why, status reads
// that confirmed what a lagging inventory contradicted, resyncs
// asked for against those carried out (the rest were merged), whether
// Proxmox answered the last pass (as its heartbeat says) and when the
// last pass ended.
type metrics struct {
	reachable    prometheus.Gauge
	lastPass     prometheus.Gauge
	verifyPeriod prometheus.Gauge
	reads        *prometheus.CounterVec
	statusReads  prometheus.Counter
	resyncAsked  prometheus.Counter
	resyncDone   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		// The help text is the executors' too (package executor): one
		// process may register both.
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "converge_pve_reachable",
			Help:        "Whether Proxmox VE answers: the observer's last pass (role=observer), the executors' last call (role=executor).",
			ConstLabels: prometheus.Labels{"role": "observer"}}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "converge_observer_last_pass_timestamp_seconds",
			Help: "When the observer's last pass ended (its heartbeat published or attempted), reachable or not, in Unix seconds."}),
		verifyPeriod: prometheus.NewGauge(prometheus.GaugeOpts{Name: "converge_observer_verify_period_seconds",
			Help: "Every guest's config (applied and pending values) is verified at least this often, at the current number of guests."}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_observer_config_reads_total",
			Help: "Proxmox config reads by reason: verify (within the budget), deferred (within the budget, first: a row change an executor's read-back explained), confirm (within the budget, before any: a changed snapshot published as a concurrent executor's read-back was journalled) or change (at once: new, changed, failed before, contradicting a read-back)."}, []string{"reason"}),
		statusReads: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_observer_status_reads_total",
			Help: "Proxmox status/current reads of guests whose /cluster/resources status (pvestatd's broadcast) disagreed with the journal's newest status."}),
		resyncAsked: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_observer_resync_requests_total",
			Help: "Resync requests received; those beyond converge_observer_resyncs_total were merged."}),
		resyncDone: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_observer_resyncs_total",
			Help: "Resyncs carried out (every guest verified first, within the budget)."}),
	}
	if reg != nil {
		reg.MustRegister(m.reachable, m.lastPass, m.verifyPeriod, m.reads, m.statusReads, m.resyncAsked, m.resyncDone)
	}
	return m
}

// budgetReads counts n reads within the nodes' budgets, of which deferred
// were deferred row changes and confirm confirmations.
func (m *metrics) budgetReads(n, deferred, confirm int) {
	m.reads.WithLabelValues("verify").Add(float64(n - deferred - confirm))
	m.reads.WithLabelValues("deferred").Add(float64(deferred))
	m.reads.WithLabelValues("confirm").Add(float64(confirm))
}

// pass records a pass's figures.
func (m *metrics) pass(st PassStats) {
	if st.Reachable {
		m.verifyPeriod.Set(st.VerifyPeriod.Seconds())
	}
	m.budgetReads(st.Verified, st.DeferredReads, st.ConfirmReads)
	m.reads.WithLabelValues("change").Add(float64(st.ConfigReads - st.Verified))
	m.statusReads.Add(float64(st.StatusReads))
	if st.Resync {
		m.resyncDone.Inc()
	}
}

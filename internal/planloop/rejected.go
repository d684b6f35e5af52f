package planloop

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/lograte"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// Rejected desired events are logged as well as shown in status, by the
// planner that writes the guest's document (so once per planner group):
// once per guest and event, at most rejectLogRate lines a second with a
// burst of rejectLogBurst. Lines over the rate are counted, and the count
// is given with the next line logged: a flood of invalid events, or a
// replay of a journal full of them, costs a few lines a second.
const (
	rejectLogRate  = 1
	rejectLogBurst = 10
)

type rejections struct {
	log    zerolog.Logger
	lim    *lograte.Limiter
	logged map[int]uint64 // guest → sequence of the rejection noted
	total  prometheus.Counter
}

// newRejections returns the rejection log, and registers it and the views
// writer's counters on r (nil: none).
func newRejections(log zerolog.Logger, r prometheus.Registerer, w *views.Writer) *rejections {
	rj := &rejections{log: log, lim: lograte.New(rejectLogRate, rejectLogBurst), logged: map[int]uint64{},
		total: prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_rejected_events_total",
			Help: "Rejected desired events of the guests this planner writes documents for."})}
	if r != nil {
		r.MustRegister(rj.total,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "converge_views_write_failures_total",
				Help: "Guest document writes that failed (retried with backoff)."}, func() float64 { return float64(w.Failures()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "converge_views_unwritten",
				Help: "Guests whose last document write failed."}, func() float64 { return float64(w.Unwritten()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "converge_views_truncated_total",
				Help: "Guest documents written cut down to the document size limit."}, func() float64 { return float64(w.Truncated()) }))
	}
	return rj
}

// note logs the rejections among the documents of a flush not noted yet.
func (r *rejections) note(docs []planner.Doc, now time.Time) {
	for _, d := range docs {
		v := d.View
		if v.Rejected == nil {
			delete(r.logged, v.VMID)
			continue
		}
		if r.logged[v.VMID] == v.Rejected.Seq {
			continue
		}
		r.logged[v.VMID] = v.Rejected.Seq
		r.total.Inc()
		ev := r.lim.Event(&r.log, zerolog.WarnLevel, now)
		if ev == nil {
			continue
		}
		ev = ev.Int("vmid", v.VMID).Uint64("seq", v.Rejected.Seq).Str("publisher", events.TruncateReason(v.Rejected.Publisher)).
			Str("reason", v.Rejected.Reason)
		ev.Msg("desired event rejected; nothing is planned from it")
	}
}

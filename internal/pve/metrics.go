package pve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics count and time every HTTP request a Client sends, at its
// transport: logins, re-sent requests after a refused ticket and task
// polls included, which the calls of the API do not show one by one. They
// are the Client's own (no global registry), registered by whoever runs
// it through [Client.Collectors].
type requestMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "converge_pve_requests_total",
			Help: "HTTP requests sent to Proxmox VE, by method and outcome: ok, or the error class (transient, locked, gone, terminal, conflict, unauthorized, already_done, unknown)."},
			[]string{"method", "class"}),
		// Proxmox answers reads in milliseconds and can take its full
		// timeout for a mutation behind a flock: 5 ms to 40 s.
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "converge_pve_request_duration_seconds",
			Help:    "Time from sending an HTTP request to Proxmox VE to its answer (or failure), by method.",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10)}, []string{"method"}),
	}
}

// Collectors are the Client's metrics, for the registry of the process
// that runs it (one registry may take them once; another process's its
// own).
func (c *Client) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.metrics.total, c.metrics.duration}
}

// observe records one request's outcome; err is the transport's (a
// *statusError for a non-2xx answer).
func (m *requestMetrics) observe(ctx context.Context, method string, took time.Duration, err error) {
	class := "ok"
	if err != nil {
		class = string(Classify(err).Event())
	}
	m.total.WithLabelValues(method, class).Inc()
	m.duration.WithLabelValues(method).Observe(took.Seconds())
	if fn, ok := ctx.Value(answeredKey{}).(func(bool)); ok {
		fn(answered(err))
	}
}

// answered reports whether Proxmox itself answered: any HTTP answer but
// a gateway's (502, 503, 504 come from a proxy in front, or pveproxy
// without its workers). A refused or cut connection, a timeout or a TLS
// failure did not reach it.
func answered(err error) bool {
	var se *statusError
	switch {
	case err == nil:
		return true
	case errors.As(err, &se):
		return se.Code != http.StatusBadGateway && se.Code != http.StatusServiceUnavailable && se.Code != http.StatusGatewayTimeout
	}
	return false
}

type answeredKey struct{}

// WithAnswered returns ctx with fn called after each HTTP request sent
// under it, with whether Proxmox answered it: a role learns from its own
// calls whether Proxmox is reachable (converge_pve_reachable) while
// another role shares the Client. fn must be cheap and safe for
// concurrent use.
func WithAnswered(ctx context.Context, fn func(answered bool)) context.Context {
	return context.WithValue(ctx, answeredKey{}, fn)
}

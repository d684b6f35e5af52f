package observer

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
)

// Defaults, each with its reason.
const (
	// DefaultInterval: a change made by hand in Proxmox is seen within ten
	// seconds, for one inventory call per pass.
	DefaultInterval = 10 * time.Second
	// DefaultConfigRefresh is the shortest time between two verification
	// reads of one guest: a small estate is re-verified once per pass, not
	// more, and the budget goes to larger ones.
	DefaultConfigRefresh = DefaultInterval
	// DefaultVerifyRate is the verification budget, config reads per
	// second per cluster. pveproxy answers with three workers, a GET
	// …/pending costs one of them roughly 10-50 ms: 20 a second keep at
	// most about one worker busy, leaving two for executors and people,
	// and verify 100 guests every 10 s (one pass), 10,000 within about
	// 8.5 minutes.
	DefaultVerifyRate = 20.0
	// DefaultResyncInterval: at most one full re-verification per minute
	// however many resyncs are asked for; those in between are merged.
	DefaultResyncInterval = time.Minute
	// DefaultReadConcurrency: pveproxy has three workers; four config
	// reads at once keep a pass short without taking them all.
	DefaultReadConcurrency = 4
	// DefaultMaxInFlight bounds unacknowledged observed publishes.
	DefaultMaxInFlight = 1000
	// DefaultAckTimeout bounds how long a pass waits for its publishes to
	// be acknowledged; the unacknowledged ones are retried next pass.
	DefaultAckTimeout = 30 * time.Second
	// maxAsyncPending is nats.go's default limit of unacknowledged async
	// publishes per JetStream context; beyond it publishes stall and fail.
	maxAsyncPending = 4000
)

// Config configures an Observer. Zero values take the defaults.
type Config struct {
	// Cluster is the Proxmox cluster id (default events.DefaultCluster).
	Cluster string
	// Name identifies this observer in events (default "observer@<hostname>").
	Name string
	// Interval between passes (default 10s).
	Interval time.Duration
	// ConfigRefresh is the shortest time between two verification reads
	// of one guest (default Interval); negative: no verification at all
	// (only new, changed and unconfirmed guests are read). Verification
	// re-reads guests whose inventory row did not change, which catches
	// drift that /cluster/resources does not show (description, onboot,
	// pending values), within VerifyRate.
	ConfigRefresh time.Duration
	// VerifyRate is the verification budget in config reads per second
	// (default 20). Every guest is verified at least once per
	// max(ConfigRefresh, guests / VerifyRate), plus one Interval. Reads of
	// new or changed guests are not verification and happen at once.
	VerifyRate float64
	// ResyncInterval: at most one resync (every guest due for
	// verification) is carried out per ResyncInterval (default 1m);
	// requests in between are merged into the next one.
	ResyncInterval time.Duration
	// ReadConcurrency bounds parallel config reads (default 4; pveproxy
	// has few workers, so keep it small against a real cluster).
	ReadConcurrency int
	// MaxInFlight bounds unacknowledged publishes (default 1000, at most
	// 4000: the async window of the bus's JetStream context).
	MaxInFlight int
	// AckTimeout bounds the wait for a pass's acknowledgements (default 30s).
	AckTimeout time.Duration
	// ObservedTTL is how long the journal keeps each observed snapshot and
	// heartbeat (a per-message TTL; 0: as long as the journal keeps
	// anything). Polls are noise next to the audit trail of desired
	// changes, actions and results, so they may go sooner. An unchanged
	// snapshot is published again after ObservedTTL/2, so every guest's
	// newest snapshot stays in the journal.
	ObservedTTL time.Duration
	Logger      zerolog.Logger
	// Registerer, if set, receives the observer's metrics (verification
	// period, config reads by reason, resyncs asked and carried out).
	Registerer prometheus.Registerer
	// Clock stamps reads and events and times passes (default clock.Real).
	Clock clock.Clock
}

// The settings an operator gives (flags), one at a time. In a Config a
// zero field means "the default"; given by an operator, zero is a value,
// and refused where it means nothing. Each error reads after the
// setting's name; defaults checks the fields with them. ConfigRefresh
// takes any value (0: Interval; negative: no verification).

// CheckInterval checks Config.Interval as given.
func CheckInterval(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be > 0, got %s", d)
	}
	return nil
}

// CheckVerifyRate checks Config.VerifyRate as given: 0 would verify
// nothing, which a negative ConfigRefresh says.
func CheckVerifyRate(r float64) error {
	if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return fmt.Errorf("must be > 0, got %v", r)
	}
	return nil
}

// CheckResyncInterval checks Config.ResyncInterval as given.
func CheckResyncInterval(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be > 0, got %s", d)
	}
	return nil
}

// CheckObservedTTL checks Config.ObservedTTL (0: none) against the
// Interval it is observed at (defaulted): a snapshot is refreshed at TTL/2
// on the next pass, so TTL must leave room for a few passes (and NATS
// counts TTLs in whole seconds).
func CheckObservedTTL(ttl, interval time.Duration) error {
	if ttl < 0 || (ttl > 0 && (ttl < time.Second || ttl < 4*interval)) {
		return fmt.Errorf("must be 0 or at least 1s and 4 × the observe interval (%s), got %s", 4*interval, ttl)
	}
	return nil
}

func (c *Config) defaults() error {
	if c.Cluster == "" {
		c.Cluster = events.DefaultCluster
	}
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return fmt.Errorf("observer: %w", err)
	}
	if c.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		c.Name = "observer@" + host
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	} else if err := CheckInterval(c.Interval); err != nil {
		return fmt.Errorf("observer: Interval %w", err)
	}
	if c.ConfigRefresh == 0 {
		c.ConfigRefresh = c.Interval
	}
	if c.VerifyRate == 0 {
		c.VerifyRate = DefaultVerifyRate
	} else if err := CheckVerifyRate(c.VerifyRate); err != nil {
		return fmt.Errorf("observer: VerifyRate %w", err)
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = DefaultResyncInterval
	} else if err := CheckResyncInterval(c.ResyncInterval); err != nil {
		return fmt.Errorf("observer: ResyncInterval %w", err)
	}
	switch {
	case c.ReadConcurrency == 0:
		c.ReadConcurrency = DefaultReadConcurrency
	case c.ReadConcurrency < 0:
		return fmt.Errorf("observer: ReadConcurrency must be > 0, got %d", c.ReadConcurrency)
	}
	switch {
	case c.MaxInFlight == 0:
		c.MaxInFlight = DefaultMaxInFlight
	case c.MaxInFlight < 0 || c.MaxInFlight > maxAsyncPending:
		return fmt.Errorf("observer: MaxInFlight must be within 1..%d, got %d", maxAsyncPending, c.MaxInFlight)
	}
	switch {
	case c.AckTimeout == 0:
		c.AckTimeout = DefaultAckTimeout
	case c.AckTimeout < 0:
		return fmt.Errorf("observer: AckTimeout must be > 0, got %s", c.AckTimeout)
	}
	if err := CheckObservedTTL(c.ObservedTTL, c.Interval); err != nil {
		return fmt.Errorf("observer: ObservedTTL %w", err)
	}
	c.Clock = clock.Or(c.Clock)
	return nil
}

package observer

import (
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
)

// Defaults, each with its reason.
const (
	// DefaultInterval: a change made by hand in Proxmox is seen within ten
	// seconds, for one inventory call per pass.
	DefaultInterval = 10 * time.Second
	// DefaultConfigRefresh bounds the delay of drift the inventory does
	// not show (description, onboot, pending changes) to five minutes,
	// reading a slice of the guests each pass.
	DefaultConfigRefresh = 5 * time.Minute
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
	// ConfigRefresh: every guest's config is re-read at least this often
	// even if its inventory row did not change, which catches drift that
	// /cluster/resources does not show (description, onboot, pending
	// changes). 0 means the default (5m), negative never.
	ConfigRefresh time.Duration
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
	// Clock stamps reads and events and times passes (default clock.Real).
	Clock clock.Clock
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
	switch {
	case c.Interval == 0:
		c.Interval = DefaultInterval
	case c.Interval < 0:
		return fmt.Errorf("observer: Interval must be > 0, got %s", c.Interval)
	}
	if c.ConfigRefresh == 0 {
		c.ConfigRefresh = DefaultConfigRefresh
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
	// A snapshot is refreshed at TTL/2 on the next pass: TTL must leave
	// room for a few passes (and NATS counts TTLs in whole seconds).
	if c.ObservedTTL < 0 || (c.ObservedTTL > 0 && (c.ObservedTTL < time.Second || c.ObservedTTL < 4*c.Interval)) {
		return fmt.Errorf("observer: ObservedTTL must be 0 or at least 1s and 4 × Interval (%s), got %s", 4*c.Interval, c.ObservedTTL)
	}
	c.Clock = clock.Or(c.Clock)
	return nil
}

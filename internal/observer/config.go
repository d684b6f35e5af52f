package observer

import (
	"errors"
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
	// DefaultVerifyRate is the verification budget, config reads (GET
	// …/pending: applied and pending values in one read) per second per
	// node, at most that many in any second. Each node's pveproxy serves
	// its own guests' reads with three workers: two a second, of 10-50 ms
	// each, keep a few percent of one worker busy, leaving the node to
	// executors and people; and a node of 100 guests is verified within
	// 50 s, so an estate of 10,000 guests on 100 nodes within a minute
	// (issue 42's target: no node serving more than 2 of converge's config
	// reads a second).
	DefaultVerifyRate = 2.0
	// DefaultResyncInterval: at most one full re-verification per minute
	// however many resyncs are asked for; those in between are merged.
	DefaultResyncInterval = time.Minute
	// DefaultReadConcurrency: pveproxy has three workers per node; four
	// reads at once a node keep a pass short, and the Proxmox client
	// holds each node's share to its workers (pve.Config.NodeCalls).
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

// Config configures an Observer. Start from [DefaultConfig]: a field left
// zero is refused by [Config.Validate], not read as its default.
type Config struct {
	// Cluster is the Proxmox cluster id.
	Cluster string
	// Name identifies this observer in events.
	Name string
	// Interval between passes.
	Interval time.Duration
	// ConfigRefresh is the shortest time between two verification reads
	// of one guest. Verification re-reads guests whose inventory row did
	// not change, which catches drift that /cluster/resources does not
	// show (description, onboot, pending values), within VerifyRate.
	ConfigRefresh time.Duration
	// VerifyOff turns verification off: only new, changed and unconfirmed
	// guests are read.
	VerifyOff bool
	// VerifyRate is the verification budget in config reads per second
	// per node: at most ⌊VerifyRate⌋ in any second on any node (below 1,
	// one per 1/VerifyRate). Every guest is verified at least once per
	// max(ConfigRefresh, guests of the fullest node / VerifyRate), plus a
	// second, and its drift published within one Interval more. Reads of
	// new or changed guests are not verification and happen at once, but
	// for changes an executor's read-back explains, which are verified
	// first (explain.go).
	// Agent reads have a budget of their own at the same rate.
	VerifyRate float64
	// ResyncInterval: at most one resync (every guest due for
	// verification) is carried out per ResyncInterval; requests in
	// between are merged into the next one.
	ResyncInterval time.Duration
	// ReadConcurrency bounds a pass's parallel reads per node (each
	// node's pveproxy has few workers and serves its own guests' reads).
	ReadConcurrency int
	// MaxInFlight bounds unacknowledged publishes (at most 4000: the async
	// window of the bus's JetStream context).
	MaxInFlight int
	// AckTimeout bounds the wait for a pass's acknowledgements.
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
	// Clock stamps reads and events and times passes.
	Clock clock.Clock
}

// DefaultConfig returns the defaults above, for the default cluster,
// named "observer@<hostname>", keeping observed snapshots as long as the
// journal keeps anything.
func DefaultConfig() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return Config{Cluster: events.DefaultCluster, Name: "observer@" + host, Interval: DefaultInterval,
		ConfigRefresh: DefaultConfigRefresh, VerifyRate: DefaultVerifyRate, ResyncInterval: DefaultResyncInterval,
		ReadConcurrency: DefaultReadConcurrency, MaxInFlight: DefaultMaxInFlight, AckTimeout: DefaultAckTimeout,
		Clock: clock.Real}
}

// Validate refuses a Config that makes no sense, naming the field; New
// calls it.
func (c Config) Validate() error {
	const f = "observer.Config."
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return fmt.Errorf(f+"Cluster: %w", err)
	}
	switch {
	case c.Name == "":
		return errors.New(f + "Name: must be set")
	case c.Interval <= 0:
		return fmt.Errorf(f+"Interval: must be > 0, got %s", c.Interval)
	case !c.VerifyOff && c.ConfigRefresh <= 0:
		return fmt.Errorf(f+"ConfigRefresh: must be > 0 (or verification off), got %s", c.ConfigRefresh)
	case !(c.VerifyRate > 0 && !math.IsInf(c.VerifyRate, 1)):
		// 0 would verify nothing, which VerifyOff says.
		return fmt.Errorf(f+"VerifyRate: must be > 0, got %v", c.VerifyRate)
	case c.ResyncInterval <= 0:
		return fmt.Errorf(f+"ResyncInterval: must be > 0, got %s", c.ResyncInterval)
	case c.ReadConcurrency < 1:
		return fmt.Errorf(f+"ReadConcurrency: must be >= 1, got %d", c.ReadConcurrency)
	case c.MaxInFlight < 1 || c.MaxInFlight > maxAsyncPending:
		return fmt.Errorf(f+"MaxInFlight: must be within 1..%d, got %d", maxAsyncPending, c.MaxInFlight)
	case c.AckTimeout <= 0:
		return fmt.Errorf(f+"AckTimeout: must be > 0, got %s", c.AckTimeout)
	// A snapshot is refreshed at TTL/2 on the next pass, so TTL must leave
	// room for a few passes (and NATS counts TTLs in whole seconds).
	case c.ObservedTTL < 0 || (c.ObservedTTL > 0 && (c.ObservedTTL < time.Second || c.ObservedTTL < 4*c.Interval)):
		return fmt.Errorf(f+"ObservedTTL: must be 0 or at least 1s and 4 × the observe interval (%s), got %s", 4*c.Interval, c.ObservedTTL)
	case c.Clock == nil:
		return errors.New(f + "Clock: must be set (clock.Real)")
	}
	return nil
}

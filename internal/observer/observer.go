package observer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/pve"
)

// Proxmox is what the observer reads; *pve.Client satisfies it.
type Proxmox interface {
	Inventory(ctx context.Context) ([]pve.Resource, error)
	GuestConfig(ctx context.Context, ref pve.GuestRef) (*pve.GuestConfig, error)
}

var _ Proxmox = (*pve.Client)(nil)

// Defaults.
const (
	DefaultInterval        = 10 * time.Second
	DefaultConfigRefresh   = 5 * time.Minute
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
	// Clock stamps reads and events (default time.Now).
	Clock func() time.Time
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
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return nil
}

// PassStats describe one pass.
type PassStats struct {
	Pass      uint64
	Reachable bool
	// Guests listed by the inventory (0 when it failed).
	Guests int
	// ConfigReads attempted and ConfigErrors among them.
	ConfigReads  int
	ConfigErrors int
	// Published observed events acknowledged by the stream, Gone those of
	// them saying Exists=false, PublishErrors those not acknowledged.
	Published     int
	Gone          int
	PublishErrors int
}

// Observer polls Proxmox and publishes observations. Create it with New.
type Observer struct {
	cfg Config
	px  Proxmox
	bus *bus.Bus
	log zerolog.Logger

	resyncReq atomic.Bool
	wake      chan struct{}

	mu        sync.Mutex // serialises passes; guards everything below
	loaded    bool
	pass      uint64
	guests    map[int]*guestState
	published map[int]*events.Observed
	lastCount int
	lastErr   string
	reachable bool
}

// guestState is what the observer remembers of a guest Proxmox lists.
type guestState struct {
	// row is the inventory row as of the last successful config read.
	row    rowKey
	cfg    configSnap
	readAt time.Time
	read   bool // cfg holds a successful read
	force  bool // re-read regardless (resync, or a failed read)
}

// New validates cfg and returns an observer. It does no I/O.
func New(cfg Config, px Proxmox, b *bus.Bus) (*Observer, error) {
	if px == nil {
		return nil, errors.New("observer: no Proxmox client")
	}
	if b == nil {
		return nil, errors.New("observer: no bus")
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Observer{
		cfg:       cfg,
		px:        px,
		bus:       b,
		log:       cfg.Logger.With().Str("cluster", cfg.Cluster).Logger(), // the caller names the role
		wake:      make(chan struct{}, 1),
		guests:    map[int]*guestState{},
		published: map[int]*events.Observed{},
		reachable: true,
	}, nil
}

// Config returns the resolved configuration.
func (o *Observer) Config() Config { return o.cfg }

// Resync asks for a pass now that re-reads every guest's config. It never
// blocks; requests made before the pass starts are coalesced.
func (o *Observer) Resync() {
	o.resyncReq.Store(true)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Run passes immediately, then every Interval (measured from the end of a
// pass) and whenever Resync is called, until ctx ends; then it returns nil.
// Pass errors are logged, not returned: the next pass retries.
func (o *Observer) Run(ctx context.Context) error {
	o.log.Info().Str("observer", o.cfg.Name).Dur("interval", o.cfg.Interval).
		Dur("config_refresh", o.cfg.ConfigRefresh).Msg("observer started")
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.log.Info().Msg("observer stopped")
			return nil
		case <-t.C:
		case <-o.wake:
			t.Stop() // Go ≥1.23 timers: no stale tick after Stop
		}
		if _, err := o.Pass(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn().Err(err).Msg("observer pass incomplete")
		}
		t.Reset(o.cfg.Interval)
	}
}

func (o *Observer) now() time.Time { return o.cfg.Clock().UTC() }

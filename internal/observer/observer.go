package observer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// Proxmox is what the observer reads; *pve.Client satisfies it.
type Proxmox interface {
	Inventory(ctx context.Context) ([]pve.Resource, error)
	GuestConfig(ctx context.Context, ref pve.GuestRef) (*pve.GuestConfig, error)
}

var _ Proxmox = (*pve.Client)(nil)

// Journal is what the observer needs of the journal: heartbeats are
// published and waited for, observations published asynchronously (a
// window of MaxInFlight), and the newest observation of each guest read
// back after a restart. *bus.Bus is one.
type Journal interface {
	journal.Appender
	journal.AsyncAppender
	journal.Latest
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
	j   Journal
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
func New(cfg Config, px Proxmox, j Journal) (*Observer, error) {
	if px == nil {
		return nil, errors.New("observer: no Proxmox client")
	}
	if j == nil {
		return nil, errors.New("observer: no journal")
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Observer{
		cfg:       cfg,
		px:        px,
		j:         j,
		log:       cfg.Logger.With().Str("cluster", cfg.Cluster).Logger(), // the caller names the role
		wake:      make(chan struct{}, 1),
		guests:    map[int]*guestState{},
		published: map[int]*events.Observed{},
		reachable: true,
	}, nil
}

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
	t := o.cfg.Clock.NewTimer(o.cfg.Interval)
	defer t.Stop()
	for ctx.Err() == nil {
		if _, err := o.Pass(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn().Err(err).Msg("observer pass incomplete")
		}
		t.Reset(o.cfg.Interval)
		select {
		case <-ctx.Done():
		case <-t.C():
		case <-o.wake:
		}
	}
	o.log.Info().Msg("observer stopped")
	return nil
}

func (o *Observer) now() time.Time { return o.cfg.Clock.Now().UTC() }

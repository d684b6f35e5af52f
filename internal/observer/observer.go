package observer

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// Proxmox is what the observer reads; *pve.Client satisfies it.
type Proxmox interface {
	Inventory(ctx context.Context) ([]pve.Resource, error)
	GuestConfig(ctx context.Context, ref pve.GuestRef) (*pve.GuestConfig, error)
	// GuestStatus confirms a status the inventory shows that the journal
	// contradicts (status.go).
	GuestStatus(ctx context.Context, ref pve.GuestRef) (*pve.GuestStatus, error)
}

var _ Proxmox = (*pve.Client)(nil)

// Journal is what the observer needs of the journal: heartbeats are
// published and waited for, observations published asynchronously (a
// window of MaxInFlight), the newest observation of each guest read back
// after a restart, the journal's last sequence before each pass (the
// passes' observations carry it as AfterSeq), and a guest's newest result
// (the executor's read-back a status is checked against). *bus.Bus is one.
type Journal interface {
	journal.Appender
	journal.AsyncAppender
	journal.Latest
	journal.KindReader // new guests' desired events (soon.go)
	Extent
	Lasts(ctx context.Context, cluster string, vmid int, kinds ...events.Kind) ([]*journal.Entry, error)
	// Next is the guest's first entry of kind at or after seq (nil: none),
	// to tell whether an observation needs confirming (publish.go).
	Next(ctx context.Context, kind events.Kind, cluster string, vmid int, seq uint64) (*journal.Entry, error)
}

// Extent reports the journal's extent (journal.Follower has it).
type Extent interface {
	Info(ctx context.Context) (journal.Info, error)
}

// PassStats describe one pass.
type PassStats struct {
	Pass      uint64
	Reachable bool
	// Guests listed by the inventory (0 when it failed).
	Guests int
	// ConfigReads attempted and ConfigErrors among them; Verified those of
	// them that were verification (within the budget), the others read
	// new, changed or unconfirmed guests.
	ConfigReads  int
	ConfigErrors int
	Verified     int
	// StatusReads are status/current reads that confirmed a status the
	// journal contradicted, StatusErrors those that failed.
	StatusReads  int
	StatusErrors int
	// VerifyPeriod bounds, at this estate's size, how long drift the
	// inventory does not show may go unseen: every guest is verified at
	// least this often.
	VerifyPeriod time.Duration
	// AfterSeq is the journal's last sequence read before the inventory
	// (0: unknown), carried by the observations read in this pass.
	AfterSeq uint64
	// Complete: every guest listed is in the journal as read (no config
	// read or publish failed): the heartbeat carries AfterSeq, and the
	// planner takes a desired guest without an observation as missing.
	Complete bool
	// Unread are the listed guests whose config could not be read and
	// that were never published (events.Heartbeat.Unread).
	Unread []int
	// Resync reports that a resync was carried out in this pass, merging
	// ResyncsMerged requests into it.
	Resync        bool
	ResyncsMerged int
	// Published observed events acknowledged by the stream, Gone those of
	// them saying Exists=false, PublishErrors those not acknowledged.
	Published     int
	Gone          int
	PublishErrors int
	// AgentReads are guest agent reads (within the verification budget,
	// agent.go), AgentUnavailable those that got no addresses.
	AgentReads       int
	AgentUnavailable int
	// Deferred are the guests whose row changed in a way an executor's
	// read-back explains (explain.go): not read at once, but first within
	// the verification budget. DeferredReads are those of Verified that
	// read such a guest.
	Deferred      int
	DeferredReads int
	// ConfirmReads are those of Verified that read a guest whose changed
	// snapshot is unconfirmed (publish.go).
	ConfirmReads int
	// CaughtUp are the guests whose row changed only to say what their
	// last read and the journal already said (explain.go): adopted,
	// not read.
	CaughtUp int
}

// Observer polls Proxmox and publishes observations. Create it with New.
type Observer struct {
	cfg Config
	px  Proxmox
	j   Journal
	log zerolog.Logger

	// resyncs counts the requests not carried out yet (coalesced).
	resyncs atomic.Int64
	// period is the last reachable pass's VerifyPeriod (nanoseconds).
	period atomic.Int64
	wake   chan struct{}

	mu          sync.Mutex // serialises passes; guards everything below
	loaded      bool
	pass        uint64
	guests      map[int]*guestState
	published   map[int]*events.Observed
	goneUnconf  map[int]bool // published gone, not confirmed yet
	acked       []ackedObs   // the observations this pass's publish got acknowledged
	extentKnown bool         // this pass read the journal's extent (AfterSeq)
	lastCount   int
	lastPerNode int // guests of the node with most, as of the last inventory
	lastErr     string
	reachable   bool
	nodes       nodeBudget    // verification reads per node (verify.go)
	budget      *rate.Limiter // agent reads, on the clock's times (agent.go)
	metrics     *metrics
	lastResync  time.Time // when the last resync was carried out
	// desiredFrom is the first journal sequence whose desired events
	// newGuests has not looked at: past the last pass's journal end.
	desiredFrom uint64
	// list and seen are plan's, verifyHeaps and verifyPicked
	// pickVerify's, reused from pass to pass.
	list         []listed
	seen         map[int]struct{}
	verifyHeaps  map[string][]verifyCand
	verifyPicked []verifyCand
	checks       []statusCheck
	contra       []int // published this pass to contradict a read-back
	// strs interns the strings kept across passes (own.go).
	strs map[string]string
	// ha is what the passes found of the cluster (ha.go).
	ha haState
	// agents is what the guest agent reads keep (agent.go).
	agents agentBook
}

// guestState is what the observer remembers of a guest Proxmox lists.
type guestState struct {
	// placement is the guest's HA placement as of its last read (ha.go).
	placement *events.HAPlacement
	// row is the inventory row as of the last successful config read.
	row      rowKey
	cfg      configSnap
	readAt   time.Time
	afterSeq uint64 // the journal's last sequence before that read
	// afterKnown: afterSeq was read from the journal (0 then is an empty
	// journal, not an unknown extent: a guest read before the first event
	// was journalled had every row change after read at once).
	afterKnown bool
	read       bool // cfg holds a successful read
	force      bool // re-read at once (a failed read)
	due        bool // verify before any other (resync)
	// gen counts the reads and deferrals recorded, so that a round's read
	// in flight meanwhile is dropped (verifyround.go).
	gen uint32
	// deferred, when set, says that row was adopted without a read (a
	// change an executor's read-back explains, explain.go): cfg predates
	// it, so no snapshot is built until the guest is read, and it is
	// verified as if last read at deferred.
	deferred time.Time
	// unconfirmed: a changed snapshot was published; it is read and
	// published once more, with a newer AfterSeq, in case the projector
	// ordered it before a concurrent executor's read-back. recheck: that
	// read is still to come, first within its node's budget; at once for
	// a snapshot published to contradict a read-back (contra) or with
	// verification off (publish.go).
	unconfirmed, recheck, contra bool
	// decided: status is what the guest's status was found to be
	// (status.go) when the inventory showed statusRow; it stands while
	// the inventory shows the same.
	decided           bool
	status, statusRow string
}

// New validates cfg and returns an observer. It does no I/O.
func New(cfg Config, px Proxmox, j Journal) (*Observer, error) {
	if px == nil {
		return nil, errors.New("observer: no Proxmox client")
	}
	if j == nil {
		return nil, errors.New("observer: no journal")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Observer{
		cfg:        cfg,
		px:         px,
		j:          j,
		log:        cfg.Logger.With().Str("cluster", cfg.Cluster).Logger(), // the caller names the role
		wake:       make(chan struct{}, 1),
		guests:     map[int]*guestState{},
		published:  map[int]*events.Observed{},
		goneUnconf: map[int]bool{},
		reachable:  true,
		nodes:      newNodeBudget(cfg.VerifyRate),
		budget:     rate.NewLimiter(rate.Limit(cfg.VerifyRate), burst(cfg)),
		metrics:    newMetrics(cfg.Registerer),
	}, nil
}

// burst is the agent reads' bucket per node: what accrues over one
// Interval, so that a pass every Interval can spend the whole rate.
func burst(cfg Config) int {
	return max(1, int(math.Ceil(cfg.VerifyRate*cfg.Interval.Seconds())))
}

// Resync asks that every guest's config be verified, through the
// verification budget: the guests go first in the verification order, so
// a large estate is re-read over several passes, not in one burst. At most
// one resync is carried out per ResyncInterval; requests in between are
// merged into the next one (logged with their count). A request that can
// be carried out now wakes Run for a pass. It never blocks.
func (o *Observer) Resync() {
	o.resyncs.Add(1)
	o.metrics.resyncAsked.Inc()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Run passes immediately, then every Interval (measured from the end of a
// pass), whenever Resync is called and soon after a desired event names a
// guest the last pass did not list (soon.go), until ctx ends; then it
// returns nil. Between passes it runs a verification round whenever every
// node's budget is whole again (verifyround.go).
// Pass errors are logged, not returned: the next pass retries.
func (o *Observer) Run(ctx context.Context) error {
	o.log.Info().Str("observer", o.cfg.Name).Dur("interval", o.cfg.Interval).
		Dur("config_refresh", o.cfg.ConfigRefresh).Float64("verify_rate", o.cfg.VerifyRate).
		Dur("resync_interval", o.cfg.ResyncInterval).Msg("observer started")
	t := o.cfg.Clock.NewTimer(o.cfg.Interval)
	defer t.Stop()
	// Verification rounds between passes, whenever the budget is whole
	// again (verifyround.go).
	var rounds <-chan time.Time
	var rt clock.Timer
	if !o.cfg.VerifyOff {
		rt = o.cfg.Clock.NewTimer(o.nodes.window)
		defer rt.Stop()
		rounds = rt.C()
	}
	soon := o.cfg.Clock.NewTicker(newGuestPoll)
	defer soon.Stop()
	for ctx.Err() == nil {
		if _, err := o.Pass(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn().Err(err).Msg("observer pass incomplete")
		}
		t.Reset(o.cfg.Interval)
		ended := o.cfg.Clock.Now()
		if rt != nil {
			rt.Reset(o.nextRound(true))
		}
	wait:
		for {
			select {
			case <-ctx.Done():
			case <-t.C():
			case <-rounds:
				n, _ := o.verifyRound(ctx)
				rt.Reset(o.nextRound(n > 0))
				continue
			case <-soon.C():
				if o.cfg.Clock.Now().Sub(ended) < earlyPassGap || !o.newGuests(ctx) {
					continue
				}
				o.log.Debug().Msg("early pass: a desired event names a guest the last pass did not list")
			case <-o.wake:
				if !o.resyncAllowed() {
					// Merged: carried out by a later pass, once allowed.
					continue
				}
			}
			break wait
		}
	}
	o.log.Info().Msg("observer stopped")
	return nil
}

func (o *Observer) now() time.Time { return o.cfg.Clock.Now().UTC() }

// VerifyPeriod is the verification period at the estate's size as of the
// last pass that reached Proxmox (0 before one did, or with verification
// off): how long drift the inventory does not show may go unseen. Safe from
// any goroutine.
func (o *Observer) VerifyPeriod() time.Duration { return time.Duration(o.period.Load()) }

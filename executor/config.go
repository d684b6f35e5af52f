package executor

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Config configures an [Executor]. Defaults and validation live in
// withDefaults and the Check functions it calls, and nowhere else.
type Config struct {
	// Cluster is the Proxmox cluster id whose actions this executor runs
	// (default events.DefaultCluster).
	Cluster string
	// Name identifies this executor in results (Result.Executor) and as the
	// publisher of its events (Meta.Publisher). Default
	// "executor@<hostname>".
	Name string
	// Consumer names the cluster's executor group: its lease group and the
	// prefix of its per-partition durable consumers <Consumer>-pNN
	// (default "executor-<cluster>").
	Consumer string
	// Partitions is the journal's partition count (default 16, the
	// stream's default); Replicas the lease bucket's replica count when
	// this executor creates it (default 1).
	Partitions, Replicas int
	// Concurrency is how many actions this executor runs at once, over all
	// its partitions; it is also each partition consumer's MaxAckPending
	// (default 64).
	Concurrency int
	// AckWait is how long an un-acknowledged action waits before it is
	// redelivered (default 8s). Handlers send InProgress every AckWait/3,
	// so a long Proxmox task keeps its action; a dead executor's actions
	// come back after AckWait, to whichever executor owns their partition
	// by then.
	AckWait time.Duration
	// LeaseTTL is how long a dead executor's partitions stay its own
	// (default 5s; see package lease). Failover takes about
	// max(LeaseTTL + LeaseTTL/5, AckWait).
	LeaseTTL time.Duration
	// DrainTimeout bounds how long Run, once its context ends, lets
	// in-flight actions finish before abandoning them un-acknowledged
	// (default 60s; negative: abandon at once). An abandoned action is
	// redelivered and resumed from the journal.
	DrainTimeout time.Duration
	// Clock is the time of event metadata and read-backs, and of every
	// wait (default clock.Real).
	Clock clock.Clock
	// Logger receives structured logs. Secrets are never logged.
	Logger zerolog.Logger
	// Policy is the planner's policy (the same flags): an action is run
	// only if planner.Plan, under it, produces it from the action's
	// desired state and observation (verify.go). Zero fields take the
	// planner's defaults.
	Policy planner.Policy
	// Auth is the planner's signature check (signed mode): an action
	// whose desired event the planner would reject is not run.
	Auth *projector.Auth
	// NodeRate is the most mutating Proxmox calls per second per node,
	// shared by the executor group's live members (default
	// DefaultNodeRate; negative: no limit).
	NodeRate float64
	// Metrics receives the executor's figures; executors of one process
	// share one ([NewMetrics] on the process's registry). Default: an
	// unregistered one.
	Metrics *Metrics
	// Poison, if set, receives the actions terminated as undecodable
	// (control.Router.Poison); they are logged either way.
	Poison func(source, subject string, seq uint64, err error)

	// unverified turns verify.go off; only this package's tests set it
	// (export_test.go).
	unverified bool
}

const (
	// DefaultPartitions is the journal stream's default partition count.
	DefaultPartitions = 16
	// DefaultConcurrency leaves room for many guests' long tasks (clones,
	// shutdowns) without letting one burst flood Proxmox's workers.
	DefaultConcurrency = 64
	// DefaultAckWait is moderate (notes/jetstream.md §1): short enough that
	// a dead executor's actions come back within the 10 s failover target,
	// long enough (heartbeats every 2.7 s) that a GC pause or a slow
	// request does not cause spurious redeliveries.
	DefaultAckWait = 8 * time.Second
	// DefaultLeaseTTL: see Config.LeaseTTL.
	DefaultLeaseTTL = 5 * time.Second
	// DefaultDrainTimeout covers a graceful shutdown task (60s default
	// timeout) without holding a restart up for long.
	DefaultDrainTimeout = 60 * time.Second
	// DefaultNodeRate keeps converge's writes to one node well below what
	// pveproxy's three workers serve, leaving room for people and other
	// tools.
	DefaultNodeRate = 10.0
	// pullBatch is the most actions buffered client-side per pull: small,
	// so that buffered actions do not age towards AckWait unseen.
	pullBatch = 16
	// pullExpiry keeps pull requests short: a request that stops making
	// progress under load is replaced within seconds rather than after the
	// 30 s default.
	pullExpiry = 5 * time.Second
)

// Validate checks c as New does (a zero field takes its default). The
// Check functions below check one setting at a time, as an operator gives
// it, so that a caller can name the setting.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// The settings an operator gives (flags), one at a time. In a Config a
// zero field means "the default"; given by an operator, zero is a value,
// and refused where it means nothing. Each error reads after the
// setting's name. withDefaults checks the fields with them (LeaseTTL
// with lease.CheckTTL).

// CheckConcurrency checks Config.Concurrency as given.
func CheckConcurrency(n int) error {
	if n < 1 {
		return fmt.Errorf("must be >= 1, got %d", n)
	}
	return nil
}

// CheckAckWait checks Config.AckWait as given: heartbeats go every
// AckWait/3, which must leave room for a round trip.
func CheckAckWait(d time.Duration) error {
	if d < minAckWait {
		return fmt.Errorf("must be at least %s, got %s", minAckWait, d)
	}
	return nil
}

// CheckNodeRate checks Config.NodeRate as given: negative is no limit; 0
// would be no call at all.
func CheckNodeRate(r float64) error {
	if r == 0 || math.IsNaN(r) || math.IsInf(r, 1) {
		return fmt.Errorf("must be > 0 calls per second, or negative for no limit, got %v", r)
	}
	return nil
}

// minAckWait leaves a heartbeat (every AckWait/3) time for its round trip.
const minAckWait = 30 * time.Millisecond

func (c Config) withDefaults() (Config, error) {
	const p = "executor.Config."
	if c.Cluster == "" {
		c.Cluster = events.DefaultCluster
	}
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return c, fmt.Errorf(p+"Cluster: %w", err)
	}
	if c.Name == "" {
		c.Name = "executor"
		if h, err := os.Hostname(); err == nil && h != "" {
			c.Name += "@" + h
		}
	}
	if c.Consumer == "" {
		c.Consumer = journal.ExecutorGroup(c.Cluster)
	}
	// The journal's own settings: its connection checked them (bus.Config).
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	for _, err := range []error{
		setting("Concurrency", &c.Concurrency, DefaultConcurrency, CheckConcurrency),
		setting("AckWait", &c.AckWait, DefaultAckWait, CheckAckWait),
		setting("LeaseTTL", &c.LeaseTTL, DefaultLeaseTTL, lease.CheckTTL), // the lease store's TTL
		setting("NodeRate", &c.NodeRate, DefaultNodeRate, CheckNodeRate),
	} {
		if err != nil {
			return c, err
		}
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	c.Clock = clock.Or(c.Clock)
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if err := c.Policy.Validate(); err != nil {
		return c, fmt.Errorf(p+"Policy: %w", err)
	}
	return c, nil
}

// setting defaults a zero field *v of Config to def, and checks one that
// is set.
func setting[T comparable](name string, v *T, def T, check func(T) error) error {
	var zero T
	if *v == zero {
		*v = def
		return nil
	}
	if err := check(*v); err != nil {
		return fmt.Errorf("executor.Config.%s %w", name, err)
	}
	return nil
}

var errNilDependency = errors.New("executor: New needs a Proxmox and a journal")

// Failed actions are logged at warn, at most failLogRate lines a second
// in bursts of failLogBurst (package lograte).
const (
	failLogRate  = 2
	failLogBurst = 10
)

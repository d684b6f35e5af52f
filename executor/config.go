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

// Config configures an [Executor]. Start from [DefaultConfig]: a field
// left zero is refused by [Config.Validate], not read as its default.
type Config struct {
	// Cluster is the Proxmox cluster id whose actions this executor runs.
	// Its executor group (journal.ExecutorGroup) names the lease group and
	// the per-partition durable consumers <group>-pNN.
	Cluster string
	// Name identifies this executor in results (Result.Executor) and as the
	// publisher of its events (Meta.Publisher).
	Name string
	// Partitions is the journal's partition count; Replicas the lease
	// bucket's replica count when this executor creates it.
	Partitions, Replicas int
	// Concurrency is how many actions this executor runs at once, over all
	// its partitions; it is also each partition consumer's MaxAckPending.
	Concurrency int
	// AckWait is how long an un-acknowledged action waits before it is
	// redelivered. Handlers send InProgress every AckWait/3, so a long
	// Proxmox task keeps its action; a dead executor's actions come back
	// after AckWait, to whichever executor owns their partition by then.
	AckWait time.Duration
	// LeaseTTL is how long a dead executor's partitions stay its own (see
	// package lease). Failover takes about max(LeaseTTL + LeaseTTL/5,
	// AckWait).
	LeaseTTL time.Duration
	// DrainTimeout bounds how long Run, once its context ends, lets
	// in-flight actions finish before abandoning them un-acknowledged (0:
	// abandon at once). An abandoned action is redelivered and resumed
	// from the journal.
	DrainTimeout time.Duration
	// Clock is the time of event metadata and read-backs, and of every
	// wait.
	Clock clock.Clock
	// Logger receives structured logs. Secrets are never logged.
	Logger zerolog.Logger
	// Policy is the planner's policy (the same flags): an action is run
	// only if planner.Plan, under it, produces it from the action's
	// desired state and observation (verify.go).
	Policy planner.Policy
	// Auth is the planner's signature check (signed mode): an action
	// whose desired event the planner would reject is not run.
	Auth *projector.Auth
	// NodeRate is the most mutating Proxmox calls per second per node,
	// shared by the executor group's live members, unless
	// NodeRateUnlimited (the default: Proxmox has no request rate limiter,
	// its workers queue what they cannot serve at once, and the client's
	// per-node call limit keeps converge's share of that queue short).
	NodeRate float64
	// NodeRateUnlimited lifts NodeRate: calls go as fast as actions come.
	NodeRateUnlimited bool
	// Metrics receives the executor's figures; executors of one process
	// share one ([NewMetrics] on the process's registry). Nil: an
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
	// DefaultConcurrency is large enough never to be what an estate waits
	// for (100 nodes × 4 node tasks, and as many config writes, in
	// flight): what protects Proxmox is the planner's per-node task slots
	// and the client's per-node call limit (pve.Config.NodeCalls), not
	// this. An action in flight costs a goroutine and its pending ack.
	DefaultConcurrency = 1024
	// DefaultAckWait is the lease's renewal margin (TTL 5 s less a renewal
	// interval): a SIGKILLed executor's unfinished actions come back as
	// soon as its partitions move, not later (converge bench --profile
	// failover: p99 of 20 kills 6.3 s against 8.0 s at 8 s; 0 duplicate
	// tasks either way). Heartbeats go every 1.3 s; a stall beyond it only
	// redelivers to the same lease holder, which ignores a redelivery of
	// an action it still runs (measured: 3 s SIGSTOPs at a 3 s ack wait,
	// no spurious handoff).
	DefaultAckWait = 4 * time.Second
	// DefaultLeaseTTL: see Config.LeaseTTL and lease.DefaultTTL.
	DefaultLeaseTTL = lease.DefaultTTL
	// DefaultDrainTimeout covers a graceful shutdown task (60s default
	// timeout) without holding a restart up for long.
	DefaultDrainTimeout = 60 * time.Second
	// minAckWait leaves a heartbeat (every AckWait/3) time for its round
	// trip.
	minAckWait = 30 * time.Millisecond
	// pullBatch is the most actions buffered client-side per pull: small,
	// so that buffered actions do not age towards AckWait unseen.
	pullBatch = 16
	// pullExpiry keeps pull requests short: a request that stops making
	// progress under load is replaced within seconds rather than after the
	// 30 s default.
	pullExpiry = 5 * time.Second
)

// DefaultConfig returns the defaults above, for the default cluster, named
// "executor@<hostname>", judging with the planner's default policy.
func DefaultConfig() Config {
	name := "executor"
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return Config{Cluster: events.DefaultCluster, Name: name, Partitions: DefaultPartitions, Replicas: 1,
		Concurrency: DefaultConcurrency, AckWait: DefaultAckWait, LeaseTTL: DefaultLeaseTTL,
		DrainTimeout: DefaultDrainTimeout, Clock: clock.Real, Policy: planner.DefaultPolicy(), NodeRateUnlimited: true}
}

// Validate refuses a Config that makes no sense, naming the field; New
// calls it.
func (c Config) Validate() error {
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return fieldErr("Cluster", "%w", err)
	}
	switch {
	case c.Name == "":
		return fieldErr("Name", "must be set")
	case c.Partitions < 1 || c.Partitions > 1024:
		return fieldErr("Partitions", "must be within 1..1024, got %d", c.Partitions)
	case c.Replicas < 1 || c.Replicas > 5:
		return fieldErr("Replicas", "must be within 1..5, got %d", c.Replicas)
	case c.Concurrency < 1:
		return fieldErr("Concurrency", "must be >= 1, got %d", c.Concurrency)
	case c.AckWait < minAckWait:
		// Heartbeats go every AckWait/3, which must leave room for a
		// round trip.
		return fieldErr("AckWait", "must be at least %s, got %s", minAckWait, c.AckWait)
	case c.LeaseTTL < lease.MinTTL: // the lease store's TTL
		return fieldErr("LeaseTTL", "must be at least %s, got %s", lease.MinTTL, c.LeaseTTL)
	case c.DrainTimeout < 0:
		return fieldErr("DrainTimeout", "must be >= 0 (0: abandon at once), got %s", c.DrainTimeout)
	case c.Clock == nil:
		return fieldErr("Clock", "must be set (clock.Real)")
	case !c.NodeRateUnlimited && !(c.NodeRate > 0 && !math.IsInf(c.NodeRate, 1)):
		// 0 would be no call at all; no limit is NodeRateUnlimited.
		return fieldErr("NodeRate", "must be > 0 calls per second (or unlimited), got %v", c.NodeRate)
	}
	return c.Policy.Validate()
}

// leaseConfig is the executor group's lease configuration for member.
func (c Config) leaseConfig(member string, log zerolog.Logger) lease.Config {
	lc := lease.DefaultConfig()
	lc.Group, lc.Member, lc.Partitions, lc.Replicas = journal.ExecutorGroup(c.Cluster), member, c.Partitions, c.Replicas
	// In-flight actions drain before their partitions are released.
	lc.TTL, lc.Renew, lc.ReleaseTimeout = c.LeaseTTL, c.LeaseTTL/lease.RenewDivisor, c.DrainTimeout+5*time.Second
	lc.Logger, lc.Clock = log, c.Clock
	return lc
}

// perNode is NodeRate as newNodeRates counts it: 0 is no limit.
func (c Config) perNode() float64 {
	if c.NodeRateUnlimited {
		return 0
	}
	return c.NodeRate
}

// fieldErr names a field of Config in an error of Validate.
func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("executor.Config."+field+": "+format, args...)
}

var errNilDependency = errors.New("executor: New needs a Proxmox and a journal")

// Failed actions are logged at warn, at most failLogRate lines a second
// in bursts of failLogBurst (package lograte).
const (
	failLogRate  = 2
	failLogBurst = 10
)

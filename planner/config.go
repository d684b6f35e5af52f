package planner

import (
	"errors"
	"fmt"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// Policy are the knobs of Plan. Start from [DefaultPolicy]: a field left
// zero is refused by [Policy.Validate], not read as its default.
// The running planner publishes the policy it plans with in its cluster
// document, so that a dry run (`converge plan`) decides as it does.
type Policy struct {
	// ObserverTimeout: with no heartbeat for this long the observations are
	// stale and every guest is blocked.
	ObserverTimeout time.Duration `json:"observer_timeout_ns"`
	// Restart is whether a running guest may be restarted to apply
	// desired values that Proxmox keeps pending until a restart (cores,
	// for example, never hotplug): "never" (the default: status pending,
	// "waits for a restart") or "allowed" (a clean reboot: shutdown with
	// ShutdownTimeout, then start). A desired event's own restart field
	// overrides it for its guest.
	Restart events.Restart `json:"restart"`
	// RestartWindow, if set, confines those restarts to a weekly window
	// in Location's time, e.g. "Sat 02:00-05:00" (ParseWindow).
	RestartWindow string `json:"restart_window,omitempty"`
	// Location is the time zone of RestartWindow: the deployment's local
	// time by default. Nil reads as time.Local too: a policy decoded from
	// a planner's cluster document carries none.
	Location *time.Location `json:"-"`
	// ShutdownTimeout bounds a graceful shutdown before it is forced.
	ShutdownTimeout time.Duration `json:"shutdown_timeout_ns"`
	// BackoffBase and BackoffMax bound retry delays after failures:
	// base × 2^(n-1), capped, with ±25 % jitter. A new desired revision
	// starts again from the base.
	BackoffBase time.Duration `json:"backoff_base_ns"`
	BackoffMax  time.Duration `json:"backoff_max_ns"`
	// MaxBurst caps the actions of one desired revision that finish
	// without failing within projector.BurstWindow: a guest that reaches it
	// is stopped with an error saying so until the window ends or the
	// desired state changes, so any remaining loop is visible and slow
	// instead of a flood of Proxmox writes.
	MaxBurst int `json:"max_burst"`
	// ObserveOnly plans and reports but never acts.
	ObserveOnly bool `json:"observe_only,omitempty"`
	// AllowDestroy opens the destroy gate for the guests converge created
	// (events.OwnerTag): a guest desired absent is shut down and deleted.
	// Any other guest is destroyed only after `converge approve VMID`
	// names it, and a protected guest never.
	AllowDestroy bool `json:"allow_destroy,omitempty"`
	// CreatePools lets converge create a desired pool that does not exist
	// (--create-pools); otherwise moving a guest into it fails, saying so.
	CreatePools bool `json:"create_pools,omitempty"`
	// SnapshotKeep, when above 0, keeps only that many of a guest's
	// protective snapshots (snapshot_before): each new one prunes the
	// oldest (--snapshot-keep).
	SnapshotKeep int `json:"snapshot_keep,omitempty"`
}

// Policy defaults, each with its reason.
const (
	// DefaultObserverTimeout is three missed passes of the observer's
	// default 10 s interval: one slow pass is not an outage.
	DefaultObserverTimeout = 30 * time.Second
	// DefaultShutdownTimeout gives guests a minute to shut down cleanly,
	// as Proxmox's own shutdown dialog does, before they are stopped hard.
	DefaultShutdownTimeout = 60 * time.Second
	// DefaultBackoffBase retries a transient failure soon, and
	// DefaultBackoffMax keeps a lasting one from costing Proxmox more than
	// a call every five minutes.
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	// DefaultMaxBurst is three times the longest plan (shutdown, config,
	// start, reboot) with room for fences and a person editing the guest
	// meanwhile; a loop reaches it in seconds.
	DefaultMaxBurst = 12
	// DefaultRestart restarts nothing: a restart is an outage of the
	// guest, which its owner must allow (desired restart, --restart).
	DefaultRestart = events.RestartNever
)

// DefaultPolicy returns the defaults above.
func DefaultPolicy() Policy {
	return Policy{
		ObserverTimeout: DefaultObserverTimeout,
		Restart:         DefaultRestart,
		ShutdownTimeout: DefaultShutdownTimeout,
		BackoffBase:     DefaultBackoffBase,
		BackoffMax:      DefaultBackoffMax,
		MaxBurst:        DefaultMaxBurst,
	}
}

// Validate refuses a Policy that makes no sense, naming the field.
func (p Policy) Validate() error {
	const f = "planner.Policy."
	if _, err := ParseWindow(p.RestartWindow); err != nil {
		return fmt.Errorf(f+"RestartWindow: %w", err)
	}
	switch {
	case p.ObserverTimeout <= 0:
		return fmt.Errorf(f+"ObserverTimeout: must be > 0, got %v", p.ObserverTimeout)
	case p.Restart != events.RestartNever && p.Restart != events.RestartAllowed:
		return fmt.Errorf(f+"Restart: must be %q or %q, got %q", events.RestartNever, events.RestartAllowed, p.Restart)
	case p.ShutdownTimeout < time.Second:
		return fmt.Errorf(f+"ShutdownTimeout: must be >= 1s, got %v", p.ShutdownTimeout)
	case p.BackoffBase <= 0:
		return fmt.Errorf(f+"BackoffBase: must be > 0, got %v", p.BackoffBase)
	case p.BackoffMax < p.BackoffBase:
		return fmt.Errorf(f+"BackoffMax: must be >= BackoffBase (%v), got %v", p.BackoffBase, p.BackoffMax)
	case p.MaxBurst < 1:
		return fmt.Errorf(f+"MaxBurst: must be >= 1, got %d", p.MaxBurst)
	case p.SnapshotKeep < 0:
		return fmt.Errorf(f+"SnapshotKeep: must be >= 0 (0: keep all), got %d", p.SnapshotKeep)
	}
	return nil
}

// Backoff is the delay before retry n (n >= 1) of a guest's revision:
// exponential, capped, with deterministic ±25 % jitter derived from the
// guest and n, so that Plan stays pure and replays agree while retries of
// many guests still spread out.
func (p Policy) Backoff(vmid, n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := p.BackoffBase
	for i := 1; i < n && d < p.BackoffMax; i++ {
		d *= 2
	}
	if d > p.BackoffMax {
		d = p.BackoffMax
	}
	// splitmix64 of (vmid, n) → [0.75, 1.25)
	x := uint64(vmid)*0x9e3779b97f4a7c15 + uint64(n)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	f := 0.75 + float64(x%1000)/2000
	return time.Duration(float64(d) * f)
}

// Config configures an [Engine]. Start from [DefaultConfig]: a field left
// zero is refused by [Config.Validate], not read as its default.
type Config struct {
	// Cluster is the Proxmox cluster whose events the engine folds.
	Cluster string
	// Auth, if set, checks desired events' signatures (signed mode,
	// docs/signing.md).
	Auth *projector.Auth `json:"-"`
	// Name identifies the planner as the publisher of its actions.
	Name string
	// Partitions is the journal's partition count, which leases are held
	// for.
	Partitions int
	Policy     Policy
	// Limits are the cluster-wide limits on actions (per node, the
	// mass-change guard).
	Limits Limits
	// FullPassInterval replans every guest this often, on top of planning
	// each guest when its events arrive.
	FullPassInterval time.Duration
	// FlushInterval is how often changed view documents are handed out.
	FlushInterval time.Duration
	// CheckpointInterval is how often the fold is handed out as a
	// checkpoint while it advances, unless CheckpointOff.
	CheckpointInterval time.Duration
	// CheckpointOff hands out no checkpoint: a restarted planner folds
	// the whole journal.
	CheckpointOff bool
	// DecodeWorkers decode a batch in parallel while the engine catches
	// up (nothing is planned then); 1 decodes as it folds.
	DecodeWorkers int
	// Owner says which partitions this planner holds; nil holds all.
	Owner Owner
	// OnDecision, if set, is called after each guest is planned
	// (benchmarks and tests; it must not block).
	OnDecision func(v *projector.View, d Decision)
}

// Engine defaults, each with its reason.
const (
	// DefaultFullPassInterval catches what no event announces (a retry
	// whose guest got no event, a view whose basis aged) within a minute.
	DefaultFullPassInterval = time.Minute
	// DefaultFlushInterval keeps `converge status` and `wait` a quarter
	// second behind the planner at most, without rewriting documents per
	// event.
	DefaultFlushInterval = 250 * time.Millisecond
	// PromptFlushInterval is how soon the document of a guest that
	// reached a state `wait` stops on (converged, error, held…) goes
	// out: a change's last step is not a quarter second behind in
	// `converge wait`, and a mass change's documents still go out in
	// batches (Engine.FlushDue).
	PromptFlushInterval = 25 * time.Millisecond
	// DefaultCheckpointInterval bounds what a restarted planner folds to
	// five minutes of journal, for one object-store write per interval.
	DefaultCheckpointInterval = 5 * time.Minute
	// DefaultPartitions is the journal stream's default partition count.
	DefaultPartitions = 16
)

// DefaultConfig returns the defaults above.
func DefaultConfig() Config {
	return Config{Cluster: events.DefaultCluster, Name: "planner", Partitions: DefaultPartitions, Policy: DefaultPolicy(),
		Limits: DefaultLimits(), FullPassInterval: DefaultFullPassInterval, FlushInterval: DefaultFlushInterval,
		CheckpointInterval: DefaultCheckpointInterval, DecodeWorkers: 1}
}

// Validate refuses a Config that makes no sense, naming the field (of its
// Policy and Limits too).
func (c Config) Validate() error {
	const f = "planner.Config."
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return fmt.Errorf(f+"Cluster: %w", err)
	}
	switch {
	case c.Name == "":
		return errors.New(f + "Name: must be set")
	case c.Partitions < 1 || c.Partitions > 1024:
		return fmt.Errorf(f+"Partitions: must be within 1..1024, got %d", c.Partitions)
	case c.FullPassInterval <= 0:
		return fmt.Errorf(f+"FullPassInterval: must be > 0, got %v", c.FullPassInterval)
	case c.FlushInterval <= 0:
		return fmt.Errorf(f+"FlushInterval: must be > 0, got %v", c.FlushInterval)
	case !c.CheckpointOff && c.CheckpointInterval <= 0:
		return fmt.Errorf(f+"CheckpointInterval: must be > 0 (or off), got %v", c.CheckpointInterval)
	case c.DecodeWorkers < 1:
		return fmt.Errorf(f+"DecodeWorkers: must be >= 1, got %d", c.DecodeWorkers)
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	return c.Policy.Validate()
}

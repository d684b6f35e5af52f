package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// Proxmox is what an executor needs from Proxmox VE. *pve.Client satisfies
// it. Every mutation sends exactly one request and returns the task to
// journal before anything waits on it (see package pve).
type Proxmox interface {
	pve.PowerController // Start, Stop, Shutdown, Reboot
	pve.ConfigWriter    // UpdateConfig
	pve.GuestReader     // GuestStatus, GuestConfig
	WaitTask(ctx context.Context, t pve.TaskRef, opts pve.WaitOptions) (pve.TaskResult, error)
}

// TaskFinder may additionally be implemented by a [Proxmox]. It closes the
// one window the journal cannot: an executor that died after Proxmox
// accepted a mutation but before the task id was journalled. For a
// redelivered action with no journalled task, the executor asks the finder
// for a task of the action's operation on the guest started since the action
// was planned, and adopts it (journals it and waits on it) instead of
// issuing the mutation again. Without a finder, the guest's state is
// re-checked instead (see the package documentation). *pve.Client is one.
type TaskFinder interface {
	// FindTask returns the newest task that operation op started for
	// ref.VMID on ref.Node (one of the types [pve.TaskTypes] lists) at or
	// after since, in whole seconds, running or finished; found is false
	// when there is none.
	FindTask(ctx context.Context, ref pve.GuestRef, op pve.Op, since time.Time) (t pve.TaskRef, found bool, err error)
}

var (
	_ Proxmox    = (*pve.Client)(nil)
	_ TaskFinder = (*pve.Client)(nil)
)

// Config configures an [Executor]. Defaults and validation live in
// withDefaults, and nowhere else.
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
	// Clock returns the time for event metadata and read-back timestamps
	// (default time.Now).
	Clock func() time.Time
	// Logger receives structured logs. Secrets are never logged.
	Logger zerolog.Logger
}

const (
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
	// pullBatch is the most actions buffered client-side per pull: small,
	// so that buffered actions do not age towards AckWait unseen.
	pullBatch = 16
)

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
		c.Consumer = "executor-" + c.Cluster
	}
	switch {
	case c.Concurrency < 0:
		return c, fmt.Errorf(p+"Concurrency must be >= 0, got %d", c.Concurrency)
	case c.Concurrency == 0:
		c.Concurrency = DefaultConcurrency
	}
	switch {
	case c.AckWait < 0:
		return c, fmt.Errorf(p+"AckWait must be >= 0, got %s", c.AckWait)
	case c.AckWait == 0:
		c.AckWait = DefaultAckWait
	case c.AckWait < 30*time.Millisecond:
		return c, fmt.Errorf(p+"AckWait must be at least 30ms, got %s", c.AckWait)
	}
	switch {
	case c.LeaseTTL < 0:
		return c, fmt.Errorf(p+"LeaseTTL must be >= 0, got %s", c.LeaseTTL)
	case c.LeaseTTL == 0:
		c.LeaseTTL = DefaultLeaseTTL
	case c.LeaseTTL < 100*time.Millisecond:
		return c, fmt.Errorf(p+"LeaseTTL must be at least 100ms, got %s", c.LeaseTTL)
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c, nil
}

// Validate reports the first problem with c, after defaults.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

var errNilDependency = errors.New("executor: New needs a Proxmox and a bus")

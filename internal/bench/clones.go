package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/planner"
)

// ClonesOptions size the clones profile (`converge bench --profile
// clones`, issue 42): Guests clones, half QEMU half containers, from two
// QEMU and two container templates, half full (spread over the
// storages) and half linked, created by converge at its shipped limits
// but --create-rate (a safety brake, raised here as a planned batch
// raises it). Start from [DefaultClonesOptions].
type ClonesOptions struct {
	Guests, Nodes int
	// Storages is how many of the simulator's storages that hold both VM
	// images and container root disks the clones use (at most what it
	// has).
	Storages int
	// APILatency is added to every API call; QEMUClone and LXCClone are
	// how long qmclone and vzclone tasks run; ConfigWrite a QEMU config
	// write's work; LockHold how long a clone holds its storage's lock,
	// when the simulator models that lock (ClonesReport.LockModelled).
	APILatency, QEMUClone, LXCClone, ConfigWrite, LockHold time.Duration
	// Limits are converge's (planner.DefaultLimits, CreateRateUnlimited
	// by default).
	Limits planner.Limits
	// Dir holds the journal; default a temp dir removed afterwards.
	Dir      string
	Progress func(phase string, done, total int)
	Logger   zerolog.Logger
}

// Clones profile defaults: the batch; tasks as long as a small
// template's clone on thin storage.
const (
	DefaultClonesGuests   = 200
	DefaultClonesStorages = 3
	DefaultCloneTask      = 2 * time.Second
	DefaultLockHold       = 500 * time.Millisecond
)

// DefaultClonesOptions returns the defaults above, on one node.
func DefaultClonesOptions() ClonesOptions {
	lim := planner.DefaultLimits()
	lim.CreateRateUnlimited = true
	return ClonesOptions{Guests: DefaultClonesGuests, Nodes: 1, Storages: DefaultClonesStorages, APILatency: 20 * time.Millisecond,
		QEMUClone: DefaultCloneTask, LXCClone: DefaultCloneTask, ConfigWrite: DefaultConfigTask, LockHold: DefaultLockHold, Limits: lim}
}

// Validate refuses ClonesOptions that make no sense, naming the field.
func (o ClonesOptions) Validate() error {
	const f = "bench.ClonesOptions."
	switch {
	case o.Guests < 1 || o.Guests > 100000:
		return fmt.Errorf(f+"Guests: must be within 1..100000, got %d", o.Guests)
	case o.Nodes < 1 || o.Nodes > 1000:
		return fmt.Errorf(f+"Nodes: must be within 1..1000, got %d", o.Nodes)
	case o.Storages < 1:
		return fmt.Errorf(f+"Storages: must be >= 1, got %d", o.Storages)
	case o.APILatency < 0 || o.QEMUClone < 0 || o.LXCClone < 0 || o.ConfigWrite < 0 || o.LockHold < 0:
		return fmt.Errorf(f + "durations must be >= 0 (0: none)")
	}
	return o.Limits.Validate()
}

// ClonesReport is the clones profile's report (`-o json`).
type ClonesReport struct {
	Profile string `json:"profile"` // "clones"
	Guests  int    `json:"guests"`
	Nodes   int    `json:"nodes"`
	// Storages the clones went to; QEMU/LXC and Full/Linked count them.
	Storages     []string `json:"storages"`
	QEMU         int      `json:"qemu"`
	LXC          int      `json:"lxc"`
	Full         int      `json:"full"`
	Linked       int      `json:"linked"`
	APILatencyMs float64  `json:"api_latency_ms"`
	QEMUCloneS   float64  `json:"qemu_clone_s"`
	LXCCloneS    float64  `json:"lxc_clone_s"`
	ConfigWriteS float64  `json:"config_write_s"`
	LockHoldS    float64  `json:"lock_hold_s"`
	// LockModelled: the simulator held the storage lock LockHoldS per
	// clone and failed waiters after 10 s, as Proxmox does; false: it
	// has no such lock, and LockTimeouts can only be 0.
	LockModelled bool `json:"lock_modelled"`
	// converge's limits in force: CloneConcurrency per storage (negative:
	// none), NodeConcurrency per node, CreateRate a minute (negative:
	// none, raised from its default as a safety brake is for a planned
	// batch: the non-default setting this target needs).
	CloneConcurrency int `json:"clone_concurrency"`
	NodeConcurrency  int `json:"node_concurrency"`
	CreateRate       int `json:"create_rate"`
	// MakespanS: from the first desired event's publish until every guest
	// converged. IdealMakespanS: CloneIdeal under Proxmox's locks, set
	// by IdealBound; MakespanRatio = makespan ÷ ideal.
	MakespanS      float64 `json:"makespan_s"`
	IdealMakespanS float64 `json:"ideal_makespan_s"`
	IdealBound     string  `json:"ideal_bound"`
	MakespanRatio  float64 `json:"makespan_ratio"`
	// LockTimeouts are clone tasks that failed waiting for a storage
	// lock ("got timeout", "got lock request timeout"); FailedTasks all
	// failed tasks; CloneTasks the clone tasks run (retries included).
	LockTimeouts int   `json:"lock_timeouts"`
	FailedTasks  int   `json:"failed_tasks"`
	CloneTasks   int   `json:"clone_tasks"`
	Tasks        int   `json:"tasks"`
	Actions      int   `json:"actions"`
	PveCalls     int64 `json:"pve_calls"`
	// MaxClonesPerStorage is the most clone tasks that ran at once
	// taking one storage's lock.
	MaxClonesPerStorage int `json:"max_clones_per_storage"`
	// CTTemplateGapMs: from the end of a container template's clone task
	// to the start of its next (the template's critical path: result,
	// planning, the next action), in ms.
	CTTemplateGapMs Latency `json:"ct_template_gap_ms"`
	// CTChain accounts for the makespan along the container template
	// whose clones ended last.
	CTChain  *CTChain `json:"ct_chain,omitempty"`
	ElapsedS float64  `json:"elapsed_s"`
}

// RunClones runs the clones profile.
func RunClones(ctx context.Context, o ClonesOptions) (*ClonesReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = noProgress
	}
	start := time.Now()
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "converge-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	unl := func(n int, off bool) int {
		if off {
			return -1
		}
		return n
	}
	lim := o.Limits
	rep := &ClonesReport{Profile: "clones", Guests: o.Guests, Nodes: o.Nodes, APILatencyMs: ms(o.APILatency),
		QEMUCloneS: o.QEMUClone.Seconds(), LXCCloneS: o.LXCClone.Seconds(), ConfigWriteS: o.ConfigWrite.Seconds(), LockHoldS: o.LockHold.Seconds(),
		CloneConcurrency: unl(lim.CloneConcurrency, lim.CloneConcurrencyUnlimited), NodeConcurrency: unl(lim.NodeConcurrency, lim.NodeConcurrencyUnlimited),
		CreateRate: unl(lim.CreateRate, lim.CreateRateUnlimited)}
	if err := runClones(ctx, o, dir, rep); err != nil {
		return nil, err
	}
	if rep.IdealMakespanS > 0 {
		rep.MakespanRatio = rep.MakespanS / rep.IdealMakespanS
	}
	rep.ElapsedS = time.Since(start).Seconds()
	return rep, nil
}

package bench

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/bus"
)

// Latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Report holds the fields docs/benchmarks.md lists: the throughput run's figures
// (one change per guest by default, so that every change is an action),
// the per-action costs measured in it, and the coalesced burst apart.
type Report struct {
	// Limits is "off" (the default: converge's per-node limits lifted, so
	// that the pipeline, not a simulated node, is measured) or "shipped"
	// (Options.ShippedLimits: converge as it ships).
	Limits                string  `json:"limits"`
	Guests                int     `json:"guests"`
	Changes               int     `json:"changes"`
	PipelineChangesPerS   float64 `json:"pipeline_changes_per_s"`
	RawPublishMsgsPerS    float64 `json:"raw_publish_msgs_per_s"`
	RawConsumeMsgsPerS    float64 `json:"raw_consume_msgs_per_s"`
	StreamWritesPerChange float64 `json:"stream_writes_per_change"`
	Efficiency            float64 `json:"efficiency"`
	LatencyMs             Latency `json:"latency_ms"`
	// LatencyMsByGuests is the latency run at Guests and at each larger
	// estate of Options.LatencyAt, keyed by the guest count.
	LatencyMsByGuests   map[string]Latency `json:"latency_ms_by_guests"`
	ReplayEventsPerS    float64            `json:"replay_events_per_s"`
	RawReplayMsgsPerS   float64            `json:"raw_replay_msgs_per_s"`
	PveCallsPerIdlePass float64            `json:"pve_calls_per_idle_pass"`

	// Every change an action (the throughput run).
	ActionsPerS             float64 `json:"actions_per_s"`
	ActionEfficiency        float64 `json:"action_efficiency"` // actions_per_s × 3 ÷ raw_publish_msgs_per_s
	CPUMsPerAction          float64 `json:"cpu_ms_per_action"`
	PveCallsPerAction       float64 `json:"pve_calls_per_action"`
	BytesAllocatedPerAction float64 `json:"bytes_allocated_per_action"`

	// The coalesced burst: BurstChanges (default ten per guest) published
	// at once, most coalesced while their guest's action runs (desired
	// state is level-triggered): it measures coalescing as much as the
	// pipeline, so it is labelled apart. Zero when skipped.
	BurstChanges         int     `json:"burst_changes"`
	BurstChangesPerS     float64 `json:"burst_changes_per_s"`
	BurstWritesPerChange float64 `json:"burst_stream_writes_per_change"`
	BurstEfficiency      float64 `json:"burst_efficiency"`
}

// Details are figures the text report adds to the Report.
type Details struct {
	RawMessages     int
	RawMessageBytes int
	PipelineSeconds float64
	Actions         int
	BurstSeconds    float64
	BurstActions    int
	StreamWrites    uint64
	// Messages the embedded server received from its clients and sent to
	// them per action of the throughput run: what an action costs the bus.
	MsgsInPerAction, MsgsOutPerAction float64
	LatencyChanges                    int
	// The latency run split where the action was published: desired
	// sent → action (planner), action → mutation (executor, Proxmox).
	LatencyPlanner, LatencyExecutor Latency
	// What one change of the latency run cost, from its first publish to
	// the convergence of its last change: the process's CPU time (every
	// role, the embedded server and the simulator), journal writes and
	// Proxmox calls. LatencySimCPUPerChange is the simulator's, when it
	// runs in its own process.
	LatencyCPUPerChange    time.Duration
	LatencySimCPUPerChange time.Duration
	LatencyWritesPerChange float64
	LatencyCallsPerChange  float64
	// Heap allocated per change during the latency run (every role, the
	// embedded server and an in-process simulator), and the garbage
	// collections that ran inside it: each one can stall a 2-core host for
	// a few hundred milliseconds, which is what p99 shows.
	LatencyAllocPerChange int64
	LatencyGCs            int
	ReplayEvents          int
	Elapsed               time.Duration
}

// Run performs a whole benchmark.
func Run(ctx context.Context, o Options) (*Report, *Details, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	if o.Progress == nil {
		o.Progress = noProgress
	}
	start := time.Now()
	// A simulator process that dies ends the run with its reason.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "converge-bench-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	r := &run{o: o, log: o.Logger, fail: cancel, rep: &Report{Limits: limitsLabel(o.ShippedLimits), Guests: o.Guests, Changes: o.Changes}, det: &Details{},
		converged: make([]uint64, o.maxGuests()), target: make([]uint64, o.maxGuests()), mutated: make([]int64, o.maxGuests())}
	if err := r.setup(ctx, dir); err != nil {
		return nil, nil, err
	}
	defer r.teardown()
	for _, phase := range []func(context.Context) error{r.raw, r.warm, r.pipeline, r.latency, r.idle, r.replay} {
		if err := phase(ctx); err != nil {
			return nil, nil, err
		}
	}
	r.rep.Efficiency = r.rep.PipelineChangesPerS * 3 / r.rep.RawPublishMsgsPerS
	r.rep.ActionEfficiency = r.rep.ActionsPerS * 3 / r.rep.RawPublishMsgsPerS
	r.rep.BurstEfficiency = r.rep.BurstChangesPerS * 3 / r.rep.RawPublishMsgsPerS
	r.det.Elapsed = time.Since(start)
	return r.rep, r.det, nil
}

type run struct {
	o   Options
	log zerolog.Logger
	rep *Report
	det *Details

	fail context.CancelCauseFunc
	app  *app.App // the roles, as `converge up` runs them
	b    *bus.Bus // the process's main connection
	sim  simulator

	// converged[i] is the newest desired revision guest 100+i converged at;
	// target[i] the revision it must reach. Written by the planner's
	// goroutine, read by the bench: atomics.
	converged []uint64
	target    []uint64
	// advancedAt is when a guest last converged at a newer revision (unix
	// ns): once every guest is at its target nothing advances, so it is
	// the moment the pipeline finished, whenever the bench polls.
	advancedAt atomic.Int64
	observed   atomic.Int64
	seen       sync.Map
	// mutated[i] is when the simulator received a mutation of 100+i during
	// the latency run (unix ns), 0 before.
	mutated    []int64
	latencyRun atomic.Bool
}

// limitsLabel is Report.Limits.
func limitsLabel(shipped bool) string {
	if shipped {
		return "shipped"
	}
	return "off"
}

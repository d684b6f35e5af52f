package bench

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/pvesim"
)

// Options size a run. Start from [DefaultOptions] (the targets):
// a field left zero is refused by [Options.Validate], not read as its
// default.
type Options struct {
	Guests  int
	Changes int // one per guest by default, each an action
	// BurstChanges are published at once after the throughput run, ten per
	// guest by default, most of them coalesced: a second, labelled figure.
	// 0 skips it.
	BurstChanges int
	Rate         int // changes/s of the latency run
	LatencyN     int // changes in the latency run: min(5 s × Rate, Guests) by default
	// LatencyAt are larger estates to run the latency run at again, in
	// increasing order: the simulator (in-process) grows to each.
	LatencyAt  []int
	Partitions int
	Executors  int
	// Concurrency of each executor (with ShippedLimits, the executor's
	// default instead).
	Concurrency int
	// ShippedLimits runs converge with its shipped per-node limits (node
	// task slots, calls in flight per node, executor concurrency) instead
	// of lifting them.
	ShippedLimits bool
	// TaskLatency is how long each simulated Proxmox task runs (0 by
	// default): with it, executors rather than the bus bound throughput,
	// which is how scale-out is measured.
	TaskLatency time.Duration
	// ResourcesLag is the simulator's pvestatd cycle
	// (pvesim.DefaultPvestatdCycle by default, as on Proxmox; 0: none).
	ResourcesLag time.Duration
	// SimCommand, if set, runs the simulator in a process of its own: the
	// command of `converge sim` (e.g. the converge binary and "sim"), to
	// which the bench adds its flags. Otherwise it runs in the bench's
	// process, where its guests and its garbage add to converge's.
	SimCommand []string
	// Dir holds the journal; default a temp dir removed afterwards.
	Dir string
	// PhaseProfiles, if set, is a directory that receives a CPU profile,
	// allocation profiles and an execution trace of the throughput run, the
	// burst and each latency run alone, and each latency run's changes one per line
	// (phase.go, latencyTrace).
	PhaseProfiles string
	// Progress, if set, is told how each phase advances.
	Progress func(phase string, done, total int)
	Logger   zerolog.Logger
}

// Defaults, each with its reason.
const (
	// DefaultGuests: an estate of ten thousand guests. The throughput run
	// sends one change to each (every change an action); the burst
	// DefaultBurstFactor per guest, coalesced while actions run.
	DefaultGuests      = 10000
	DefaultBurstFactor = 10
	// DefaultRate is the latency run's offered load: far below the
	// pipeline's throughput, so that latency is not queueing.
	DefaultRate = 1000
	// DefaultConcurrency keeps the executor from being the limit with an
	// in-process simulator whose tasks take no time.
	DefaultConcurrency = 256
)

// DefaultOptions returns the defaults above, sized for DefaultGuests.
func DefaultOptions() Options {
	o := Options{Guests: DefaultGuests, Rate: DefaultRate, Partitions: bus.DefaultPartitions, Executors: 1,
		Concurrency: DefaultConcurrency, ResourcesLag: pvesim.DefaultPvestatdCycle}
	o.FollowGuests()
	return o
}

// FollowGuests sizes what follows the estate and the rate by default: one
// change per guest, a burst of DefaultBurstFactor per guest, and a latency
// run of min(5 s × Rate, Guests) changes.
func (o *Options) FollowGuests() {
	o.Changes, o.BurstChanges, o.LatencyN = o.Guests, DefaultBurstFactor*o.Guests, min(5*o.Rate, o.Guests)
}

// Validate refuses Options that make no sense, naming the field; Run
// calls it.
func (o Options) Validate() error {
	const f = "bench.Options."
	switch {
	case o.Guests < 1 || o.Guests > 1000000:
		return fmt.Errorf(f+"Guests: must be within 1..1000000, got %d", o.Guests)
	case o.Changes < 1:
		return fmt.Errorf(f+"Changes: must be >= 1, got %d", o.Changes)
	case o.BurstChanges < 0:
		return fmt.Errorf(f+"BurstChanges: must be >= 0 (0: no burst), got %d", o.BurstChanges)
	case o.Rate < 1:
		return fmt.Errorf(f+"Rate: must be >= 1, got %d", o.Rate)
	case o.LatencyN < 1 || o.LatencyN > o.Guests:
		return fmt.Errorf(f+"LatencyN: must be within 1..guests (%d), got %d", o.Guests, o.LatencyN)
	case o.Partitions < 1 || o.Partitions > 1024:
		return fmt.Errorf(f+"Partitions: must be within 1..1024, got %d", o.Partitions)
	case o.Executors < 1 || o.Executors > 64:
		return fmt.Errorf(f+"Executors: must be within 1..64, got %d", o.Executors)
	case o.Concurrency < 1:
		return fmt.Errorf(f+"Concurrency: must be >= 1, got %d", o.Concurrency)
	case o.TaskLatency < 0:
		return fmt.Errorf(f+"TaskLatency: must be >= 0, got %s", o.TaskLatency)
	case o.ResourcesLag < 0:
		return fmt.Errorf(f+"ResourcesLag: must be >= 0 (0: none), got %s", o.ResourcesLag)
	}
	for i, n := range o.LatencyAt {
		if n <= o.Guests || n > 1000000 || (i > 0 && n <= o.LatencyAt[i-1]) {
			return fmt.Errorf(f+"LatencyAt: must be increasing guest counts above guests (%d) and at most 1000000, got %v", o.Guests, o.LatencyAt)
		}
	}
	if len(o.LatencyAt) > 0 && len(o.SimCommand) > 0 {
		return fmt.Errorf(f + "LatencyAt: grows the simulator in-process: not with the simulator in its own process")
	}
	return nil
}

// noProgress is Progress when none is set.
func noProgress(string, int, int) {}

// maxGuests is the largest estate of the run.
func (o *Options) maxGuests() int {
	n := o.Guests
	for _, m := range o.LatencyAt {
		n = max(n, m)
	}
	return n
}

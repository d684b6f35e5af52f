package bench

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/pvesim"
)

// Options size a run. Zero fields take the defaults of the targets.
type Options struct {
	Guests  int // default 10000
	Changes int // default Guests: one change per guest, each an action
	// BurstChanges are published at once after the throughput run, ten per
	// guest by default, most of them coalesced: a second, labelled figure.
	// Negative skips it.
	BurstChanges int
	Rate         int // changes/s of the latency run, default 1000
	LatencyN     int // changes in the latency run, default min(5 s × Rate, Guests)
	// LatencyAt are larger estates to run the latency run at again, in
	// increasing order: the simulator (in-process) grows to each.
	LatencyAt  []int
	Partitions int // default 16
	Executors  int // default 1
	// Concurrency of each executor (default 256).
	Concurrency int
	// TaskLatency is how long each simulated Proxmox task runs (default 0):
	// with it, executors rather than the bus bound throughput, which is
	// how scale-out is measured.
	TaskLatency time.Duration
	// ResourcesLag is the simulator's pvestatd cycle (default
	// pvesim.DefaultPvestatdCycle, as on Proxmox; negative: none).
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
	Progress      func(phase string, done, total int)
	Logger        zerolog.Logger
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

func (o *Options) defaults() error {
	if o.Guests == 0 {
		o.Guests = DefaultGuests
	}
	if o.Changes == 0 {
		o.Changes = o.Guests
	}
	if o.BurstChanges == 0 {
		o.BurstChanges = DefaultBurstFactor * o.Guests
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.LatencyN == 0 {
		o.LatencyN = min(5*o.Rate, o.Guests)
	}
	if o.Partitions == 0 {
		o.Partitions = bus.DefaultPartitions
	}
	if o.Executors == 0 {
		o.Executors = 1
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	o.ResourcesLag = resourcesLag(o.ResourcesLag)
	switch {
	case o.Guests < 1 || o.Guests > 1000000:
		return fmt.Errorf("bench: guests must be within 1..1000000, got %d", o.Guests)
	case o.Changes < 1:
		return fmt.Errorf("bench: changes must be >= 1, got %d", o.Changes)
	case o.Rate < 1:
		return fmt.Errorf("bench: rate must be >= 1, got %d", o.Rate)
	case o.LatencyN < 1 || o.LatencyN > o.Guests:
		return fmt.Errorf("bench: latency changes must be within 1..guests (%d), got %d", o.Guests, o.LatencyN)
	case o.Executors < 1 || o.Executors > 64:
		return fmt.Errorf("bench: executors must be within 1..64, got %d", o.Executors)
	}
	for i, n := range o.LatencyAt {
		if n <= o.Guests || n > 1000000 || (i > 0 && n <= o.LatencyAt[i-1]) {
			return fmt.Errorf("bench: latency-at must be increasing guest counts above guests (%d) and at most 1000000, got %v", o.Guests, o.LatencyAt)
		}
	}
	if len(o.LatencyAt) > 0 && len(o.SimCommand) > 0 {
		return fmt.Errorf("bench: latency-at grows the simulator in-process: not with the simulator in its own process")
	}
	if o.Progress == nil {
		o.Progress = func(string, int, int) {}
	}
	return nil
}

// maxGuests is the largest estate of the run.
func (o *Options) maxGuests() int {
	n := o.Guests
	for _, m := range o.LatencyAt {
		n = max(n, m)
	}
	return n
}

// resourcesLag is a bench's pvestatd cycle: Proxmox's by default, none
// when negative.
func resourcesLag(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return pvesim.DefaultPvestatdCycle
	case d < 0:
		return 0
	}
	return d
}

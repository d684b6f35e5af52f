package bench

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pvesim"
)

// EstateOptions size the estate profile (`converge bench --profile
// estate`, issue 42): the Proxmox profile's change at estate scale, with
// the simulator in a process of its own. Start from
// [DefaultEstateOptions].
type EstateOptions struct {
	Guests int // spread evenly over the nodes
	Nodes  int
	// ConvergeLimits: converge's shipped defaults unless lifted or
	// overridden.
	ConvergeLimits
	// APILatency, PowerTask and ConfigTask are as in ProxmoxOptions.
	APILatency, PowerTask, ConfigTask time.Duration
	// VerifyWait bounds the drift-detection measurement after the change
	// (0: not measured).
	VerifyWait time.Duration
	// ResourcesLag is the simulator's pvestatd cycle.
	ResourcesLag time.Duration
	// SimCommand runs the simulator in a process of its own: the command
	// of `converge sim` (the converge binary and "sim"), to which the
	// bench adds its flags. Empty: in the bench's process (tests only: its
	// CPU and memory then count as converge's).
	SimCommand []string
	// Dir holds the journal; default a temp dir removed afterwards.
	Dir string
	// Progress, if set, is told how each phase advances.
	Progress func(phase string, done, total int)
	Logger   zerolog.Logger
}

// Estate profile defaults: the estate.
const (
	DefaultEstateGuests = 10000
	DefaultEstateNodes  = 100
	// DefaultVerifyWait is twice the target's 60 s and more: how long
	// today's cluster-wide verification budget takes at 10,000 guests
	// (observer.DefaultVerifyRate, 20 a second: about 8.5 minutes) is
	// reported as "not within" rather than waited for.
	DefaultVerifyWait = 3 * time.Minute
)

// DefaultEstateOptions returns the defaults above, with the Proxmox
// profile's latencies.
func DefaultEstateOptions() EstateOptions {
	return EstateOptions{Guests: DefaultEstateGuests, Nodes: DefaultEstateNodes, APILatency: DefaultAPILatency,
		PowerTask: DefaultPowerTask, ConfigTask: DefaultConfigTask, VerifyWait: DefaultVerifyWait,
		ResourcesLag: pvesim.DefaultPvestatdCycle}
}

// Validate refuses EstateOptions that make no sense, naming the field.
func (o EstateOptions) Validate() error {
	return checkFleet("bench.EstateOptions.", o.Guests, o.Nodes, o.ConvergeLimits, namedDuration{"APILatency", o.APILatency},
		namedDuration{"PowerTask", o.PowerTask}, namedDuration{"ConfigTask", o.ConfigTask}, namedDuration{"VerifyWait", o.VerifyWait},
		namedDuration{"ResourcesLag", o.ResourcesLag})
}

// namedDuration is an option's name and value, for checkFleet.
type namedDuration struct {
	name string
	v    time.Duration
}

// checkFleet refuses, naming the field (f is the options' type), what the
// Proxmox-shaped profiles share: the guests and nodes out of range, bad
// limit overrides, and a negative duration.
func checkFleet(f string, guests, nodes int, l ConvergeLimits, ds ...namedDuration) error {
	switch {
	case guests < 1 || guests > 100000:
		return fmt.Errorf(f+"Guests: must be within 1..100000, got %d", guests)
	case nodes < 1 || nodes > 1000:
		return fmt.Errorf(f+"Nodes: must be within 1..1000, got %d", nodes)
	}
	if err := l.validate(f); err != nil {
		return err
	}
	for _, d := range ds {
		if d.v < 0 {
			return fmt.Errorf(f+"%s: must be >= 0 (0: none), got %s", d.name, d.v)
		}
	}
	return nil
}

// EstateReport is the estate profile's report (`-o json`).
type EstateReport struct {
	Profile string `json:"profile"` // "estate"
	// Limits, LimitsLifted, NodeConcurrency and NodeRate: as in
	// ProxmoxReport.
	Limits          string   `json:"limits"`
	LimitsLifted    []string `json:"limits_lifted,omitempty"`
	Guests          int      `json:"guests"`
	Nodes           int      `json:"nodes"`
	NodeConcurrency int      `json:"node_concurrency"`
	NodeRate        float64  `json:"node_rate"`
	APILatencyMs    float64  `json:"api_latency_ms"`
	PowerTaskS      float64  `json:"power_task_s"`
	ConfigTaskS     float64  `json:"config_task_s"`
	// SimProcess: the simulator ran in a process of its own.
	SimProcess bool `json:"sim_process"`
	// MakespanS, IdealMakespanS, IdealUnboundedMakespanS, MakespanRatio:
	// as in ProxmoxReport.
	MakespanS               float64 `json:"makespan_s"`
	IdealMakespanS          float64 `json:"ideal_makespan_s"`
	IdealUnboundedMakespanS float64 `json:"ideal_unbounded_makespan_s"`
	MakespanRatio           float64 `json:"makespan_ratio"`
	// Actions converge journalled, Tasks Proxmox ran and PveCalls the API
	// calls it received in the makespan (the observer's included);
	// PveCallsPerGuest = PveCalls ÷ guests.
	Actions          int     `json:"actions"`
	Tasks            int     `json:"tasks"`
	PveCalls         int64   `json:"pve_calls"`
	PveCallsPerGuest float64 `json:"pve_calls_per_guest"`
	// ConvergeCPUS is the CPU time (user + system, getrusage RUSAGE_SELF)
	// of the bench's process, which runs converge (the simulator not, when
	// in its own process), from the first publish until convergence was
	// seen; ConvergeCoresAvg that over the same wall time. SimCPUS is the
	// simulator process's in the same window (0 in-process).
	ConvergeCPUS     float64 `json:"converge_cpu_s"`
	ConvergeCoresAvg float64 `json:"converge_cores_avg"`
	SimCPUS          float64 `json:"sim_cpu_s"`
	// ConvergePeakRSSMB is the process's peak resident set (VmHWM) in MiB
	// at the end of the run; ConvergePeakRSSSince says from when: "run"
	// (reset at the run's start through /proc/self/clear_refs) or
	// "process" (the reset failed).
	ConvergePeakRSSMB    float64 `json:"converge_peak_rss_mb"`
	ConvergePeakRSSSince string  `json:"converge_peak_rss_since"`
	// Drift detection after the change: from convergence, VerifyAllS is
	// how long until converge had read every guest's config and pending
	// values (GET …/pending) again, -1 if not within VerifyWaitS (then
	// VerifyGuests says how many it had); VerifyReads the config reads it
	// sent in that time and VerifyMaxReadsPerNodeS the most any one node
	// was sent within one second (sliding 1 s windows). All 0 when
	// VerifyWaitS is 0 (not measured).
	VerifyWaitS            float64 `json:"verify_wait_s"`
	VerifyAllS             float64 `json:"verify_all_s"`
	VerifyGuests           int     `json:"verify_guests"`
	VerifyReads            int     `json:"verify_reads"`
	VerifyMaxReadsPerNodeS int     `json:"verify_max_reads_per_node_s"`
	// Waves: where the nodes' power-task slots stood empty (EstateWaves).
	Waves EstateWaves `json:"waves"`
}

// EstateDetails are the text report's extras.
type EstateDetails struct {
	Setup, Observe, Elapsed time.Duration
}

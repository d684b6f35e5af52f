package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pvesim"
)

// ProxmoxOptions size a Proxmox-shaped run (`converge bench --profile
// proxmox`). Start from [DefaultProxmoxOptions] (the issue's profile): a
// field left zero is refused by [ProxmoxOptions.Validate], unless 0 says
// "none" there.
type ProxmoxOptions struct {
	Guests int // spread evenly over the nodes
	Nodes  int
	// ConvergeLimits: converge runs with its shipped defaults unless
	// LimitsOff or an override says otherwise. The ideal schedule does not
	// depend on them: it is Proxmox's (IdealMakespan).
	ConvergeLimits
	// APILatency is added to every Proxmox API call. 0, here and for the
	// other durations: none.
	APILatency time.Duration
	// PowerTask is how long power tasks run (qmstart, qmstop, qmshutdown,
	// qmreboot); ConfigTask how long qmconfig tasks run, and a synchronous
	// QEMU config write.
	PowerTask, ConfigTask time.Duration
	// BaselineParallelism and BaselinePoll are the Terraform-like
	// baseline's: terraform apply's -parallelism and the providers' task
	// polling interval.
	BaselineParallelism int
	BaselinePoll        time.Duration
	// ResourcesLag is the simulator's pvestatd cycle
	// (pvesim.DefaultPvestatdCycle by default; 0: none).
	ResourcesLag time.Duration
	// Dir holds the journal; default a temp dir removed afterwards.
	Dir string
	// Progress, if set, is told how each phase advances.
	Progress func(phase string, done, total int)
	Logger   zerolog.Logger
}

// Proxmox profile defaults (issue 23): a mid-sized cluster, calls and
// tasks as long as a real Proxmox's.
const (
	DefaultProxmoxGuests    = 1000
	DefaultProxmoxNodes     = 10
	DefaultAPILatency       = 15 * time.Millisecond
	DefaultPowerTask        = time.Second
	DefaultConfigTask       = 200 * time.Millisecond
	DefaultBaselineParallel = 10          // terraform apply's default -parallelism
	DefaultBaselinePoll     = time.Second // bpg's and Telmate's task polling
)

// DefaultProxmoxOptions returns the defaults above.
func DefaultProxmoxOptions() ProxmoxOptions {
	return ProxmoxOptions{Guests: DefaultProxmoxGuests, Nodes: DefaultProxmoxNodes, APILatency: DefaultAPILatency, PowerTask: DefaultPowerTask, ConfigTask: DefaultConfigTask,
		BaselineParallelism: DefaultBaselineParallel, BaselinePoll: DefaultBaselinePoll, ResourcesLag: pvesim.DefaultPvestatdCycle}
}

// Validate refuses ProxmoxOptions that make no sense, naming the field;
// RunProxmox calls it.
func (o ProxmoxOptions) Validate() error {
	const f = "bench.ProxmoxOptions."
	if err := checkFleet(f, o.Guests, o.Nodes, o.ConvergeLimits, namedDuration{"APILatency", o.APILatency},
		namedDuration{"PowerTask", o.PowerTask}, namedDuration{"ConfigTask", o.ConfigTask}, namedDuration{"BaselinePoll", o.BaselinePoll},
		namedDuration{"ResourcesLag", o.ResourcesLag}); err != nil {
		return err
	}
	if o.BaselineParallelism < 1 {
		return fmt.Errorf(f+"BaselineParallelism: must be >= 1, got %d", o.BaselineParallelism)
	}
	return nil
}

// ProxmoxReport is the Proxmox profile's report (`-o json`).
type ProxmoxReport struct {
	Profile string `json:"profile"` // "proxmox"
	// Limits is "shipped" (converge's defaults, but for the overrides
	// node_concurrency and node_rate show) or "off" (ConvergeLimits.LimitsOff);
	// LimitsLifted names the fields that "off" set.
	Limits       string   `json:"limits"`
	LimitsLifted []string `json:"limits_lifted,omitempty"`
	Guests       int      `json:"guests"`
	Nodes        int      `json:"nodes"`
	// NodeConcurrency and NodeRate are what converge ran with (negative:
	// none).
	NodeConcurrency int     `json:"node_concurrency"`
	NodeRate        float64 `json:"node_rate"`
	APILatencyMs    float64 `json:"api_latency_ms"`
	PowerTaskS      float64 `json:"power_task_s"`
	ConfigTaskS     float64 `json:"config_task_s"`
	// MakespanS: from the first desired event's publish until every guest
	// converged (the planner saw it running with its new config).
	MakespanS float64 `json:"makespan_s"`
	// IdealMakespanS: IdealMakespan under Proxmox's limits (ProxmoxIdeal:
	// 3 pvedaemon and 3 pveproxy workers and at most 4 power tasks per
	// node); MakespanRatio = makespan ÷ ideal. IdealUnboundedMakespanS is
	// the same without the power-task limit (the workers only): no client
	// can beat it.
	IdealMakespanS          float64 `json:"ideal_makespan_s"`
	IdealUnboundedMakespanS float64 `json:"ideal_unbounded_makespan_s"`
	MakespanRatio           float64 `json:"makespan_ratio"`
	// Actions converge journalled; Tasks Proxmox ran and PveCalls the API
	// calls it received during converge's run (the observer's included).
	Actions  int   `json:"actions"`
	Tasks    int   `json:"tasks"`
	PveCalls int64 `json:"pve_calls"`
	// The same work by a Terraform-like client (baseline.go):
	// BaselineParallelism guests at a time, tasks polled every
	// BaselinePollS; BaselineSpeedup = baseline ÷ makespan.
	BaselineMakespanS   float64 `json:"baseline_makespan_s"`
	BaselineSpeedup     float64 `json:"baseline_speedup"`
	BaselineParallelism int     `json:"baseline_parallelism"`
	BaselinePollS       float64 `json:"baseline_poll_s"`
	BaselineTasks       int     `json:"baseline_tasks"`
	BaselinePveCalls    int64   `json:"baseline_pve_calls"`
}

// ProxmoxDetails say where converge's time went (the text report).
type ProxmoxDetails struct {
	// Handoff: from a guest's config task's end to its start task's start
	// (the write's answer, read-back, result, planning, the next action,
	// its pre-check and pacing). Tail: from a guest's start task's end to
	// its convergence (status polls, read-back, result, planning). Head:
	// from the first publish to a guest's config task's start.
	Handoff, Tail, Head Latency
	// SlotUse is the share of the nodes' slots (converge's node
	// concurrency, PvePowerTasks without one, ×
	// makespan) that the ideal's per-action time filled.
	SlotUse float64
	// MaxInFlight is the most node tasks (not config writes) that ran at
	// once on one node.
	MaxInFlight int
	// ToConfig and ToStart: from a task's end to the start of the task
	// that takes its slot on the node, a config write or a start (see
	// turnaround). ConfigWriteRate: config tasks started a second per node
	// while any were (the node rate caps it).
	ToConfig, ToStart Latency
	ConfigWriteRate   float64
	// TaskTypes counts converge's tasks by type. SyncConfigWrites are its
	// config writes Proxmox did within the call (a PUT: no task), whose
	// work (ConfigTask) the breakdown counts as a qmconfig task's.
	TaskTypes        map[string]int
	SyncConfigWrites int
	Elapsed          time.Duration
}

// RunProxmox runs the Proxmox profile: converge against the simulator,
// then the baseline against a fresh simulator in the same state.
func RunProxmox(ctx context.Context, o ProxmoxOptions) (*ProxmoxReport, *ProxmoxDetails, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	if o.Progress == nil {
		o.Progress = noProgress
	}
	start := time.Now()
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "converge-bench-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	conv := o.convergeConfig()
	rep := &ProxmoxReport{Profile: "proxmox", Limits: o.name(), LimitsLifted: conv.lifted, Guests: o.Guests, Nodes: o.Nodes,
		NodeConcurrency: conv.nodeConcurrency, NodeRate: conv.nodeRate, APILatencyMs: ms(o.APILatency), PowerTaskS: o.PowerTask.Seconds(),
		ConfigTaskS: o.ConfigTask.Seconds(), BaselineParallelism: o.BaselineParallelism, BaselinePollS: o.BaselinePoll.Seconds()}
	per := spread(o.Guests, o.Nodes)
	rep.IdealMakespanS = IdealMakespan(ProxmoxIdeal(per, o.APILatency, o.ConfigTask, o.PowerTask, false)).Seconds()
	rep.IdealUnboundedMakespanS = IdealMakespan(ProxmoxIdeal(per, o.APILatency, o.ConfigTask, o.PowerTask, true)).Seconds()
	det, err := runConverge(ctx, o, conv, dir, rep)
	if err != nil {
		return nil, nil, err
	}
	if rep.IdealMakespanS > 0 {
		rep.MakespanRatio = rep.MakespanS / rep.IdealMakespanS
	}
	if err := runBaseline(ctx, o, rep); err != nil {
		return nil, nil, err
	}
	if rep.MakespanS > 0 {
		rep.BaselineSpeedup = rep.BaselineMakespanS / rep.MakespanS
	}
	det.Elapsed = time.Since(start)
	return rep, det, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Every guest's desired change: power it on with a new config. Guests
// start stopped with one core; the planner writes the config first (so
// the guest boots with it: cores never hotplug), then starts it.
const (
	proxmoxCores       = 2
	proxmoxDescription = "bench: proxmox profile"
)

// proxmoxSim starts a simulator with the profile's nodes, guests (QEMU,
// stopped, one core, guest i on node i mod nodes) and latencies.
func proxmoxSim(o ProxmoxOptions, onMutation func(pvesim.Mutation)) (*pvesim.Sim, error) {
	power := pvesim.Duration(o.PowerTask)
	sim, err := pvesim.New(pvesim.Options{Nodes: o.Nodes, Tokens: map[string]string{tokenID: tokenSecret}, Seed: 1, OnMutation: onMutation,
		Faults: pvesim.Faults{Latency: pvesim.Duration(o.APILatency), ResourcesLag: pvesim.Duration(o.ResourcesLag), TaskLatencyByType: map[string]pvesim.Duration{
			"qmstart": power, "qmstop": power, "qmshutdown": power, "qmreboot": power,
			"qmconfig": pvesim.Duration(o.ConfigTask)}}})
	if err != nil {
		return nil, err
	}
	nodes := sim.NodeNames()
	for i := 0; i < o.Guests; i++ {
		vmid := 100 + i
		if err := sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: nodes[i%len(nodes)], Name: fmt.Sprintf("vm-%d", vmid),
			Cores: 1, MemoryMiB: 1024}); err != nil {
			return nil, err
		}
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return sim, nil
}

// checkDone verifies, from the simulator, that every guest is running
// with the desired config.
func checkDone(sim *pvesim.Sim, guests int, who string) error {
	bad := 0
	var first string
	for i := 0; i < guests; i++ {
		g, ok := sim.Guest(100 + i)
		if ok && g.Status == "running" && g.Config["cores"] == fmt.Sprint(proxmoxCores) && len(g.Pending) == 0 &&
			g.Config["description"] == proxmoxDescription {
			continue
		}
		if bad++; first == "" {
			first = fmt.Sprintf("%d: %s, config %v, pending %v", 100+i, g.Status, g.Config, g.Pending)
		}
	}
	if bad > 0 {
		return fmt.Errorf("bench: after %s's run %d guests are not running with the new config (first %s)", who, bad, first)
	}
	return nil
}

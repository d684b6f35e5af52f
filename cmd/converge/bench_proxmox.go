package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/bench"
)

// Bench profiles: what `converge bench --profile` measures.
const (
	profilePipeline = "pipeline" // the bus and the pipeline, no latency (bench.Run)
	profileProxmox  = "proxmox"  // a Proxmox-shaped workload (bench.RunProxmox)
	profileEstate   = "estate"   // the same at estate scale, the simulator apart (bench.RunEstate)
)

// proxmoxBench holds `converge bench --profile` and the Proxmox-shaped
// profiles' own flags.
type proxmoxBench struct {
	profile string
	o       bench.ProxmoxOptions
	// The overrides of converge's limits, applied only when given.
	limits bench.ConvergeLimits
	// verifyWait is the estate's drift measurement bound.
	verifyWait time.Duration
	// deprecated are warnings about flags given in a deprecated form.
	deprecated []string
}

// The flags each profile alone takes; any other is common to all.
var (
	pipelineOnlyFlags = []string{"changes", "rate", "latency-changes", "partitions", "executors", "executor-concurrency",
		"task-latency", "phase-profiles"}
	proxmoxOnlyFlags = []string{"nodes", "node-concurrency", "node-rate", "limits-off", "api-latency", "power-task", "config-task",
		"baseline-parallelism", "baseline-poll", "verify-wait"}
	// refused says which flags each profile refuses.
	refused = map[string][]string{
		profilePipeline: proxmoxOnlyFlags,
		profileProxmox:  append(slices.Clone(pipelineOnlyFlags), "sim-process", "verify-wait"),
		profileEstate:   append(slices.Clone(pipelineOnlyFlags), "baseline-parallelism", "baseline-poll"),
	}
)

func (p *proxmoxBench) addFlags(fl *pflag.FlagSet, note func(string)) {
	p.o = bench.DefaultProxmoxOptions()
	// Shown as converge's shipped defaults; applied only when given.
	shipped := app.DefaultConfig()
	p.limits.NodeConcurrency = shipped.Planner.Planner.Limits.NodeConcurrency
	p.limits.NodeRate, p.limits.NodeRateUnlimited = shipped.Executor.NodeRate, shipped.Executor.NodeRateUnlimited
	p.verifyWait = bench.DefaultVerifyWait
	fl.StringVar(&p.profile, "profile", profilePipeline, `what to measure: "pipeline" (the bus and the pipeline against a simulator without latency), "proxmox" (a Proxmox-shaped workload: converge's makespan against the ideal schedule under Proxmox's limits and a Terraform-like baseline; --guests defaults to 1000 there), "estate" (the same change at estate scale, 10,000 guests on 100 nodes, the simulator in its own process: makespan, converge's CPU and peak memory, drift detection), "clones" (200 clones from 2 QEMU and 2 container templates onto 3 storages: makespan against the ideal under Proxmox's locks, lock timeouts) or "failover" (executors SIGKILLed under load: how long their partitions stand still; --guests defaults to 300 there)`)
	fl.IntVar(&p.o.Nodes, "nodes", p.o.Nodes, "simulated Proxmox nodes, the guests spread evenly (--profile proxmox; estate: 100)")
	fl.IntVar(&p.limits.NodeConcurrency, "node-concurrency", p.limits.NodeConcurrency, "override converge's most actions in flight per node (the default shown is converge's shipped one, which runs unless this is given; --profile proxmox, estate)")
	fl.Var(&limitFloat{r: &p.limits.NodeRate, unlimited: &p.limits.NodeRateUnlimited, name: "node-rate", note: note}, "node-rate",
		"override converge's most mutating calls a second per node; unlimited: none (a negative value, deprecated, is none too) (the default shown is converge's shipped one, which runs unless this is given; --profile proxmox, estate)")
	fl.BoolVar(&p.limits.LimitsOff, "limits-off", false, "run converge with its per-node limits lifted (node concurrency, node rate, per-node calls), not its shipped defaults; the report says limits \"off\" (--profile proxmox, estate)")
	fl.DurationVar(&p.o.APILatency, "api-latency", p.o.APILatency, "latency of every Proxmox API call (0: none; --profile proxmox, estate)")
	fl.DurationVar(&p.o.PowerTask, "power-task", p.o.PowerTask, "how long power tasks (qmstart, qmstop, qmshutdown, qmreboot) run (0: at once; --profile proxmox, estate)")
	fl.DurationVar(&p.o.ConfigTask, "config-task", p.o.ConfigTask, "how long a QEMU config write's work (qmconfig) runs (0: at once; --profile proxmox, estate)")
	fl.IntVar(&p.o.BaselineParallelism, "baseline-parallelism", p.o.BaselineParallelism, "guests the Terraform-like baseline applies at once (terraform's -parallelism; --profile proxmox)")
	fl.DurationVar(&p.o.BaselinePoll, "baseline-poll", p.o.BaselinePoll, "the baseline's task polling interval (0: no wait between polls; --profile proxmox)")
	fl.DurationVar(&p.verifyWait, "verify-wait", p.verifyWait, "how long the estate waits, after the change, for converge to have re-read every guest's config (0: not measured; --profile estate)")
}

// check refuses a profile that does not exist, and flags of another
// profile.
func (p *proxmoxBench) check(cmd *cobra.Command) error {
	var other []string
	switch p.profile {
	case profileFailover:
		other = append((&failoverBench{}).refused(), "verify-wait", "limits-off")
		other = append(other, clonesOnlyFlags...)
	case profileClones:
		other = clonesIgnores
	default:
		var ok bool
		if other, ok = refused[p.profile]; !ok {
			return usageError{fmt.Errorf("--profile %q: want %q, %q, %q, %q or %q", p.profile, profilePipeline, profileProxmox, profileEstate, profileClones, profileFailover)}
		}
		other = append(append(slices.Clone(other), failoverOnlyFlags...), clonesOnlyFlags...)
	}
	for _, name := range other {
		if cmd.Flags().Changed(name) {
			return usageError{fmt.Errorf("--%s does not apply to --profile %s", name, p.profile)}
		}
	}
	return nil
}

// convergeLimits are the limit flags given: the rest stays converge's.
func (p *proxmoxBench) convergeLimits(cmd *cobra.Command) (bench.ConvergeLimits, error) {
	l := bench.ConvergeLimits{LimitsOff: p.limits.LimitsOff}
	if cmd.Flags().Changed("node-concurrency") {
		if p.limits.NodeConcurrency < 1 {
			return l, usageError{fmt.Errorf("--node-concurrency: must be >= 1, got %d", p.limits.NodeConcurrency)}
		}
		l.NodeConcurrency = p.limits.NodeConcurrency
	}
	if cmd.Flags().Changed("node-rate") {
		if !p.limits.NodeRateUnlimited && !(p.limits.NodeRate > 0) {
			return l, usageError{fmt.Errorf("--node-rate: must be > 0 calls per second, or unlimited, got %v", p.limits.NodeRate)}
		}
		l.NodeRate, l.NodeRateUnlimited = p.limits.NodeRate, p.limits.NodeRateUnlimited
	}
	return l, nil
}

// run runs the Proxmox profile and prints its report. guests is --guests
// when given; progress and the logger are the pipeline's.
func (p *proxmoxBench) run(cmd *cobra.Command, g *globals, base bench.Options, memProfile string, tty bool) error {
	if p.profile == profileEstate {
		return p.runEstate(cmd, g, base, memProfile, tty)
	}
	o := p.o
	var err error
	if o.ConvergeLimits, err = p.convergeLimits(cmd); err != nil {
		return err
	}
	if cmd.Flags().Changed("guests") {
		o.Guests = base.Guests
	}
	o.Dir, o.Progress, o.Logger, o.ResourcesLag = base.Dir, base.Progress, base.Logger, base.ResourcesLag
	for _, d := range p.deprecated {
		o.Logger.Warn().Msg(d)
	}
	if err := o.Validate(); err != nil {
		return usageError{flagError(err)}
	}
	rep, det, err := bench.RunProxmox(cmd.Context(), o)
	out, done, err := benchDone(cmd, g, memProfile, tty, rep, err)
	if done {
		return err
	}
	return printProxmoxReport(out, rep, det)
}

func printProxmoxReport(out interface{ Write([]byte) (int, error) }, rep *bench.ProxmoxReport, det *bench.ProxmoxDetails) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "converge bench --profile proxmox: %d guests on %d nodes, %s, API calls %g ms, power tasks %g s, config tasks %g s (%s, %d CPUs, %s)\n",
		rep.Guests, rep.Nodes, limitsText(rep.Limits, rep.NodeConcurrency, rep.NodeRate), rep.APILatencyMs, rep.PowerTaskS, rep.ConfigTaskS,
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), det.Elapsed.Round(time.Second))
	fmt.Fprintf(tw, "converge\tmakespan %.2f s\tideal %.2f s\tratio %.3f\t(%d actions, %d tasks: %s; %d config writes without a task; %d Proxmox calls)\n",
		rep.MakespanS, rep.IdealMakespanS, rep.MakespanRatio, rep.Actions, rep.Tasks, taskTypes(det.TaskTypes), det.SyncConfigWrites, rep.PveCalls)
	fmt.Fprintf(tw, "  ideal under Proxmox's limits\t%d pvedaemon and %d pveproxy workers, %d power tasks per node\twithout the power-task limit %.2f s\n",
		bench.PveDaemonWorkers, bench.PveProxyWorkers, bench.PvePowerTasks, rep.IdealUnboundedMakespanS)
	fmt.Fprintf(tw, "  publish → config task\tp50 %.0f ms\tp90 %.0f ms\tp99 %.0f ms\n", det.Head.P50, det.Head.P90, det.Head.P99)
	fmt.Fprintf(tw, "  config task → start task\tp50 %.0f ms\tp90 %.0f ms\tp99 %.0f ms\n", det.Handoff.P50, det.Handoff.P90, det.Handoff.P99)
	fmt.Fprintf(tw, "  start task → converged\tp50 %.0f ms\tp90 %.0f ms\tp99 %.0f ms\n", det.Tail.P50, det.Tail.P90, det.Tail.P99)
	fmt.Fprintf(tw, "  task end → next config task on its slot\tp50 %.0f ms\tp90 %.0f ms\tp99 %.0f ms\n", det.ToConfig.P50, det.ToConfig.P90, det.ToConfig.P99)
	fmt.Fprintf(tw, "  task end → next start task on its slot\tp50 %.0f ms\tp90 %.0f ms\tp99 %.0f ms\n", det.ToStart.P50, det.ToStart.P90, det.ToStart.P99)
	fmt.Fprintf(tw, "  node slots\t%.0f %% used\tat most %d tasks at once on a node\t%.1f config writes/s per node while writing\n",
		100*det.SlotUse, det.MaxInFlight, det.ConfigWriteRate)
	fmt.Fprintf(tw, "baseline\tmakespan %.2f s\t%.2f × converge's\t(%d at once, tasks polled every %g s; %d tasks, %d Proxmox calls)\n",
		rep.BaselineMakespanS, rep.BaselineSpeedup, rep.BaselineParallelism, rep.BaselinePollS, rep.BaselineTasks, rep.BaselinePveCalls)
	return tw.Flush()
}

func taskTypes(m map[string]int) string {
	var parts []string
	for t, n := range m {
		parts = append(parts, fmt.Sprintf("%d %s", n, t))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// limitsText says which limits converge ran with.
func limitsText(limits string, nodeConcurrency int, nodeRate float64) string {
	conc, rate := "no node concurrency", "no node rate"
	if nodeConcurrency > 0 {
		conc = fmt.Sprintf("node concurrency %d", nodeConcurrency)
	}
	if nodeRate > 0 {
		rate = fmt.Sprintf("node rate %g/s", nodeRate)
	}
	return fmt.Sprintf("limits %s: %s, %s", limits, conc, rate)
}

// runEstate runs the estate profile (the simulator as this binary's
// `converge sim`) and prints its report.
func (p *proxmoxBench) runEstate(cmd *cobra.Command, g *globals, base bench.Options, memProfile string, tty bool) error {
	o := bench.DefaultEstateOptions()
	var err error
	if o.ConvergeLimits, err = p.convergeLimits(cmd); err != nil {
		return err
	}
	if cmd.Flags().Changed("guests") {
		o.Guests = base.Guests
	}
	if cmd.Flags().Changed("nodes") {
		o.Nodes = p.o.Nodes
	}
	o.APILatency, o.PowerTask, o.ConfigTask, o.VerifyWait = p.o.APILatency, p.o.PowerTask, p.o.ConfigTask, p.verifyWait
	o.Dir, o.Progress, o.Logger, o.ResourcesLag = base.Dir, base.Progress, base.Logger, base.ResourcesLag
	for _, d := range p.deprecated {
		o.Logger.Warn().Msg(d)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: this program's path, to run the simulator: %w", err)
	}
	o.SimCommand = []string{exe, "sim"}
	if err := o.Validate(); err != nil {
		return usageError{flagError(err)}
	}
	rep, det, err := bench.RunEstate(cmd.Context(), o)
	out, done, err := benchDone(cmd, g, memProfile, tty, rep, err)
	if done {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "converge bench --profile estate: %d guests on %d nodes, %s, API calls %g ms, power tasks %g s, config tasks %g s, simulator in its own process (%s, %d CPUs, %s; setup %s, first observation %s)\n",
		rep.Guests, rep.Nodes, limitsText(rep.Limits, rep.NodeConcurrency, rep.NodeRate), rep.APILatencyMs, rep.PowerTaskS, rep.ConfigTaskS,
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), det.Elapsed.Round(time.Second), det.Setup.Round(time.Second), det.Observe.Round(time.Second))
	fmt.Fprintf(tw, "converge\tmakespan %.2f s\tideal %.2f s\tratio %.3f\t(%d actions, %d tasks, %d Proxmox calls: %.2f a guest)\n",
		rep.MakespanS, rep.IdealMakespanS, rep.MakespanRatio, rep.Actions, rep.Tasks, rep.PveCalls, rep.PveCallsPerGuest)
	fmt.Fprintf(tw, "  ideal under Proxmox's limits\t%d pvedaemon and %d pveproxy workers, %d power tasks per node\twithout the power-task limit %.2f s\n",
		bench.PveDaemonWorkers, bench.PveProxyWorkers, bench.PvePowerTasks, rep.IdealUnboundedMakespanS)
	fmt.Fprintf(tw, "  converge's process\t%.1f s CPU\t%.2f cores on average\tpeak RSS %.0f MiB (since the %s's start)\t(simulator %.1f s CPU)\n",
		rep.ConvergeCPUS, rep.ConvergeCoresAvg, rep.ConvergePeakRSSMB, rep.ConvergePeakRSSSince, rep.SimCPUS)
	switch {
	case rep.VerifyWaitS == 0:
		fmt.Fprintf(tw, "drift detection\tnot measured\n")
	case rep.VerifyAllS < 0:
		fmt.Fprintf(tw, "drift detection\tnot every guest re-read within %.0f s: %d of %d\t%d config reads, at most %d a second on a node\n",
			rep.VerifyWaitS, rep.VerifyGuests, rep.Guests, rep.VerifyReads, rep.VerifyMaxReadsPerNodeS)
	default:
		fmt.Fprintf(tw, "drift detection\tevery guest re-read within %.1f s\t%d config reads, at most %d a second on a node\n",
			rep.VerifyAllS, rep.VerifyReads, rep.VerifyMaxReadsPerNodeS)
	}
	return tw.Flush()
}

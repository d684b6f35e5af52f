package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/internal/bench"
)

// Bench profiles: what `converge bench --profile` measures.
const (
	profilePipeline = "pipeline" // the bus and the pipeline, no latency (bench.Run)
	profileProxmox  = "proxmox"  // a Proxmox-shaped workload (bench.RunProxmox)
)

// proxmoxBench holds `converge bench --profile` and the Proxmox profile's
// own flags.
type proxmoxBench struct {
	profile string
	o       bench.ProxmoxOptions
	// deprecated are warnings about flags given in a deprecated form.
	deprecated []string
}

// The flags each profile alone takes; any other is common to both.
var (
	pipelineOnlyFlags = []string{"changes", "rate", "latency-changes", "partitions", "executors", "executor-concurrency",
		"task-latency", "sim-process", "phase-profiles"}
	proxmoxOnlyFlags = []string{"nodes", "node-concurrency", "node-rate", "api-latency", "power-task", "config-task",
		"baseline-parallelism", "baseline-poll"}
)

func (p *proxmoxBench) addFlags(fl *pflag.FlagSet, note func(string)) {
	p.o = bench.DefaultProxmoxOptions()
	fl.StringVar(&p.profile, "profile", profilePipeline, `what to measure: "pipeline" (the bus and the pipeline against a simulator without latency) "proxmox" (a Proxmox-shaped workload: converge's makespan against the ideal schedule and a Terraform-like baseline; --guests defaults to 1000 there) or "clones" (200 clones from 2 QEMU and 2 container templates onto 3 storages: makespan against the ideal under Proxmox's locks, lock timeouts)`)
	fl.IntVar(&p.o.Nodes, "nodes", p.o.Nodes, "simulated Proxmox nodes, the guests spread evenly (--profile proxmox)")
	fl.IntVar(&p.o.NodeConcurrency, "node-concurrency", p.o.NodeConcurrency, "converge's most actions in flight per node, and the ideal schedule's (--profile proxmox)")
	fl.Var(&limitFloat{r: &p.o.NodeRate, unlimited: &p.o.NodeRateUnlimited, name: "node-rate", note: note}, "node-rate",
		"converge's most mutating calls a second per node, and the ideal schedule's; unlimited: none (a negative value, deprecated, is none too) (--profile proxmox)")
	fl.DurationVar(&p.o.APILatency, "api-latency", p.o.APILatency, "latency of every Proxmox API call (0: none; --profile proxmox)")
	fl.DurationVar(&p.o.PowerTask, "power-task", p.o.PowerTask, "how long power tasks (qmstart, qmstop, qmshutdown, qmreboot) run (0: at once; --profile proxmox)")
	fl.DurationVar(&p.o.ConfigTask, "config-task", p.o.ConfigTask, "how long a QEMU config write's work (qmconfig) runs (0: at once; --profile proxmox)")
	fl.IntVar(&p.o.BaselineParallelism, "baseline-parallelism", p.o.BaselineParallelism, "guests the Terraform-like baseline applies at once (terraform's -parallelism; --profile proxmox)")
	fl.DurationVar(&p.o.BaselinePoll, "baseline-poll", p.o.BaselinePoll, "the baseline's task polling interval (0: no wait between polls; --profile proxmox)")
}

// check refuses a profile that does not exist, and flags of the profile
// not run.
func (p *proxmoxBench) check(cmd *cobra.Command) error {
	var other []string
	switch p.profile {
	case profilePipeline:
		other = append(append([]string{}, proxmoxOnlyFlags...), clonesOnlyFlags...)
	case profileProxmox:
		other = append(append([]string{}, pipelineOnlyFlags...), clonesOnlyFlags...)
	case profileClones:
		other = clonesIgnores
	default:
		return usageError{fmt.Errorf("--profile %q: want %q, %q or %q", p.profile, profilePipeline, profileProxmox, profileClones)}
	}
	for _, name := range other {
		if cmd.Flags().Changed(name) {
			return usageError{fmt.Errorf("--%s does not apply to --profile %s", name, p.profile)}
		}
	}
	return nil
}

// run runs the Proxmox profile and prints its report. guests is --guests
// when given; progress and the logger are the pipeline's.
func (p *proxmoxBench) run(cmd *cobra.Command, g *globals, base bench.Options, memProfile string, tty bool) error {
	o := p.o
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
	if memProfile != "" && err == nil {
		if err := writeHeapProfile(memProfile); err != nil {
			return err
		}
	}
	if tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if g.output == "json" {
		return json.NewEncoder(out).Encode(rep)
	}
	return printProxmoxReport(out, rep, det)
}

func printProxmoxReport(out interface{ Write([]byte) (int, error) }, rep *bench.ProxmoxReport, det *bench.ProxmoxDetails) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	rate := "no node rate"
	if rep.NodeRate > 0 {
		rate = fmt.Sprintf("node rate %g/s", rep.NodeRate)
	}
	fmt.Fprintf(tw, "converge bench --profile proxmox: %d guests on %d nodes, node concurrency %d, %s, API calls %g ms, power tasks %g s, config tasks %g s (%s, %d CPUs, %s)\n",
		rep.Guests, rep.Nodes, rep.NodeConcurrency, rate, rep.APILatencyMs, rep.PowerTaskS, rep.ConfigTaskS,
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), det.Elapsed.Round(time.Second))
	fmt.Fprintf(tw, "converge\tmakespan %.2f s\tideal %.2f s\tratio %.3f\t(%d actions, %d tasks: %s; %d config writes without a task; %d Proxmox calls)\n",
		rep.MakespanS, rep.IdealMakespanS, rep.MakespanRatio, rep.Actions, rep.Tasks, taskTypes(det.TaskTypes), det.SyncConfigWrites, rep.PveCalls)
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

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/converge-pve/converge/internal/bench"
)

func newBenchCmd(g *globals) *cobra.Command {
	o := bench.DefaultOptions()
	var cpuProfile, memProfile string
	var simProcess bool
	var prox proxmoxBench
	var fail failoverBench
	var clones clonesBench
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the pipeline against the raw JetStream limit, in one run",
		Long: `Starts an embedded JetStream and the simulator (no added latency), measures
the raw bus (async publish, durable consume, ordered replay of as many
messages of the same size as the pipeline writes), then the pipeline at
saturation and at a fixed rate, a replay into fresh views and an idle
observer pass. -o json prints the report's fields. --profile proxmox
measures a Proxmox-shaped workload instead, --profile estate the same at
estate scale, --profile failover how long a SIGKILLed executor's
partitions stand still (docs/benchmarks.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := prox.check(cmd); err != nil {
				return err
			}
			// Sized by the estate and the rate unless given.
			sized := o
			sized.FollowGuests()
			for name, v := range map[string]*int{"changes": &o.Changes, "burst-changes": &o.BurstChanges, "latency-changes": &o.LatencyN} {
				if !cmd.Flags().Changed(name) {
					*v = map[string]int{"changes": sized.Changes, "burst-changes": sized.BurstChanges, "latency-changes": sized.LatencyN}[name]
				}
			}
			var deprecated string
			if o.BurstChanges < 0 {
				deprecated = fmt.Sprintf("--burst-changes %d: a negative value is deprecated, give --burst-changes 0", o.BurstChanges)
				o.BurstChanges = 0
			}
			if o.PhaseProfiles != "" && cpuProfile != "" {
				// The runtime runs one CPU profile at a time.
				return usageError{errors.New("--phase-profiles and --cpuprofile: give one of them")}
			}
			if o.PhaseProfiles != "" {
				if err := os.MkdirAll(o.PhaseProfiles, 0o755); err != nil {
					return err
				}
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			if deprecated != "" {
				log.Warn().Msg(deprecated)
			}
			// The roles' routine logs would drown the table: warnings and
			// errors only, unless debugging.
			if log.GetLevel() > zerolog.DebugLevel && log.GetLevel() < zerolog.WarnLevel {
				log = log.Level(zerolog.WarnLevel)
			}
			o.Logger = log
			if simProcess {
				// As Proxmox runs elsewhere: this binary's `converge sim`.
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench: this program's path, to run the simulator: %w", err)
				}
				o.SimCommand = []string{exe, "sim"}
			}
			tty := term.IsTerminal(int(os.Stderr.Fd()))
			last := time.Time{}
			o.Progress = func(phase string, done, total int) {
				if time.Since(last) < 200*time.Millisecond && done < total {
					return
				}
				last = time.Now()
				if tty {
					fmt.Fprintf(os.Stderr, "\r\033[K%-22s %7d / %-7d", phase, done, total)
				}
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if memProfile != "" {
				// Every allocation sampled, so that per-action figures are exact.
				runtime.MemProfileRate = 4096
			}
			if prox.profile == profileFailover {
				return fail.run(cmd, g, o, prox.o, tty)
			}
			if prox.profile == profileClones {
				return clones.run(cmd, g, &prox, o, tty)
			}
			if prox.profile != profilePipeline {
				return prox.run(cmd, g, o, memProfile, tty)
			}
			if err := o.Validate(); err != nil {
				return usageError{flagError(err)}
			}
			rep, det, err := bench.Run(cmd.Context(), o)
			out, done, err := benchDone(cmd, g, memProfile, tty, rep, err)
			if done {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			where := "simulator in-process"
			if simProcess {
				where = "simulator in its own process"
			}
			fmt.Fprintf(tw, "converge bench: %d guests, %d changes, %d executor(s), %d partitions, %s (%s, %d CPUs, %s)\n",
				rep.Guests, rep.Changes, o.Executors, o.Partitions, where, runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), det.Elapsed.Round(time.Second))
			fmt.Fprintf(tw, "raw JetStream\tpublish %.0f msgs/s\tconsume %.0f msgs/s\treplay %.0f msgs/s\t(%d msgs of %d B)\n",
				rep.RawPublishMsgsPerS, rep.RawConsumeMsgsPerS, rep.RawReplayMsgsPerS, det.RawMessages, det.RawMessageBytes)
			fmt.Fprintf(tw, "pipeline\t%.0f changes/s\t%.2f writes/change\tefficiency %.3f\t(%.1f s, %d changes, %d actions, %d writes)\n",
				rep.PipelineChangesPerS, rep.StreamWritesPerChange, rep.Efficiency, det.PipelineSeconds, rep.Changes, det.Actions, det.StreamWrites)
			fmt.Fprintf(tw, "  per action\t%.0f actions/s\taction efficiency %.3f\t%.2f ms CPU\t%.2f Proxmox calls\t%.1f KB allocated\n",
				rep.ActionsPerS, rep.ActionEfficiency, rep.CPUMsPerAction, rep.PveCallsPerAction, rep.BytesAllocatedPerAction/1000)
			fmt.Fprintf(tw, "  bus messages\t%.1f in\t%.1f out\t(to and from the embedded server, per action)\n",
				det.MsgsInPerAction, det.MsgsOutPerAction)
			if rep.BurstChanges > 0 {
				fmt.Fprintf(tw, "coalesced burst\t%.0f changes/s\t%.2f writes/change\tefficiency %.3f\t(%.1f s, %d changes, %d actions)\n",
					rep.BurstChangesPerS, rep.BurstWritesPerChange, rep.BurstEfficiency, det.BurstSeconds, rep.BurstChanges, det.BurstActions)
			}
			fmt.Fprintf(tw, "latency (%d changes at %d/s)\tp50 %.2f ms\tp90 %.2f ms\tp99 %.2f ms\t(%d garbage collections in the run)\n",
				det.LatencyChanges, o.Rate, rep.LatencyMs.P50, rep.LatencyMs.P90, rep.LatencyMs.P99, det.LatencyGCs)
			for _, n := range o.LatencyAt {
				l := rep.LatencyMsByGuests[strconv.Itoa(n)]
				fmt.Fprintf(tw, "  at %d guests\tp50 %.2f ms\tp90 %.2f ms\tp99 %.2f ms\n", n, l.P50, l.P90, l.P99)
			}
			fmt.Fprintf(tw, "  desired → action (planner)\tp50 %.2f ms\tp90 %.2f ms\tp99 %.2f ms\n",
				det.LatencyPlanner.P50, det.LatencyPlanner.P90, det.LatencyPlanner.P99)
			fmt.Fprintf(tw, "  action → mutation (executor)\tp50 %.2f ms\tp90 %.2f ms\tp99 %.2f ms\n",
				det.LatencyExecutor.P50, det.LatencyExecutor.P90, det.LatencyExecutor.P99)
			cpu := fmt.Sprintf("%.2f ms CPU", float64(det.LatencyCPUPerChange.Microseconds())/1000)
			if simProcess {
				cpu += fmt.Sprintf(" (+%.2f simulator)", float64(det.LatencySimCPUPerChange.Microseconds())/1000)
			}
			fmt.Fprintf(tw, "  cost of a change\t%s\t%.2f journal writes\t%.2f Proxmox calls\t%.0f KB allocated\n",
				cpu, det.LatencyWritesPerChange, det.LatencyCallsPerChange, float64(det.LatencyAllocPerChange)/1000)
			fmt.Fprintf(tw, "replay\t%.0f events/s\t%.2f × raw replay\t(%d events)\n",
				rep.ReplayEventsPerS, rep.ReplayEventsPerS/rep.RawReplayMsgsPerS, det.ReplayEvents)
			fmt.Fprintf(tw, "idle observer pass\t%.1f Proxmox calls\n", rep.PveCallsPerIdlePass)
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Guests, "guests", o.Guests, "guests in the simulator")
	fl.IntVar(&o.Changes, "changes", o.Changes, "desired changes in the throughput run (default: one per guest, each an action)")
	fl.IntVar(&o.BurstChanges, "burst-changes", o.BurstChanges, "changes of the coalesced burst run after it (default ten per guest; 0 skips it; a negative value, deprecated, skips it too)")
	fl.IntVar(&o.Rate, "rate", o.Rate, "changes per second of the latency run")
	fl.IntSliceVar(&o.LatencyAt, "latency-at", nil, "also run the latency run with the simulator grown to these guest counts (e.g. 100000)")
	fl.IntVar(&o.LatencyN, "latency-changes", o.LatencyN, "changes in the latency run (default min(5 s × rate, guests))")
	fl.IntVar(&o.Partitions, "partitions", o.Partitions, "vmid partitions of the journal")
	fl.IntVar(&o.Executors, "executors", o.Executors, "executor instances")
	fl.IntVar(&o.Concurrency, "executor-concurrency", o.Concurrency, "actions each executor runs at once (not with --shipped-limits)")
	fl.BoolVar(&o.ShippedLimits, "shipped-limits", false, "run converge with its shipped per-node limits (node task slots, --node-calls, executor concurrency) instead of lifting them; the report says which (limits)")
	fl.DurationVar(&o.TaskLatency, "task-latency", 0, "how long each simulated Proxmox task runs (scale-out runs)")
	fl.DurationVar(&o.ResourcesLag, "sim-resources-lag", o.ResourcesLag, "the simulator's pvestatd cycle: how often each node updates /cluster/resources (0: live)")
	fl.BoolVar(&simProcess, "sim-process", false, "run the simulator as \"converge sim\" in a process of its own (its CPU is then reported apart)")
	fl.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fl.StringVar(&memProfile, "memprofile", "", "write an allocation profile of the whole run to this file (go tool pprof -sample_index=alloc_space)")
	fl.StringVar(&o.PhaseProfiles, "phase-profiles", "", "write CPU and allocation profiles and an execution trace of the throughput run, the burst and each latency run alone, and each latency run's changes with their times, to this directory (docs/benchmarks.md)")
	fl.StringVar(&o.Dir, "data", "", "journal directory (default: a temp dir, removed)")
	prox.addFlags(fl, func(s string) { prox.deprecated = append(prox.deprecated, s) })
	fail.addFlags(fl)
	clones.addFlags(fl, func(s string) { prox.deprecated = append(prox.deprecated, s) })
	return cmd
}

// benchDone ends a profile's run the same way for every profile: the heap
// profile written (if asked, and the run succeeded), the progress line
// cleared, the error returned, or the report printed as JSON. It returns
// the writer a text report goes to, or done (with the error to return).
func benchDone(cmd *cobra.Command, g *globals, memProfile string, tty bool, rep any, runErr error) (out io.Writer, done bool, err error) {
	if memProfile != "" && runErr == nil {
		if err := writeHeapProfile(memProfile); err != nil {
			return nil, true, err
		}
	}
	if tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if runErr != nil {
		return nil, true, runErr
	}
	out = cmd.OutOrStdout()
	if g.output == "json" {
		return nil, true, json.NewEncoder(out).Encode(rep)
	}
	return out, false, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

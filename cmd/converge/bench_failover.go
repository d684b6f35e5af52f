package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/internal/bench"
)

// profileFailover SIGKILLs executors under load (bench.RunFailover).
const profileFailover = "failover"

// failoverBench holds the failover profile's own flags; it shares
// --guests, --executors, --rate, --nodes, --power-task, --config-task and
// --api-latency with the other profiles, with its own defaults unless
// given.
type failoverBench struct {
	o bench.FailoverOptions
}

// failoverOnlyFlags are the flags only --profile failover takes.
var failoverOnlyFlags = []string{"kills", "lease-ttl", "ack-wait", "settle", "pauses", "pause-for"}

// failoverShared are the other profiles' flags it takes too.
var failoverShared = []string{"executors", "rate", "nodes", "power-task", "config-task", "api-latency"}

func (f *failoverBench) addFlags(fl *pflag.FlagSet) {
	f.o = bench.DefaultFailoverOptions()
	fl.IntVar(&f.o.Kills, "kills", f.o.Kills, "executors SIGKILLed one after another under load, each restarted before the next (--profile failover)")
	fl.DurationVar(&f.o.LeaseTTL, "lease-ttl", f.o.LeaseTTL, "the executors' and the planner's --lease-ttl (--profile failover)")
	fl.DurationVar(&f.o.AckWait, "ack-wait", f.o.AckWait, "the executors' --ack-wait (--profile failover)")
	fl.IntVar(&f.o.Pauses, "pauses", 0, "after the kills, stop executors one at a time (SIGSTOP) for --pause-for, as a long GC pause or a frozen VM would, and count the leases lost and spurious redeliveries (--profile failover)")
	fl.DurationVar(&f.o.PauseFor, "pause-for", 2*time.Second, "how long each --pauses stop lasts (--profile failover)")
	fl.DurationVar(&f.o.Settle, "settle", f.o.Settle, "wait this long after the executors share the partitions again before the next kill (--profile failover)")
}

// refused are the flags --profile failover does not take.
func (f *failoverBench) refused() []string {
	var out []string
	for _, n := range append(slices.Clone(pipelineOnlyFlags), proxmoxOnlyFlags...) {
		if !slices.Contains(failoverShared, n) {
			out = append(out, n)
		}
	}
	return out
}

// run runs the failover profile with the shared flags given, and prints
// its report.
func (f *failoverBench) run(cmd *cobra.Command, g *globals, base bench.Options, prox bench.ProxmoxOptions, tty bool) error {
	o := f.o
	fl := cmd.Flags()
	if fl.Changed("guests") {
		o.Guests = base.Guests
	}
	if fl.Changed("executors") {
		o.Executors = base.Executors
	}
	if fl.Changed("rate") {
		o.Rate = float64(base.Rate)
	}
	if fl.Changed("nodes") {
		o.Nodes = prox.Nodes
	}
	if fl.Changed("power-task") {
		o.PowerTask = prox.PowerTask
	}
	if fl.Changed("config-task") {
		o.ConfigTask = prox.ConfigTask
	}
	if fl.Changed("api-latency") {
		o.APILatency = prox.APILatency
	}
	// The executors are this binary's `converge executor`.
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: this program's path, to run executors: %w", err)
	}
	o.ExecutorCommand = []string{exe, "executor"}
	o.Dir, o.Progress, o.Logger = base.Dir, base.Progress, base.Logger
	if err := o.Validate(); err != nil {
		return usageError{flagError(err)}
	}
	rep, det, err := bench.RunFailover(cmd.Context(), o)
	out, done, err := benchDone(cmd, g, "", tty, rep, err)
	if done {
		return err
	}
	return printFailoverReport(out, rep, det)
}

func printFailoverReport(out interface{ Write([]byte) (int, error) }, rep bench.FailoverReport, det *bench.FailoverDetails) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "converge bench --profile failover: %d executor processes, %d partitions, %d guests on %d nodes, %g changes/s, power tasks %g s, config writes %g s, lease TTL %g s, ack wait %g s (%s, %d CPUs, %s)\n",
		rep.Executors, rep.Partitions, rep.Guests, rep.Nodes, rep.Rate, rep.PowerTaskS, rep.ConfigTaskS, rep.LeaseTTLS, rep.AckWaitS,
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), det.Elapsed.Round(time.Second))
	fmt.Fprintf(tw, "kill\texecutor\tpartitions\tunfinished\tof them started\ttakeover s\tresume s\tkill → act s\n")
	for i, k := range det.PerKill {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\n", i+1, k.Executor, k.Held, k.Open, k.Started,
			k.Takeover.Seconds(), k.Resume.Seconds(), k.Act().Seconds())
	}
	fmt.Fprintf(tw, "kill → act (%d kills)\tp50 %.2f s\tp90 %.2f s\tp99 %.2f s\tmax %.2f s\t(analytic max(1.2 × lease TTL, ack wait) = %.1f s)\n",
		rep.Kills, rep.KillToActSP50, rep.KillToActSP90, rep.KillToActSP99, rep.KillToActSMax, rep.ExpectedS)
	fmt.Fprintf(tw, "  takeover\tp50 %.2f s\tp99 %.2f s\t(every partition it held: a survivor holds its lease)\n", rep.TakeoverSP50, rep.TakeoverSP99)
	fmt.Fprintf(tw, "  resume\tp50 %.2f s\tp99 %.2f s\t(every unfinished action: a survivor's first result; %d tasks in flight at the kills)\n",
		rep.ResumeSP50, rep.ResumeSP99, rep.InFlightAtKill)
	fmt.Fprintf(tw, "duplicate tasks\t%d\trefused repeats %d\t(%d actions, %d mutating calls, %d before any action of their guest)\n",
		rep.DuplicateTasks, rep.RefusedRepeats, rep.Actions, rep.Mutations, rep.UnattributedMutations)
	fmt.Fprintf(tw, "handoffs\t%d\tspurious %d\t(actions with results of two executors; spurious: the first was not killed)\n",
		rep.Handoffs, rep.SpuriousRedeliveries)
	if rep.Pauses > 0 {
		fmt.Fprintf(tw, "pauses\t%d of %g s\t%d lost a lease\t(SIGSTOP, then SIGCONT, one executor at a time after the kills)\n",
			rep.Pauses, rep.PauseS, rep.PausesLostLeases)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The JSON too, for the record (-o json prints it alone).
	return json.NewEncoder(out).Encode(rep)
}

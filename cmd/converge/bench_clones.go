package main

import (
	"fmt"
	"runtime"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/internal/bench"
)

// profileClones is issue 42's clone batch (bench.RunClones).
const profileClones = "clones"

// clonesBench holds the clones profile's own flags.
type clonesBench struct {
	o bench.ClonesOptions
}

// The flags the clones profile alone takes.
var clonesOnlyFlags = []string{"clone-storages", "clone-task", "ct-clone-task", "lock-hold", "clone-concurrency", "create-rate"}

// clonesIgnores are the other profiles' flags the clones profile refuses.
var clonesIgnores = append(append(append([]string{}, pipelineOnlyFlags...), failoverOnlyFlags...), "node-rate", "power-task", "baseline-parallelism", "baseline-poll", "limits-off", "verify-wait")

func (c *clonesBench) addFlags(fl *pflag.FlagSet, note func(string)) {
	c.o = bench.DefaultClonesOptions()
	fl.IntVar(&c.o.Storages, "clone-storages", c.o.Storages, "storages the clones go to, at most the simulator's (--profile clones)")
	fl.DurationVar(&c.o.QEMUClone, "clone-task", c.o.QEMUClone, "how long a QEMU clone task (qmclone) runs (--profile clones)")
	fl.DurationVar(&c.o.LXCClone, "ct-clone-task", c.o.LXCClone, "how long a container clone task (vzclone) runs (--profile clones)")
	fl.DurationVar(&c.o.LockHold, "lock-hold", c.o.LockHold, "how long a clone holds its storage's lock, where the simulator models it (--profile clones)")
	fl.Var(&limitInt{n: &c.o.Limits.CloneConcurrency, unlimited: &c.o.Limits.CloneConcurrencyUnlimited, name: "clone-concurrency", note: note}, "clone-concurrency",
		"converge's most clones at once per storage (--profile clones; default the shipped one)")
	fl.Var(&limitInt{n: &c.o.Limits.CreateRate, unlimited: &c.o.Limits.CreateRateUnlimited, name: "create-rate", note: note}, "create-rate",
		"converge's most clones started a minute (--profile clones; default unlimited: the safety brake raised for a planned batch)")
}

// run runs the clones profile; --nodes, --node-concurrency, --api-latency,
// --config-task and --guests are the proxmox profile's flags.
func (c *clonesBench) run(cmd *cobra.Command, g *globals, prox *proxmoxBench, base bench.Options, tty bool) error {
	o := c.o
	fl := cmd.Flags()
	if fl.Changed("guests") {
		o.Guests = base.Guests
	}
	if fl.Changed("nodes") {
		o.Nodes = prox.o.Nodes
	}
	if fl.Changed("node-concurrency") {
		o.Limits.NodeConcurrency = prox.limits.NodeConcurrency
	}
	if fl.Changed("api-latency") {
		o.APILatency = prox.o.APILatency
	}
	if fl.Changed("config-task") {
		o.ConfigWrite = prox.o.ConfigTask
	}
	o.Dir, o.Progress, o.Logger = base.Dir, base.Progress, base.Logger
	if err := o.Validate(); err != nil {
		return usageError{flagError(err)}
	}
	rep, err := bench.RunClones(cmd.Context(), o)
	out, done, err := benchDone(cmd, g, "", tty, rep, err)
	if done {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	lim := func(n int) string {
		if n < 0 {
			return "unlimited"
		}
		return fmt.Sprint(n)
	}
	fmt.Fprintf(tw, "converge bench --profile clones: %d clones (%d QEMU, %d containers; %d full, %d linked) on %d nodes onto %v (%s, %d CPUs, %.0f s)\n",
		rep.Guests, rep.QEMU, rep.LXC, rep.Full, rep.Linked, rep.Nodes, rep.Storages, runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), rep.ElapsedS)
	fmt.Fprintf(tw, "  limits\t--clone-concurrency %s\t--node-concurrency %s\t--create-rate %s (raised: a safety brake)\n",
		lim(rep.CloneConcurrency), lim(rep.NodeConcurrency), lim(rep.CreateRate))
	fmt.Fprintf(tw, "  Proxmox\tclone tasks %g s (QEMU) / %g s (CT)\tstorage lock held %g s (modelled: %v)\tAPI calls %g ms\tconfig writes %g s\n",
		rep.QEMUCloneS, rep.LXCCloneS, rep.LockHoldS, rep.LockModelled, rep.APILatencyMs, rep.ConfigWriteS)
	fmt.Fprintf(tw, "converge\tmakespan %.2f s\tideal %.2f s (%s)\tratio %.3f\n", rep.MakespanS, rep.IdealMakespanS, rep.IdealBound, rep.MakespanRatio)
	fmt.Fprintf(tw, "  tasks\t%d lock timeouts\t%d failed\t%d clone tasks of %d\tat most %d clones at once on a storage\t%d actions, %d Proxmox calls\n",
		rep.LockTimeouts, rep.FailedTasks, rep.CloneTasks, rep.Tasks, rep.MaxClonesPerStorage, rep.Actions, rep.PveCalls)
	fmt.Fprintf(tw, "  container template: clone end → next clone\tp50 %.0f ms\tp90 %.0f ms\tp99 %.0f ms\n", rep.CTTemplateGapMs.P50, rep.CTTemplateGapMs.P90, rep.CTTemplateGapMs.P99)
	return tw.Flush()
}

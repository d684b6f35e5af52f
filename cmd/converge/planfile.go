package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/planfile"
	"github.com/converge-pve/converge/planner"
)

// exitChanges is plan --detailed-exitcode's "publishing the file would
// change something" (docs/exit-codes.md); 0 is no change.
const exitChanges = 6

// planFileFlags are plan -f's flags. The overrides change the policy and
// limits the planner published, and the output says so.
type planFileFlags struct {
	file          string
	detailed      bool
	restart       string
	restartWindow string
	allowDestroy  bool
	guardMin      int
	// Sets and rollbacks (planrevise.go).
	set, toTime string
	prune, move bool
	rollback    int
	to          uint64
}

func addPlanFileFlags(cmd *cobra.Command, f *planFileFlags) {
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "plan this YAML or JSON file of desired states (as desire -f reads it; '-' for stdin) without publishing it")
	fl.BoolVar(&f.detailed, "detailed-exitcode", false, "with -f: exit 0 when publishing the file changes nothing, 6 when it would change something")
	fl.StringVar(&f.restart, "override-restart", "", "with -f: plan as if the planner ran with --restart never|allowed (labelled as an override)")
	fl.StringVar(&f.restartWindow, "override-restart-window", "", "with -f: plan as if the planner's restart window were this (labelled as an override)")
	fl.BoolVar(&f.allowDestroy, "override-allow-destroy", false, "with -f: plan as if the planner ran with --allow-destroy (labelled as an override)")
	fl.IntVar(&f.guardMin, "override-guard-min", 0, "with -f: plan as if the planner's --guard-min were this (labelled as an override)")
}

// override is the Input.Override of the flags given.
func (f *planFileFlags) override(cmd *cobra.Command) func(*planner.Policy, *planner.Limits) []string {
	ch := cmd.Flags().Changed
	return func(p *planner.Policy, l *planner.Limits) []string {
		var out []string
		if ch("override-restart") {
			p.Restart = events.Restart(f.restart)
			out = append(out, "restart="+f.restart)
		}
		if ch("override-restart-window") {
			p.RestartWindow = f.restartWindow
			out = append(out, "restart_window="+f.restartWindow)
		}
		if ch("override-allow-destroy") {
			p.AllowDestroy = f.allowDestroy
			out = append(out, "allow_destroy="+strconv.FormatBool(f.allowDestroy))
		}
		if ch("override-guard-min") {
			l.GuardMin = f.guardMin
			out = append(out, "guard_min="+strconv.Itoa(f.guardMin))
		}
		return out
	}
}

// readPlanFile reads FILE ('-': stdin) into its entries, and what
// desire -f would say of it (parseDesiredFile's verdict: nil when it would
// publish it). Each entry is validated by the plan too, which shows which
// ones the desired contract refuses.
func readPlanFile(path string) (_ []planfile.Entry, refused, _ error) {
	raw, err := readFileArg(path)
	if err != nil {
		return nil, nil, err
	}
	_, refused = parseDesiredFile(path, raw)
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: not YAML or JSON: %w", path, err)
	}
	es, err := planfile.Split(js)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return es, refused, nil
}

// runPlanFile is plan -f: read the file, plan it against the views, print.
func runPlanFile(cmd *cobra.Command, g *globals, f *planFileFlags) error {
	var entries []planfile.Entry
	var refused error
	var err error
	if f.rollback == 0 {
		if entries, refused, err = readPlanFile(f.file); err != nil {
			return usageError{err}
		}
	}
	ctx := cmd.Context()
	b, r, err := openViews(ctx, g, "converge-plan")
	if err != nil {
		return err
	}
	defer b.Close()
	var releases []int
	var notes []string
	switch {
	case f.rollback != 0:
		entries, notes, err = f.rollbackEntry(ctx, g, b, r)
	case f.set != "":
		var setRefused error
		entries, releases, notes, setRefused, err = f.inSet(ctx, r, entries)
		if refused == nil {
			refused = setRefused
		}
	}
	if err != nil {
		return err
	}
	res, err := planfile.FromViews(ctx, r, planfile.Input{Cluster: g.cluster, Entries: entries, Releases: releases, Override: f.override(cmd), Now: time.Now()})
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
	}
	if g.output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		writePlanText(cmd.OutOrStdout(), res)
	}
	if refused != nil {
		// As desire -f would refuse the file, naming each problem.
		return usageError{fmt.Errorf("desire -f would refuse this file: %w", refused)}
	}
	if f.detailed && res.Changes {
		return exitCode{exitChanges, fmt.Errorf("publishing %s would change something (%d action(s) now; --detailed-exitcode: exit %d)", f.file, res.Actions, exitChanges)}
	}
	return nil
}

// writePlanText prints a plan: which policy and limits, a row per action
// (the first runs now, the rest after it), and what each guest waits for.
func writePlanText(w io.Writer, r *planfile.Result) {
	fmt.Fprintf(w, "policy: %s (restart %s", r.PolicySource, r.Policy.Restart)
	if r.Policy.RestartWindow != "" {
		fmt.Fprintf(w, " in %s", r.Policy.RestartWindow)
	}
	fmt.Fprintf(w, ", allow-destroy %t, observe-only %t)\n", r.Policy.AllowDestroy, r.Policy.ObserveOnly)
	nodes := strconv.Itoa(r.Limits.NodeConcurrency)
	if r.Limits.NodeConcurrencyUnlimited {
		nodes = "unlimited"
	}
	fmt.Fprintf(w, "limits: %s (mass-change guard: the larger of %g%% of managed guests and %d disrupted within %s; %s task(s) per node)\n",
		r.LimitsSource, r.Limits.GuardShare*100, r.Limits.GuardMin, r.Limits.GuardWindow, nodes)
	if len(r.Overridden) > 0 {
		fmt.Fprintf(w, "OVERRIDDEN by flags (the live planner does not plan so): %s\n", strings.Join(r.Overridden, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VMID\tDESIRED\tSTATE\tACTION\tWHY")
	for _, gp := range r.Guests {
		desired := gp.Desired
		if len(gp.Changed) > 0 {
			desired += " (" + strings.Join(gp.Changed, ",") + ")"
		}
		switch {
		case len(gp.Rejected) > 0:
			for _, p := range gp.Rejected {
				fmt.Fprintf(tw, "%d\t%s\t%s\t-\t%s: %s\n", gp.VMID, desired, gp.Status.Kind, p.Field, p.Message)
			}
		case len(gp.Steps) == 0:
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t%s\n", gp.VMID, desired, gp.Status.Kind, waitsLabel(gp)+gp.Status.Reason)
		default:
			for i, s := range gp.Steps {
				when, why := "now", s.Reason
				if i > 0 {
					when = "then"
				} else {
					why = waitsLabel(gp) + why
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s %s\t%s\n", gp.VMID, desired, gp.Status.Kind, when, s.Op, why)
			}
		}
	}
	for _, rel := range r.Releases {
		fmt.Fprintf(tw, "%d\treleased\t%s\t-\t%s\n", rel.VMID, rel.Status.Kind, rel.Status.Reason)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d guest(s), %d action(s) now; changes: %t; nothing was published\n", len(r.Guests), r.Actions, r.Changes)
}

func waitsLabel(gp planfile.Guest) string {
	out := ""
	switch gp.Waits {
	case "guard":
		out = "[held by the mass-change guard] "
	case "restart":
		out = "[waits for a restart] "
	case "gate":
		out = "[destroy gate] "
	case "":
	default:
		out = "[waits for " + gp.Waits + "] "
	}
	if gp.Restart {
		out += "[restarts the guest] "
	}
	return out
}

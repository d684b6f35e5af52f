package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

func parseVMIDs(args []string) ([]int, error) {
	var out []int
	for _, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 100 {
			return nil, fmt.Errorf("VMID %q is not a number >= 100", a)
		}
		out = append(out, n)
	}
	return out, nil
}

// openViews connects to NATS as name and returns the bus with a reader of
// the cluster's views; the caller closes the bus. On error nothing is left open.
func openViews(ctx context.Context, g *globals, name string) (*bus.Bus, views.Reader, error) {
	b, err := g.connect(ctx, name)
	if err != nil {
		return nil, views.Reader{}, err
	}
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		b.Close()
		return nil, views.Reader{}, err
	}
	return b, r, nil
}

func viewsReader(ctx context.Context, g *globals, b *bus.Bus) (views.Reader, error) {
	store, err := b.ViewStore()
	if err != nil {
		return views.Reader{}, err
	}
	switch _, ok, err := store.Created(ctx); {
	case err != nil:
		return views.Reader{}, fmt.Errorf("views bucket %q: %w", g.bucket, err)
	case !ok:
		return views.Reader{}, fmt.Errorf("no views bucket %q (has `converge up` or a planner run against this NATS?)", g.bucket)
	}
	return views.Reader{Store: store, Cluster: g.cluster}, nil
}

func newStatusCmd(g *globals) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:   "status [VMID...]",
		Short: "Show each guest's state, kind, name and tags, desired vs observed, last action and error",
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseVMIDs(args)
			if err != nil {
				return usageError{err}
			}
			keep, err := stateFilter(states)
			if err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			b, r, err := openViews(ctx, g, "converge-status")
			if err != nil {
				return err
			}
			defer b.Close()
			var docs []views.GuestDoc
			if len(ids) == 0 {
				if docs, err = r.List(ctx); err != nil {
					return err
				}
			} else {
				for _, id := range ids {
					d, err := r.Guest(ctx, id)
					if err != nil {
						return err
					}
					if d == nil {
						return exitCode{2, fmt.Errorf("no view of guest %d: it has no desired state and was never observed", id)}
					}
					docs = append(docs, *d)
				}
			}
			sums := make([]views.Summary, 0, len(docs))
			for i := range docs {
				if keep == nil || keep[docs[i].Status.Kind] {
					sums = append(sums, views.Summarise(&docs[i]))
				}
			}
			cd, _ := r.ClusterDoc(ctx)
			if g.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"cluster": g.cluster, "planner": cd, "guests": sums})
			}
			printStatus(cmd.OutOrStdout(), sums, cd, time.Now())
			if len(ids) > 0 {
				printAddresses(cmd.OutOrStdout(), sums, time.Now()) // status_addresses.go
			}
			if len(sums) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), noGuestMatched(states, len(docs)))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only guests in these states, comma-separated: "+strings.Join(stateNames(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(stateNames(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// noGuestMatched says why status lists no guest: none in the states
// asked for (of n with a document), or no document at all.
func noGuestMatched(states []string, n int) string {
	if n == 0 {
		return "no guests in the views yet (the planner writes a document for each guest it observes or that has a desired state)"
	}
	return fmt.Sprintf("no guest matched --state %s (%d guest(s) in other states)", strings.Join(states, ","), n)
}

func stateNames() []string {
	out := make([]string, len(planner.StatusKinds))
	for i, s := range planner.StatusKinds {
		out[i] = string(s)
	}
	return out
}

// stateFilter is the set --state names; nil keeps every guest.
func stateFilter(names []string) (map[planner.StatusKind]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := stateNames()
	keep := map[planner.StatusKind]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("--state %q: want one of %s", n, strings.Join(known, ", "))
		}
		keep[planner.StatusKind(n)] = true
	}
	return keep, nil
}

// identity is a guest's kind, name and tags: as observed, else as desired.
func identity(s views.Summary) (kind, name, tags string) {
	kind, name, tags = "-", "-", "-"
	if o := s.Observed; o != nil && o.Exists {
		kind = dash(string(o.Kind))
		name = dash(o.Config.Name)
		if len(o.Config.Tags) > 0 {
			tags = strings.Join(o.Config.Tags, ",")
		}
	}
	if d := s.Desired; d != nil {
		if d.Kind != nil && kind == "-" {
			kind = string(*d.Kind)
		}
		if d.Name != nil && name == "-" {
			name = dash(*d.Name)
		}
		if d.Tags != nil && tags == "-" && len(*d.Tags) > 0 {
			tags = strings.Join(*d.Tags, ",")
		}
	}
	return kind, name, tags
}

func printStatus(w io.Writer, sums []views.Summary, cd *views.ClusterDoc, now time.Time) {
	if cd == nil {
		fmt.Fprintln(w, "no planner has written views yet (is `converge up` or `converge planner` running?)")
	} else if !cd.State.Reachable || cd.State.HeartbeatAt.IsZero() {
		fmt.Fprintf(w, "Proxmox NOT REACHABLE (last heartbeat %s): %s\n", age(now, cd.State.HeartbeatAt), cd.State.Error)
	} else if p := cd.State.VerifyPeriod; p > 0 {
		// What /cluster/resources does not show (pending values, description,
		// onboot) is found within this bound.
		fmt.Fprintf(w, "every guest's config is verified within %s\n", p.Round(time.Second))
	}
	if cd != nil && cd.State.PVE != nil {
		fmt.Fprintln(w, pveLine(cd.State.PVE))
	}
	if len(sums) == 0 {
		return // no table of headers alone: the caller says why
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VMID\tKIND\tNAME\tTAGS\tSTATE\tNODE\tPOWER\tDESIRED\tOBSERVED\tLAST ACTION\tAGE\tREASON")
	for _, s := range sums {
		r := rowOf(s)
		want := desiredSummary(s.Desired)
		kind, name, tags := identity(s)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.VMID, kind, name, tags, s.State, r.node, r.power, want, r.obs, r.last, age(now, s.UpdatedAt), r.reason)
	}
	_ = tw.Flush()
}

// desiredSummary is the DESIRED column: every field the desired state
// manages, compactly ("running 2c 2048M node=pve2 disks=scsi0:32G
// pool=prod net=net0 ci snap=restart"); "-" without one (name and tags
// have their own columns).
func desiredSummary(d *events.Desired) string {
	if d == nil {
		return "-"
	}
	var parts []string
	if d.Power != nil {
		parts = append(parts, string(*d.Power))
	}
	if d.Cores != nil {
		parts = append(parts, fmt.Sprintf("%dc", *d.Cores))
	}
	if d.MemoryMiB != nil {
		parts = append(parts, fmt.Sprintf("%dM", *d.MemoryMiB))
	}
	if d.Absent {
		parts = append(parts, "absent")
	}
	if d.Clone != nil {
		parts = append(parts, fmt.Sprintf("clone=%d", d.Clone.From))
	}
	if d.Node != nil {
		parts = append(parts, "node="+dash(*d.Node))
	}
	if len(d.Disks) > 0 {
		keys := slices.Sorted(maps.Keys(d.Disks))
		disks := make([]string, len(keys))
		for i, k := range keys {
			disks[i] = fmt.Sprintf("%s:%dG", k, d.Disks[k].SizeGiB)
		}
		parts = append(parts, "disks="+strings.Join(disks, ","))
	}
	if d.Pool != nil {
		parts = append(parts, "pool="+dash(*d.Pool))
	}
	if len(d.Net) > 0 {
		parts = append(parts, "net="+strings.Join(slices.Sorted(maps.Keys(d.Net)), ","))
	}
	if d.CloudInit != nil {
		parts = append(parts, "ci")
	}
	if d.OnBoot != nil {
		parts = append(parts, fmt.Sprintf("onboot=%t", *d.OnBoot))
	}
	if len(d.SnapshotBefore) > 0 {
		parts = append(parts, "snap="+strings.Join(d.SnapshotBefore, ","))
	}
	if d.Restart != nil {
		parts = append(parts, "restart="+string(*d.Restart))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// row is what the status and replay tables show of a guest's summary.
type row struct{ node, power, obs, last, task, reason string }

func rowOf(s views.Summary) row {
	r := row{node: "-", power: "-", obs: "-", last: "-", task: "-", reason: s.Reason}
	if o := s.Observed; o != nil {
		r.node, r.power = o.Node, o.Status
		if !o.Exists {
			r.power = "absent"
		} else {
			r.obs = fmt.Sprintf("%dc/%dM", o.Config.Cores, o.Config.MemoryMiB)
			if o.Lock != "" {
				r.obs += " lock:" + o.Lock
			}
			if o.HA != "" {
				// HA, not converge, starts, stops and places it.
				r.obs += " ha: managed (" + o.HA + ")"
				if o.HARule != "" {
					r.obs += " rule:" + o.HARule
				}
			}
			if o.Pool != "" {
				r.obs += " pool:" + o.Pool
			}
		}
	}
	if a := s.Last; a != nil {
		r.last = string(a.Op)
		if a.Result != "" {
			r.last += ":" + string(a.Result)
		}
		r.task = dash(a.UPID)
	}
	if s.LastError != "" && !s.State.Done() && !strings.Contains(r.reason, s.LastError) {
		r.reason += " [last error: " + s.LastError + "]"
	}
	return r
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	default:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
}

// pveLine says what the observer found the cluster runs and how converge
// places HA guests there.
func pveLine(f *events.PVEFacts) string {
	line := "Proxmox VE " + dash(f.Version)
	switch f.HA {
	case events.HARules:
		line += ": HA rules in force (converge places HA guests by node-affinity rules " + events.HARulePrefix + "VMID and never migrates them)"
	case events.HAGroups:
		line += ": HA groups (not rules): converge asks HA to migrate HA guests"
	}
	return line
}

package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/planner"
)

func newPlanCmd(g *globals) *cobra.Command {
	var pf planFileFlags
	cmd := &cobra.Command{
		Use:   "plan [-f FILE [--set NAME [--prune] [--move]] [--detailed-exitcode] | --rollback VMID --to REVISION|--to-time T]",
		Short: "Dry run: the actions that would be planned now, and why (-f: if FILE were published)",
		Long: `Without -f: the actions the live planner would plan now, and why.

With -f FILE (read as desire -f reads it): for each guest of the file, how it
differs from its desired state in force and from Proxmox, the actions that
would run in order, which need a restart and whether the restart policy and
window allow it, which the mass-change guard would hold (the whole file as
one change), which wait for the destroy gate or a node's task slot, and which
values the desired contract rejects. Nothing is published. It plans with the
policy and limits the live planner published (and says which); the
--override-* flags change them, labelled as overrides.

With --set NAME the file is planned as desire -f --set NAME would publish
it (a guest another set holds is refused without --move), and --prune shows
the set's members missing from the file, which it would release (never
destroy). --rollback VMID plans the desired state converge rollback would
publish, with its notes, without publishing it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case pf.file != "" && pf.rollback != 0:
				return usageError{fmt.Errorf("-f and --rollback: plan one or the other")}
			case pf.file != "" || pf.rollback != 0:
				if (pf.prune || pf.move) && pf.set == "" {
					return usageError{fmt.Errorf("--prune and --move need --set NAME")}
				}
				return runPlanFile(cmd, g, &pf)
			}
			for _, name := range []string{"detailed-exitcode", "override-restart", "override-restart-window", "override-allow-destroy", "override-guard-min", "set", "prune", "move", "to", "to-time"} {
				if cmd.Flags().Changed(name) {
					return usageError{fmt.Errorf("--%s needs -f FILE", name)}
				}
			}
			ctx := cmd.Context()
			b, r, err := openViews(ctx, g, "converge-plan")
			if err != nil {
				return err
			}
			defer b.Close()
			docs, err := r.List(ctx)
			if err != nil {
				return err
			}
			cd, err := r.ClusterDoc(ctx)
			if err != nil {
				return err
			}
			if cd == nil {
				return fmt.Errorf("no planner has written views for cluster %q yet", g.cluster)
			}
			// The policy the live planner plans with, as it published it;
			// a planner too old to publish it planned with the defaults.
			pol := planner.DefaultPolicy()
			if cd.Policy != nil {
				pol = *cd.Policy
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), "the planner did not publish its policy (an older converge): planning with the defaults")
			}
			if err := pol.Validate(); err != nil {
				return err
			}
			type row struct {
				VMID   int            `json:"vmid"`
				Status planner.Status `json:"status"`
				Steps  []planner.Step `json:"steps"`
			}
			var rows []row
			now := time.Now()
			for i := range docs {
				d := planner.Plan(docs[i].View, cd.State, pol, now)
				if d.Status.Kind == planner.Unmanaged {
					continue
				}
				rows = append(rows, row{docs[i].View.VMID, d.Status, d.Steps})
			}
			if g.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VMID\tSTATE\tACTION\tWHY")
			n := 0
			for _, r := range rows {
				if len(r.Steps) == 0 {
					if !r.Status.Kind.Done() {
						fmt.Fprintf(tw, "%d\t%s\t-\t%s\n", r.VMID, r.Status.Kind, r.Status.Reason)
					}
					continue
				}
				for i, s := range r.Steps {
					when := "now"
					if i > 0 {
						when = "then"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s %s\t%s\n", r.VMID, r.Status.Kind, when, s.Op, s.Reason)
					n++
				}
			}
			_ = tw.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "%d action(s) for %d managed guest(s)\n", n, len(rows))
			return nil
		},
	}
	addPlanFileFlags(cmd, &pf)
	addPlanReviseFlags(cmd, &pf)
	return cmd
}

func newResyncCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "resync",
		Short: "Ask for a full reconciliation pass now (observer re-reads every guest, planner replans all)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := g.connect(cmd.Context(), "converge-resync")
			if err != nil {
				return err
			}
			defer b.Close()
			seq, err := controlResync(cmd.Context(), b, g.cluster)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"seq": seq})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resync requested (seq %d)\n", seq)
			return nil
		},
	}
}

func controlResync(ctx context.Context, b *bus.Bus, cluster string) (uint64, error) {
	return control.PublishResync(ctx, b, cluster, "converge-cli", time.Now())
}

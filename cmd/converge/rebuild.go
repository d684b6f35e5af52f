package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/planloop"
	"github.com/converge-pve/converge/internal/views"
)

// rebuildReport is what `converge rebuild -o json` prints.
type rebuildReport struct {
	ViewsDropped      bool   `json:"views_dropped"`
	CheckpointDropped bool   `json:"checkpoint_dropped"`
	JournalSeq        uint64 `json:"journal_seq"`
	Rewritten         bool   `json:"rewritten"`
	Guests            int    `json:"guests"`
}

func newRebuildCmd(g *globals) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Drop the materialised views and the planner checkpoint; they are rebuilt from the journal",
		Long: `rebuild deletes the views bucket and the planner's checkpoint and creates an
empty views bucket. The journal is not touched: it is the source of truth.
A running planner notices the new bucket within seconds and rewrites every view
from its fold; a planner started later folds the journal from the start (there
is no checkpoint any more), beginning with what the keep stream holds of events
retention dropped, so every guest's desired state survives (docs/retention.md).
With --wait, rebuild waits for the rewrite.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := g.connect(ctx, "converge-rebuild")
			if err != nil {
				return err
			}
			defer b.Close()
			var rep rebuildReport
			info, err := b.Info(ctx)
			if err != nil {
				return fmt.Errorf("journal stream %q: %w", g.stream, err)
			}
			rep.JournalSeq = info.LastSeq
			store, err := b.ViewStore()
			if err != nil {
				return err
			}
			done, err := views.Rebuild(ctx, store, b.Checkpoints(), planloop.CheckpointName(g.cluster))
			if err != nil {
				return err
			}
			rep.ViewsDropped, rep.CheckpointDropped = done.ViewsDropped, done.CheckpointDropped
			if wait > 0 {
				wctx, cancel := context.WithTimeout(ctx, wait)
				rep.Guests, err = views.WaitRewritten(wctx, views.Reader{Store: store, Cluster: g.cluster}, clock.Real, rep.JournalSeq)
				cancel()
				if err != nil {
					return exitCode{3, fmt.Errorf("views not rewritten within %s: is a planner running?", wait)}
				}
				rep.Rewritten = true
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "views bucket %q: %s\n", g.bucket, map[bool]string{true: "dropped and recreated empty", false: "was missing; created empty"}[rep.ViewsDropped])
			fmt.Fprintf(out, "planner checkpoint: %s\n", map[bool]string{true: "dropped (the next planner start folds the journal from the start)", false: "none"}[rep.CheckpointDropped])
			if rep.Rewritten {
				fmt.Fprintf(out, "views rewritten from the journal (through seq %d): %d guests\n", rep.JournalSeq, rep.Guests)
			} else {
				fmt.Fprintln(out, "a running planner rewrites the views within seconds (use --wait to wait for it)")
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for a running planner to rewrite the views")
	return cmd
}

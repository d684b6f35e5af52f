package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
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
is no checkpoint any more). With --wait, rebuild waits for the rewrite.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := g.connect(ctx, "converge-rebuild")
			if err != nil {
				return err
			}
			defer b.Close()
			var rep rebuildReport
			s, err := b.Stream(ctx)
			if err != nil {
				return fmt.Errorf("journal stream %q: %w", g.stream, err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			rep.JournalSeq = info.State.LastSeq
			switch err := b.JS.DeleteKeyValue(ctx, g.bucket); {
			case err == nil:
				rep.ViewsDropped = true
			case !errors.Is(err, jetstream.ErrBucketNotFound):
				return fmt.Errorf("drop views bucket %q: %w", g.bucket, err)
			}
			if os, err := b.JS.ObjectStore(ctx, planner.CheckpointBucket); err == nil {
				switch err := os.Delete(ctx, planner.CheckpointName(g.cluster)); {
				case err == nil:
					rep.CheckpointDropped = true
				case !errors.Is(err, jetstream.ErrObjectNotFound):
					return fmt.Errorf("drop checkpoint: %w", err)
				}
			} else if !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("checkpoint store: %w", err)
			}
			if err := b.ProvisionViews(ctx); err != nil {
				return fmt.Errorf("recreate views bucket: %w", err)
			}
			if wait > 0 {
				if rep.Guests, err = waitRewritten(ctx, g, b.JS, rep.JournalSeq, wait); err != nil {
					return err
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

// waitRewritten waits until a planner has written the cluster document
// again, at or beyond seq, and its guest views have stopped growing.
func waitRewritten(ctx context.Context, g *globals, js jetstream.JetStream, seq uint64, limit time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	last, stable := -1, 0
	for {
		if kv, err := js.KeyValue(ctx, g.bucket); err == nil {
			r := views.Reader{KV: kv, Cluster: g.cluster}
			if cd, err := r.ClusterDoc(ctx); err == nil && cd != nil && cd.Seq >= seq {
				docs, err := r.List(ctx)
				if err == nil {
					// Views are written at most 1,000 per flush: done when the
					// count holds for a few checks.
					if len(docs) == last {
						if stable++; stable >= 3 {
							return len(docs), nil
						}
					} else {
						last, stable = len(docs), 0
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return 0, exitCode{3, fmt.Errorf("views not rewritten within %s: is a planner running?", limit)}
		case <-time.After(500 * time.Millisecond): // polling the bucket
		}
	}
}

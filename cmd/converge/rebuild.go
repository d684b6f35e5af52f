package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/lease"
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
A running planner notices the new bucket within seconds, rewrites every view
from its fold, and writes a new checkpoint at its next --checkpoint-interval
(or when it stops). With no planner running, the views stay empty until one
starts; it then folds the journal from the start (there is no checkpoint any
more), beginning with what the keep stream holds of events retention dropped,
so every guest's desired state survives (docs/retention.md).
With --wait, rebuild waits for the rewrite; it fails (exit 3) when no planner
of the cluster is running (none in the leases bucket for 10 s), rather than
waiting out the whole timeout.`,
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
				rep.Guests, err = waitRewritten(ctx, b, views.Reader{Store: store, Cluster: g.cluster}, g.cluster, rep.JournalSeq, wait)
				if err != nil {
					return err
				}
				rep.Rewritten = true
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "views bucket %q: %s\n", g.bucket, map[bool]string{true: "dropped and recreated empty", false: "was missing; created empty"}[rep.ViewsDropped])
			fmt.Fprintf(out, "planner checkpoint: %s\n", map[bool]string{true: "dropped", false: "none"}[rep.CheckpointDropped])
			if rep.Rewritten {
				fmt.Fprintf(out, "views rewritten from the journal (through seq %d) by the running planner: %d guests; it writes a new checkpoint at its next --checkpoint-interval, or when it stops\n", rep.JournalSeq, rep.Guests)
			} else {
				n, err := runningPlanners(ctx, b, g.cluster)
				fmt.Fprintln(out, rebuildNext(n, err))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for a running planner to rewrite the views (fails within 10s when no planner is running)")
	return cmd
}

// runningPlanners counts the live planners of cluster: their membership
// keys in the leases bucket (none before any role has run).
func runningPlanners(ctx context.Context, b *bus.Bus, cluster string) (int, error) {
	kv, err := b.JS.KeyValue(ctx, lease.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("leases bucket %s: %w", lease.Bucket, err)
	}
	keys, err := kv.ListKeysFiltered(ctx, lease.MembersFilter(planloop.LeaseGroup(cluster)))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("leases bucket %s: %w", lease.Bucket, err)
	}
	defer func() { _ = keys.Stop() }()
	n := 0
	for range keys.Keys() {
		n++
	}
	return n, ctx.Err() // the lister ends early, without an error, when ctx does
}

// rebuildNext says what happens to the dropped views and checkpoint
// without --wait: it depends on whether a planner runs (n, or err when
// that could not be told).
func rebuildNext(n int, err error) string {
	switch {
	case err != nil:
		return "a running planner rewrites the views within seconds (use --wait to wait for it) and writes a new checkpoint; " +
			"with none running, the next planner to start folds the journal from the start (planners running: unknown, " + err.Error() + ")"
	case n == 0:
		return "no planner is running: the views stay empty until one starts (converge planner, or converge up); it then folds the journal from the start"
	}
	return fmt.Sprintf("%d planner(s) running: they rewrite every view from their fold within seconds (use --wait to wait for it), "+
		"and write a new checkpoint at their next --checkpoint-interval, or when they stop", n)
}

// plannerGrace is how long --wait gives a planner to be seen before it
// says none is running: a planner that systemd is restarting
// (RestartSec=5s) joins within it, and it is far below any useful wait.
// A variable for the tests.
var plannerGrace = 10 * time.Second

// plannerCheck is how often --wait looks for running planners; a live
// planner renews its membership every lease TTL/5 (1 s by default).
const plannerCheck = time.Second

var errNoPlanner = errors.New("no planner is running")

// waitRewritten waits up to wait for a running planner to rewrite the
// views, through seq. It gives up early, with exit status 3, once no
// planner of cluster has been seen for plannerGrace (none ran, or the
// one that did stopped): nothing would rewrite them.
func waitRewritten(ctx context.Context, b *bus.Bus, r views.Reader, cluster string, seq uint64, wait time.Duration) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	wctx, stop := context.WithCancelCause(wctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		seen := time.Now()
		for {
			// An unreadable count is not taken for no planner.
			if n, err := runningPlanners(wctx, b, cluster); n > 0 || (err != nil && wctx.Err() == nil) {
				seen = time.Now()
			}
			if time.Since(seen) >= plannerGrace {
				stop(errNoPlanner)
				return
			}
			if clock.Sleep(wctx, clock.Real, plannerCheck) != nil {
				return
			}
		}
	}()
	n, err := views.WaitRewritten(wctx, r, clock.Real, seq)
	stop(nil)
	<-watched // it uses b, which the caller closes next
	switch {
	case err == nil:
		return n, nil
	case errors.Is(context.Cause(wctx), errNoPlanner):
		return 0, exitCode{3, fmt.Errorf("no planner of cluster %s is running (none in the leases bucket %s for %s), so nothing rewrites the views: "+
			"start one (converge planner, or converge up); it folds the journal from the start and writes every view, "+
			"which converge status then shows", cluster, lease.Bucket, plannerGrace)}
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	return 0, exitCode{3, fmt.Errorf("views not rewritten within %s, although a planner of cluster %s is running: see its log, or wait longer", wait, cluster)}
}

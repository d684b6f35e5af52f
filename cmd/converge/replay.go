package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// progressAbove is the replay length from which a progress bar is drawn
// even when stderr is not a terminal (a long replay in a log says how far
// it got).
const progressAbove = 100_000

func newReplayCmd(g *globals) *cobra.Command {
	var until string
	cmd := &cobra.Command{
		Use:   "replay [--until SEQ|TIME]",
		Short: "The state of every guest as of a point in the journal, rebuilt from the stream alone",
		Long: `Folds the journal from its start into fresh views, exactly as the planner
does, and prints every guest's desired state, observed state, last action
and result, and status, as of --until: a stream sequence, an RFC 3339 time
(or a duration ago, such as 2h), or the end of the journal when omitted.
The status is planned with the default policy at the --until time, or at
the time of the last event folded.

-o json prints one document in the shape of ` + "`converge status -o json`" + `
(plus as_of and the observer's state); -o jsonl one guest per line, each
with its cluster and as_of. A progress bar goes to stderr when stderr is
a terminal or the replay is longer than 100,000 events.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotJSONL: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			pt, err := audit.ParsePoint(until, time.Now())
			if err != nil {
				return usageError{fmt.Errorf("--until: %w", err)}
			}
			ctx := cmd.Context()
			b, err := g.connect(ctx, "converge-replay")
			if err != nil {
				return err
			}
			defer b.Close()
			bar := &replayProgress{w: cmd.ErrOrStderr()}
			auth, err := g.sign.auth(upKeys(g.data))
			if err != nil {
				return err
			}
			// The journal's end before the fold: a --until beyond it (and
			// beyond what the fold reached) replayed the whole journal.
			info, err := b.Info(ctx)
			if err != nil {
				return err
			}
			p, err := audit.FoldUntil(ctx, b.JS, g.stream, g.cluster, pt, bar.update, auth)
			bar.finish()
			if err != nil {
				return err
			}
			asOf := replayAsOf{Seq: p.LastSeq, Time: pt.Time,
				PastEnd: (pt.Seq > info.LastSeq && pt.Seq > p.LastSeq) || pt.Time.After(time.Now())}
			if asOf.Time.IsZero() && p.LastSeq > 0 {
				if asOf.Time, err = audit.EventTime(ctx, b.JS, g.stream, p.LastSeq); err != nil {
					return err
				}
			}
			pol := planner.DefaultPolicy()
			if err := pol.Validate(); err != nil {
				return err
			}
			sums := replaySummaries(p, pol, asOf.Time)
			w := cmd.OutOrStdout()
			switch g.output {
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				doc := replayDoc{Cluster: g.cluster, Stream: g.stream, AsOf: asOf, Observer: p.State, Guests: sums}
				if !pt.IsZero() {
					doc.Until = &pt
				}
				return enc.Encode(doc)
			case "jsonl":
				enc := json.NewEncoder(w)
				for _, s := range sums {
					if err := enc.Encode(replayLine{AsOfSeq: asOf.Seq, AsOf: asOf.Time, Summary: s}); err != nil {
						return err
					}
				}
				return nil
			}
			printReplay(w, g, pt, asOf, p.State, sums)
			return nil
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "replay up to this stream sequence or time (RFC 3339, or a duration ago such as 2h); default: the whole journal")
	return cmd
}

// replayAsOf is where a replay stopped: the last event folded, and the
// time the statuses were planned at.
type replayAsOf struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time,omitzero"`
	// PastEnd: --until named a sequence past the journal's end, or a
	// time to come; the whole journal was replayed.
	PastEnd bool `json:"past_end,omitempty"`
}

type replayDoc struct {
	Cluster  string                 `json:"cluster"`
	Stream   string                 `json:"stream"`
	Until    *audit.Point           `json:"until,omitempty"`
	AsOf     replayAsOf             `json:"as_of"`
	Observer projector.ClusterState `json:"observer"`
	Guests   []views.Summary        `json:"guests"`
}

// replayLine is one guest of -o jsonl: the summary `status -o json` shows,
// and where in the journal it stands.
type replayLine struct {
	AsOfSeq uint64    `json:"as_of_seq"`
	AsOf    time.Time `json:"as_of"`
	views.Summary
}

// replaySummaries plans every folded guest as the planner would at now and
// summarises it as status does, by vmid.
func replaySummaries(p *projector.Projector, pol planner.Policy, now time.Time) []views.Summary {
	ids := make([]int, 0, len(p.Views))
	for id := range p.Views {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	sums := make([]views.Summary, 0, len(ids))
	for _, id := range ids {
		v := p.Views[id]
		d := planner.Plan(v, p.State, pol, now)
		sums = append(sums, views.Summarise(&views.GuestDoc{View: v, Status: d.Status, Next: d.Steps, UpdatedAt: now}))
	}
	return sums
}

func printReplay(w io.Writer, g *globals, pt audit.Point, asOf replayAsOf, st projector.ClusterState, sums []views.Summary) {
	if asOf.Seq == 0 {
		fmt.Fprintf(w, "journal %s has no events up to %s\n", g.stream, pt)
		return
	}
	fmt.Fprintf(w, "cluster %s as of journal %s seq %d (%s)", g.cluster, g.stream, asOf.Seq, asOf.Time.Local().Format(historyTime))
	switch {
	case asOf.PastEnd:
		fmt.Fprintf(w, "; --until %s is past the journal's end (seq %d): replayed the whole journal", pt, asOf.Seq)
	case !pt.IsZero():
		fmt.Fprintf(w, ", replayed up to %s", pt)
	}
	fmt.Fprintln(w)
	switch {
	case st.HeartbeatAt.IsZero():
		fmt.Fprintln(w, "observer: no heartbeat yet")
	case !st.Reachable:
		fmt.Fprintf(w, "observer: Proxmox NOT REACHABLE at %s: %s\n", st.HeartbeatAt.Local().Format(historyTime), st.Error)
	default:
		fmt.Fprintf(w, "observer: Proxmox reachable, last heartbeat %s\n", st.HeartbeatAt.Local().Format(historyTime))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VMID\tSTATE\tNODE\tPOWER\tDESIRED\tREV\tOBSERVED\tLAST ACTION\tTASK\tREASON")
	for _, s := range sums {
		r := rowOf(s)
		want, rev := "-", "-"
		if s.Desired != nil {
			want, rev = audit.DescribeDesired(s.Desired), fmt.Sprint(s.Revision)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.VMID, s.State, r.node, r.power, want, rev, r.obs, r.last, r.task, r.reason)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d guest(s)\n", len(sums))
}

// replayProgress draws a progress bar on stderr once the replay's length
// is known, if stderr is a terminal or the replay is long.
type replayProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
	off bool
}

func (r *replayProgress) update(done, total uint64) {
	if r.off {
		return
	}
	if r.bar == nil {
		f, isFile := r.w.(*os.File)
		if !(isFile && term.IsTerminal(int(f.Fd()))) && total <= progressAbove {
			r.off = true
			return
		}
		r.bar = progressbar.NewOptions64(int64(total), progressbar.OptionSetWriter(r.w), progressbar.OptionSetDescription("replaying"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetPredictTime(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(r.w) }))
	}
	_ = r.bar.Set64(int64(done))
}

func (r *replayProgress) finish() {
	if r.bar != nil && !r.bar.IsFinished() {
		_ = r.bar.Finish()
	}
}

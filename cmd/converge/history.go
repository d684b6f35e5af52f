package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/audit"
)

func newHistoryCmd(g *globals) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "history VMID",
		Short: "A guest's timeline from the journal: desired changes, observations, actions, Proxmox tasks, results",
		Long: `Reads the journal and prints one guest's history in stream order: every
desired change (publisher, correlation id, fields, or why it was rejected),
the observations that mattered (the first, then each that differs from the
one before: existence, power, node, lock, config; identical polls are left
out; with --since, the window's first is "first since …" when the guest
was observed before it), every action (operation, reason, action id,
desired revision, attempt) and result (status, Proxmox task id, error and
its class, warnings and task log, executor).

-o json prints {"vmid":…,"cluster":…,"entries":[…]}; -o jsonl prints one
self-contained JSON object per entry (vmid, cluster, seq, time, kind, who,
correlation_id, task_id, summary, …), for a log store or SIEM.`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{annotJSONL: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseVMIDs(args)
			if err != nil {
				return usageError{err}
			}
			vmid := ids[0]
			var from time.Time
			if since != "" {
				if from, err = audit.ParseTime(since, time.Now()); err != nil {
					return usageError{fmt.Errorf("--since %q: %w", since, err)}
				}
			}
			ctx := cmd.Context()
			b, err := g.connect(ctx, "converge-history")
			if err != nil {
				return err
			}
			defer b.Close()
			auth, err := g.sign.auth(upKeys(g.data))
			if err != nil {
				return err
			}
			es, err := audit.Timeline(ctx, b.JS, g.stream, g.cluster, vmid, 0, from, auth)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch g.output {
			case "json":
				if es == nil {
					es = []audit.Entry{}
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				doc := map[string]any{"vmid": vmid, "cluster": g.cluster, "entries": es}
				if !from.IsZero() {
					doc["since"] = from
				}
				return enc.Encode(doc)
			case "jsonl":
				enc := json.NewEncoder(w)
				for _, e := range es {
					if err := enc.Encode(e); err != nil {
						return err
					}
				}
				return nil
			}
			printHistory(w, g.cluster, vmid, from, es)
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only events stored from then on: RFC 3339 (2026-11-22T10:00:00Z) or a duration ago (2h, 3d)")
	return cmd
}

// historyTime is precise enough to order what happened within a second.
const historyTime = "2006-01-02T15:04:05.000Z07:00"

func printHistory(w io.Writer, cluster string, vmid int, since time.Time, es []audit.Entry) {
	if len(es) == 0 {
		if since.IsZero() {
			fmt.Fprintf(w, "no events of guest %d (cluster %s) in the journal\n", vmid, cluster)
		} else {
			fmt.Fprintf(w, "no events of guest %d (cluster %s) since %s\n", vmid, cluster, since.Format(time.RFC3339))
		}
		return
	}
	// WHAT comes last: it is the long column.
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSEQ\tKIND\tWHO\tCORRELATION\tTASK\tWHAT")
	for _, e := range es {
		kind := string(e.Kind)
		if e.Rejected != "" {
			kind = "desired:rejected"
		}
		if e.Result != nil {
			kind = "result:" + string(e.Result.Status)
		}
		what := e.Summary
		if e.Error != "" {
			what += ": " + e.Error
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format(historyTime), e.Seq, kind, dash(e.Who),
			dash(e.CorrelationID), dash(e.TaskID), what)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d entries for guest %d (cluster %s)\n", len(es), vmid, cluster)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

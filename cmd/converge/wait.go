package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/views"
)

func newWaitCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	var all bool
	var file string
	cmd := &cobra.Command{
		Use:   "wait VMID... | wait --all | wait -f FILE",
		Short: "Exit 0 once all guests are converged; non-zero on timeout or error, saying what is left",
		Long: `Waits until every guest named is converged (or absent, as desired): the
vmids given, the guests of a desired-state file (-f, the format of
desire -f), or every managed guest (--all: each guest with a desired state
journalled before wait started, released guests excluded; each counts once
the planner has folded its newest desired state, so a guest desired a
moment ago is waited for even before its view shows it).

Exit status: 0 converged; 3 timed out (or the watch ended) first, naming
what is left; 4 a guest is error or rejected; 5 a guest waits for an
operator (held, paused, a destroy behind its gate, a change that waits for
a restart under restart: never), named with the reason, at once; 2 a guest
has no desired state or was released, or bad arguments; 1 any other error.`,
		Args: func(_ *cobra.Command, args []string) error {
			n := 0
			for _, on := range []bool{len(args) > 0, all, file != ""} {
				if on {
					n++
				}
			}
			if n != 1 {
				return errors.New("give VMIDs, --all, or -f FILE (one of them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseVMIDs(args)
			if err != nil {
				return usageError{err}
			}
			if file != "" {
				if ids, err = fileVMIDs(file); err != nil {
					return usageError{err}
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			b, err := g.connect(ctx, "converge-wait")
			if err != nil {
				return err
			}
			defer b.Close()
			ws := waitSet{ids: slices.Compact(slices.Sorted(slices.Values(ids))), want: map[int]uint64{}}
			if all {
				// Not bounded by waitStep, unlike startWait's reads: it
				// reads every guest's desired state.
				if ws, err = allGuests(ctx, g, b); err != nil {
					return err
				}
				if len(ws.ids) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no managed guests: nothing to wait for")
					return nil
				}
			}
			if ws.caughtUp, err = foldedSince(ctx, g, b); err != nil {
				return err
			}
			ch, err := startWait(ctx, g, b, ws)
			if err != nil {
				return err
			}
			res, err := awaitConverged(ctx, ws, ch, timeout)
			if err != nil {
				return err
			}
			if g.output == "json" {
				doc := map[string]any{"converged": res.converged}
				if len(res.released) > 0 {
					doc["released"] = res.released
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(doc)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "converged: %d guest(s)", len(res.converged))
			if len(res.released) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), " (released, not waited for: %s)", vmidList(res.released))
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	cmd.Flags().BoolVar(&all, "all", false, "every managed guest: each with a desired state journalled before wait started, released guests excluded")
	cmd.Flags().StringVarP(&file, "file", "f", "", "the guests of this desired-state file (the format of desire -f; '-' for stdin)")
	return cmd
}

// waitSet is what wait waits for: the guests, the desired revision each
// must reflect, and whether it is --all (a released guest is dropped, not
// an error).
type waitSet struct {
	ids  []int
	want map[int]uint64
	all  bool
	// caughtUp reports whether the planner has folded the journal as it
	// was when wait started (nil: take it as so). A guest is failed or
	// waits for an operator only by views that recent: one paused, then
	// resumed just before wait, is still paused in an older view.
	caughtUp func(context.Context) bool
}

// foldedSince is a waitSet.caughtUp for the journal's end now.
func foldedSince(ctx context.Context, g *globals, b *bus.Bus) (func(context.Context) bool, error) {
	info, err := b.Info(ctx)
	if err != nil {
		return nil, err
	}
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) bool {
		cd, err := r.ClusterDoc(ctx)
		return err == nil && cd != nil && cd.Seq >= info.LastSeq
	}, nil
}

// waitResult is how a wait ended well: the guests converged, and those
// --all dropped as released.
type waitResult struct{ converged, released []int }

// failSettle is how long wait, having seen a guest fail or wait for an
// operator, goes on reading the views for the others it has not seen yet,
// to name every such guest at once rather than only the first.
const failSettle = 250 * time.Millisecond

// awaitConverged reads views from ch until every guest of ws is done, one
// is error or rejected (exit 4) or waits for an operator (exit 5: every
// such guest named once all were seen or failSettle passed), one named is
// released (exit 2), ctx ends (exit 3, naming what is left) or ch closes.
func awaitConverged(ctx context.Context, ws waitSet, ch <-chan *views.GuestDoc, timeout time.Duration) (waitResult, error) {
	state := map[int]views.GuestDoc{}
	released := map[int]bool{}
	// Each guest is unseen, released, done or open; counted as documents
	// come, not recounted for each (--all may be 100,000 guests).
	const unseen, rel, done, open = 0, 1, 2, 3
	class, count := map[int]int{}, [4]int{unseen: len(ws.ids)}
	var settle <-chan time.Time // set once a guest failed or needs an operator
	for {
		select {
		case <-ctx.Done():
			if err := stopError(ws.ids, state); err != nil {
				return waitResult{}, err
			}
			return waitResult{}, exitCode{exitNotDone, fmt.Errorf("timed out after %s; not converged: %s", timeout, left(ws, released, state))}
		case <-settle:
			if ws.caughtUp != nil && !ws.caughtUp(ctx) {
				settle = time.After(failSettle) // the views may not show a resume or approval yet
				continue
			}
			if err := stopError(ws.ids, state); err != nil {
				return waitResult{}, err
			}
			settle = nil // moved on meanwhile (approved, resumed …): wait on
		case d, ok := <-ch:
			if !ok {
				if err := stopError(ws.ids, state); err != nil {
					return waitResult{}, err
				}
				return waitResult{}, exitCode{exitNotDone, errors.New("views watch ended; not converged: " + left(ws, released, state))}
			}
			id := d.View.VMID
			if rev, mine := ws.want[id]; !mine || !current(d, rev) {
				continue
			}
			state[id] = *d
			if released[id] = isReleased(d, ws.want[id]); released[id] && !ws.all {
				r := d.View.Released
				return waitResult{}, exitCode{exitUsage, fmt.Errorf("guest %d was released (#%d by %s at %s): it has no desired state; nothing to wait for",
					id, r.Seq, r.By, r.At.Format(time.RFC3339))}
			}
			c := open
			switch {
			case released[id]:
				c = rel
			case d.Status.Kind.Done():
				c = done
			}
			count[class[id]]--
			class[id] = c
			count[c]++
			if settle == nil && (failed(d) || operatorOnly(d) != "") {
				settle = time.After(failSettle)
			}
		}
		if settle != nil && count[unseen] == 0 && (ws.caughtUp == nil || ws.caughtUp(ctx)) {
			// Every guest has been seen: no other failure to wait for.
			if err := stopError(ws.ids, state); err != nil {
				return waitResult{}, err
			}
			settle = nil
		}
		if settle == nil && count[done] == len(ws.ids)-count[rel] {
			var res waitResult
			for _, id := range ws.ids {
				if released[id] {
					res.released = append(res.released, id)
				} else {
					res.converged = append(res.converged, id)
				}
			}
			return res, nil
		}
	}
}

// fileVMIDs are the vmids of a desired-state file, validated as desire -f
// validates it.
func fileVMIDs(path string) ([]int, error) {
	bodies, err := readDesiredFile(path)
	if err != nil {
		return nil, fmt.Errorf("-f %w", err)
	}
	seen := map[int]bool{}
	var ids []int
	for _, d := range bodies {
		if !seen[d.vmid] {
			seen[d.vmid] = true
			ids = append(ids, d.vmid)
		}
	}
	return ids, nil
}

// allGuests is the set of wait --all: every guest with a desired event
// journalled up to the journal's end as wait starts, each with its newest
// desired revision. It is read from the journal, not from the views: a
// guest desired a moment ago (new, or released and desired again) has no
// document, or an unmanaged one, until the planner folds it. A guest
// released since is dropped once its document shows it (awaitConverged).
func allGuests(ctx context.Context, g *globals, b *bus.Bus) (waitSet, error) {
	ws := waitSet{want: map[int]uint64{}, all: true}
	info, err := b.Info(ctx)
	if err != nil {
		return ws, err
	}
	filter := events.Prefix + "." + string(events.KindDesired) + "." + g.cluster + ".>"
	err = b.LastPerSubject(ctx, filter, func(e journal.Entry) {
		si, err := events.ParseSubject(e.Subject)
		// An event under another partition than its guest's is never
		// folded (events.CheckPartition): nothing to wait for.
		if err != nil || si.VMID == 0 || e.Subject != b.StoredSubject(events.KindDesired, g.cluster, si.VMID) {
			return
		}
		ws.want[si.VMID] = max(ws.want[si.VMID], e.Seq)
	})
	if err != nil {
		return ws, fmt.Errorf("desired states in the journal: %w", err)
	}
	for id, seq := range ws.want {
		if seq <= info.LastSeq {
			continue
		}
		// Desired again since wait started: in the set only if it was
		// desired before.
		first, err := b.Next(ctx, events.KindDesired, g.cluster, id, 1)
		if err != nil {
			return ws, err
		}
		if first == nil || first.Seq > info.LastSeq {
			delete(ws.want, id)
		}
	}
	if info.FirstSeq > 1 {
		// The journal's start is gone (retention; expired observations
		// alone also move it): it may have held a guest's only desired
		// events (the keep stream holds them), which its document has.
		if err := documentedRevisions(ctx, g, b, ws.want); err != nil {
			return ws, err
		}
	}
	for id := range ws.want {
		ws.ids = append(ws.ids, id)
	}
	slices.Sort(ws.ids)
	return ws, nil
}

// documentedRevisions adds to want the guests whose documents have a
// desired state (or a rejected one) that want lacks, at that revision.
func documentedRevisions(ctx context.Context, g *globals, b *bus.Bus, want map[int]uint64) error {
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		return err
	}
	docs, err := r.List(ctx)
	if err != nil {
		return err
	}
	for _, d := range docs {
		v := d.View
		if _, ok := want[v.VMID]; ok || (v.Desired == nil && v.Rejected == nil) {
			continue
		}
		want[v.VMID] = v.DesiredSeq
		if v.Rejected != nil {
			want[v.VMID] = max(v.DesiredSeq, v.Rejected.Seq)
		}
	}
	return nil
}

// waitStep bounds one attempt at setting up the wait. Right after a NATS
// node dies a request can go unanswered for good (a stream still without
// a leader, a watch consumer placed on the dead node): without a bound it
// would use up the whole --timeout.
const waitStep = 10 * time.Second

// startWait reads the newest desired revision of every guest of ws that
// has none yet and starts watching the views, again if an attempt takes
// longer than waitStep or meets a transient JetStream error.
func startWait(ctx context.Context, g *globals, b *bus.Bus, ws waitSet) (<-chan *views.GuestDoc, error) {
	for {
		actx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(waitStep, cancel)
		ch, err := setUpWait(actx, g, b, ws)
		inTime := timer.Stop()
		if err == nil && inTime {
			// The watch lives as long as the command.
			context.AfterFunc(ctx, cancel)
			return ch, nil
		}
		cancel()
		if ctx.Err() != nil || (inTime && !bus.IsTransient(err)) {
			return nil, err
		}
	}
}

func setUpWait(ctx context.Context, g *globals, b *bus.Bus, ws waitSet) (<-chan *views.GuestDoc, error) {
	// A guest counts only once its view reflects the newest desired
	// revision in the journal: a view flushed before `desire` must not
	// pass for converged.
	for _, id := range ws.ids {
		if _, ok := ws.want[id]; ok {
			continue
		}
		last, err := b.Lasts(ctx, g.cluster, id, events.KindDesired)
		if err != nil {
			return nil, err
		}
		if last[0] == nil {
			return nil, exitCode{exitUsage, fmt.Errorf("guest %d has no desired state; nothing to wait for", id)}
		}
		ws.want[id] = last[0].Seq
	}
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		return nil, err
	}
	return r.Watch(ctx)
}

// current reports whether a guest's document reflects its desired
// revision rev: that revision (accepted or rejected) or a newer one, or a
// release after it.
func current(d *views.GuestDoc, rev uint64) bool {
	v := d.View
	return v.DesiredSeq >= rev || (v.Rejected != nil && v.Rejected.Seq >= rev) || (v.Released != nil && v.Released.Seq > rev)
}

// left names what a wait that ran out still waited for, the first
// maxListed guests of it.
func left(ws waitSet, released map[int]bool, state map[int]views.GuestDoc) string {
	var parts []string
	for _, id := range ws.ids {
		s, ok := state[id]
		switch {
		case released[id]:
		case !ok:
			parts = append(parts, fmt.Sprintf("%d (planner has not processed revision %d yet)", id, ws.want[id]))
		case !s.Status.Kind.Done():
			parts = append(parts, fmt.Sprintf("%d %s: %s", id, s.Status.Kind, cut(reasonOf(s))))
		}
	}
	if n := len(parts); n > maxListed {
		return strings.Join(parts[:maxListed], "; ") + fmt.Sprintf("; and %d more (converge status)", n-maxListed)
	}
	return strings.Join(parts, "; ")
}

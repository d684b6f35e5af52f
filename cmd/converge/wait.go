package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

func newWaitCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	var all bool
	var file string
	cmd := &cobra.Command{
		Use:   "wait VMID... | wait --all | wait -f FILE",
		Short: "Exit 0 once all guests are converged; non-zero on timeout or error, saying what is left",
		Long: `Waits until every guest named is converged (or absent, as desired): the
vmids given, every managed guest (--all: each with a desired state), or
the guests of a desired-state file (-f, the format of desire -f).

Exit status: 0 converged; 3 timed out (or the watch ended) first, naming
what is left; 4 a guest is error or rejected; 2 a guest has no desired
state, or bad arguments; 1 any other error.`,
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
			if all {
				if ids, err = managedVMIDs(ctx, g, b); err != nil {
					return err
				}
				if len(ids) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no managed guests: nothing to wait for")
					return nil
				}
			}
			want, ch, err := startWait(ctx, g, b, ids)
			if err != nil {
				return err
			}
			converged, err := awaitConverged(ctx, ids, want, ch, timeout)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"converged": converged})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "converged: %d guest(s)\n", len(converged))
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	cmd.Flags().BoolVar(&all, "all", false, "every managed guest (each with a desired state)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "the guests of this desired-state file (the format of desire -f; '-' for stdin)")
	return cmd
}

// failSettle is how long wait, having seen a guest fail, goes on reading
// the views for the others it has not seen yet, to name every guest in
// error at once rather than only the first.
const failSettle = 250 * time.Millisecond

// awaitConverged reads views from ch until every guest of ids is done
// (returning ids), one is error or rejected (exit 4, naming every one
// that is), ctx ends (exit 3, naming what is left) or ch closes.
func awaitConverged(ctx context.Context, ids []int, want map[int]uint64, ch <-chan *views.GuestDoc, timeout time.Duration) ([]int, error) {
	state := map[int]views.GuestDoc{}
	var settle <-chan time.Time // set once a guest failed
	for {
		select {
		case <-ctx.Done():
			if settle != nil {
				return nil, exitCode{exitGuestFailed, errors.New(failedGuests(ids, state))}
			}
			return nil, exitCode{exitNotDone, fmt.Errorf("timed out after %s; not converged: %s", timeout, left(ids, want, state))}
		case <-settle:
			return nil, exitCode{exitGuestFailed, errors.New(failedGuests(ids, state))}
		case d, ok := <-ch:
			if !ok {
				if settle != nil {
					return nil, exitCode{exitGuestFailed, errors.New(failedGuests(ids, state))}
				}
				return nil, exitCode{exitNotDone, errors.New("views watch ended; not converged: " + left(ids, want, state))}
			}
			id := d.View.VMID
			if _, mine := want[id]; !mine || !current(d, want[id]) {
				continue
			}
			state[id] = *d
			if failed(d) && settle == nil {
				settle = time.After(failSettle)
			}
			done, seen := 0, 0
			for _, id := range ids {
				if s, ok := state[id]; ok {
					seen++
					if s.Status.Kind.Done() {
						done++
					}
				}
			}
			switch {
			case settle != nil && seen == len(ids):
				// Every guest has been seen: no other failure to wait for.
				return nil, exitCode{exitGuestFailed, errors.New(failedGuests(ids, state))}
			case settle == nil && done == len(ids):
				return ids, nil
			}
		}
	}
}

func failed(d *views.GuestDoc) bool {
	return d.Status.Kind == planner.Error || d.Status.Kind == planner.Rejected
}

// failedGuests names every guest in error or rejected, each with its
// reason (and last error, as status shows it).
func failedGuests(ids []int, state map[int]views.GuestDoc) string {
	var parts []string
	for _, id := range ids {
		if d, ok := state[id]; ok && failed(&d) {
			parts = append(parts, fmt.Sprintf("guest %d is %s: %s", id, d.Status.Kind, reasonOf(d)))
		}
	}
	return strings.Join(parts, "; ")
}

// reasonOf is a guest's status reason with its last error, as status
// shows it.
func reasonOf(d views.GuestDoc) string { return rowOf(views.Summarise(&d)).reason }

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

// managedVMIDs are the guests with a desired state in the views.
func managedVMIDs(ctx context.Context, g *globals, b *bus.Bus) ([]int, error) {
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		return nil, err
	}
	docs, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, d := range docs {
		if d.View.Desired != nil && d.Status.Kind != planner.Unmanaged {
			ids = append(ids, d.View.VMID)
		}
	}
	sort.Ints(ids)
	return ids, nil
}

// waitStep bounds one attempt at setting up the wait. Right after a NATS
// node dies a request can go unanswered for good (a stream still without
// a leader, a watch consumer placed on the dead node): without a bound it
// would use up the whole --timeout.
const waitStep = 10 * time.Second

// startWait reads the newest desired revision of every guest and starts
// watching the views, again if an attempt takes longer than waitStep or
// meets a transient JetStream error.
func startWait(ctx context.Context, g *globals, b *bus.Bus, ids []int) (map[int]uint64, <-chan *views.GuestDoc, error) {
	for {
		actx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(waitStep, cancel)
		want, ch, err := setUpWait(actx, g, b, ids)
		inTime := timer.Stop()
		if err == nil && inTime {
			// The watch lives as long as the command.
			context.AfterFunc(ctx, cancel)
			return want, ch, nil
		}
		cancel()
		if ctx.Err() != nil || (inTime && !bus.IsTransient(err)) {
			return nil, nil, err
		}
	}
}

func setUpWait(ctx context.Context, g *globals, b *bus.Bus, ids []int) (map[int]uint64, <-chan *views.GuestDoc, error) {
	// A guest counts only once its view reflects the newest desired
	// revision in the journal: a view flushed before `desire` must not
	// pass for converged.
	want := map[int]uint64{}
	for _, id := range ids {
		last, err := b.Lasts(ctx, g.cluster, id, events.KindDesired)
		if err != nil {
			return nil, nil, err
		}
		if last[0] == nil {
			return nil, nil, exitCode{exitUsage, fmt.Errorf("guest %d has no desired state; nothing to wait for", id)}
		}
		want[id] = last[0].Seq
	}
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		return nil, nil, err
	}
	ch, err := r.Watch(ctx)
	if err != nil {
		return nil, nil, err
	}
	return want, ch, nil
}

func current(d *views.GuestDoc, rev uint64) bool {
	v := d.View
	return v.DesiredSeq >= rev || (v.Rejected != nil && v.Rejected.Seq >= rev)
}

func left(ids []int, want map[int]uint64, state map[int]views.GuestDoc) string {
	var parts []string
	for _, id := range ids {
		s, ok := state[id]
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%d (planner has not processed revision %d yet)", id, want[id]))
		case !s.Status.Kind.Done():
			parts = append(parts, fmt.Sprintf("%d %s: %s", id, s.Status.Kind, reasonOf(s)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

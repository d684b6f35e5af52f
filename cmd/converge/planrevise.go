package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/planfile"
	"github.com/converge-pve/converge/internal/revise"
	"github.com/converge-pve/converge/internal/views"
)

// What plan shows of sets and rollbacks before they are made: plan -f
// FILE --set NAME [--prune] [--move] plans the file as desire -f would
// publish it in that set, with the releases --prune would make; plan
// --rollback VMID --to REVISION|--to-time T plans the desired state a
// rollback would publish (internal/revise computes both, as the commands
// that make them do).

// addPlanReviseFlags adds plan's set and rollback flags.
func addPlanReviseFlags(cmd *cobra.Command, f *planFileFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.set, "set", "", "with -f: plan the file as desire -f --set NAME would publish it")
	fl.BoolVar(&f.prune, "prune", false, "with -f --set: show the members of the set missing from the file that --prune would release")
	fl.BoolVar(&f.move, "move", false, "with -f --set: as desire's --move, guests of another set join this one")
	fl.IntVar(&f.rollback, "rollback", 0, "plan the rollback of this guest (with --to or --to-time) without publishing it")
	fl.Uint64Var(&f.to, "to", 0, "with --rollback: the revision to restore")
	fl.StringVar(&f.toTime, "to-time", "", "with --rollback: restore the revision in force then (RFC 3339 or a duration ago)")
}

// inSet rewrites entries as members of f.set and says which guests
// --prune would release; refused is what desire -f --set would refuse.
func (f *planFileFlags) inSet(ctx context.Context, r views.Reader, entries []planfile.Entry) (_ []planfile.Entry, releases []int, notes []string, refused error, _ error) {
	file := make([]*events.Desired, 0, len(entries))
	for _, e := range entries {
		d, err := events.DecodeDesired(e.Body, e.VMID)
		if err != nil {
			return entries, nil, nil, nil, nil // the plan shows it rejected
		}
		file = append(file, d)
	}
	if err := revise.InSet(f.set, file); err != nil {
		return nil, nil, nil, nil, usageError{err}
	}
	current, err := revise.Currents(ctx, r)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if cs := revise.SetConflicts(file, current); len(cs) > 0 && !f.move {
		refused = fmt.Errorf("%v (desire --move takes them into set %s)", cs, f.set)
	}
	out := make([]planfile.Entry, 0, len(file))
	for _, d := range file {
		body, err := events.Encode(d)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		out = append(out, planfile.Entry{VMID: d.VMID, Body: body})
	}
	if f.prune {
		for _, rl := range revise.SetReleases(f.set, file, current) {
			releases = append(releases, rl.VMID)
			notes = append(notes, fmt.Sprintf("--prune releases %d: %s", rl.VMID, rl.Reason))
		}
	}
	return out, releases, notes, refused, nil
}

// rollbackEntry is the desired state plan --rollback plans: the one
// converge rollback would publish, and what it notes.
func (f *planFileFlags) rollbackEntry(ctx context.Context, g *globals, b *bus.Bus, r views.Reader) ([]planfile.Entry, []string, error) {
	if (f.to == 0) == (f.toTime == "") {
		return nil, nil, usageError{fmt.Errorf("--rollback %d: give --to REVISION or --to-time T (one of them)", f.rollback)}
	}
	to := f.to
	if f.toTime != "" {
		at, err := audit.ParseTime(f.toTime, time.Now())
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("--to-time %q: %w", f.toTime, err)}
		}
		if to, err = revise.RevisionAt(ctx, b, g.cluster, f.rollback, at); err != nil {
			return nil, nil, err
		}
	}
	var cur revise.Current
	var obs *events.Observed
	doc, err := r.Guest(ctx, f.rollback)
	if err != nil {
		return nil, nil, err
	}
	if doc != nil && doc.View != nil {
		cur = revise.Current{Desired: doc.View.Desired, Seq: doc.View.DesiredSeq}
		obs = doc.View.Observed
	}
	rb, err := revise.PlanRollback(ctx, b, g.cluster, f.rollback, to, cur, obs)
	if err != nil {
		return nil, nil, err
	}
	body, err := events.Encode(rb.Desired)
	if err != nil {
		return nil, nil, err
	}
	notes := []string{fmt.Sprintf("rollback of %d to revision %d (from revision %d), not published", f.rollback, rb.To, rb.From)}
	for _, n := range rb.Notes {
		notes = append(notes, "rollback: "+n)
	}
	return []planfile.Entry{{VMID: f.rollback, Body: body}}, notes, nil
}

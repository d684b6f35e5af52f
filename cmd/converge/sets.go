package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/revise"
	"github.com/converge-pve/converge/internal/views"
)

// desireSet publishes bodies as members of set f.set (internal/revise):
// refused before anything is published when another set holds a guest
// (without --move) or, with --prune, when this NATS user may not release.
func desireSet(cmd *cobra.Command, g *globals, b *bus.Bus, f *desireFlags, bodies []desiredBody, key ed25519.PrivateKey, pub string) error {
	ctx := cmd.Context()
	file := make([]*events.Desired, 0, len(bodies))
	for _, body := range bodies {
		d, err := events.DecodeDesired(body.body, body.vmid)
		if err != nil {
			return usageError{err}
		}
		file = append(file, d)
	}
	r, err := viewsReader(ctx, g, b)
	if err != nil {
		return err
	}
	if f.prune {
		// Refused before anything is published, and before the views are
		// waited for.
		if err := revise.MayRelease(ctx, b, g.cluster); err != nil {
			return err
		}
		if err := viewsCurrent(ctx, g, b, r); err != nil {
			return err
		}
	}
	current, err := revise.Currents(ctx, r)
	if err != nil {
		return err
	}
	o := revise.SetOptions{Cluster: g.cluster, Set: f.set, Prune: f.prune, Move: f.move, Publisher: pub, CorrelationID: f.correlation}
	if key != nil {
		o.Sign = func(m *events.Message) error { return events.SignMessage(m, key, f.keyID, time.Now()) }
	}
	res, err := revise.PublishSet(ctx, b, current, file, o)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if g.output == "json" {
		return json.NewEncoder(w).Encode(res)
	}
	signed := "unsigned (planners run with --require-signed reject it)"
	if key != nil {
		signed = "signed by " + f.keyID
	}
	for _, p := range res.Published {
		fmt.Fprintf(w, "desired state of %d journalled in set %s: revision %d, %s\n", p.VMID, f.set, p.Seq, signed)
	}
	for _, rl := range res.Releases {
		fmt.Fprintf(w, "released %d: %s (journalled as #%d)\n", rl.VMID, rl.Reason, res.ReleaseSeq)
	}
	if f.prune && len(res.Releases) == 0 {
		fmt.Fprintf(w, "--prune: every member of set %s is in the file, nothing released\n", f.set)
	}
	return nil
}

// viewsStale bounds how long a set's publish waits for the planner's
// views to reflect the journal.
var viewsStale = 15 * time.Second

// viewsCurrent waits until the planner has folded the journal as it is
// now: set membership is read from the views, and one behind the journal
// (a guest just moved to another set, or published without one) would
// have --prune release a guest that is no longer the set's, or keep one
// that is.
func viewsCurrent(ctx context.Context, g *globals, b *bus.Bus, r views.Reader) error {
	if cd, err := r.ClusterDoc(ctx); err != nil {
		return err
	} else if cd == nil {
		return fmt.Errorf("no planner has written views for cluster %q: --prune cannot tell the set's members; nothing was published", g.cluster)
	}
	caughtUp, err := foldedSince(ctx, g, b)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(viewsStale)
	for !caughtUp(ctx) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the planner's views are behind the journal (is a planner running?): set membership cannot be read safely, nothing was published")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling the views, not timing
		}
	}
	return nil
}

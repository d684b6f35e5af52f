package main

import (
	"crypto/ed25519"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/revise"
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

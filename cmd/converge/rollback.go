package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/revise"
)

func newRollbackCmd(g *globals) *cobra.Command {
	var to uint64
	var toTime, publisher, correlation, signKey, keyID string
	cmd := &cobra.Command{
		Use:   "rollback VMID --to REVISION | --to-time T",
		Short: "Publish the desired state a guest had at an earlier revision as a new revision",
		Long: `Publishes the desired state of revision REVISION (the journal sequence
desire printed; converge history VMID lists them as desired entries) or the
one in force at T, as a new revision journalled as a rollback: headers
Converge-Rollback-To (the revision restored) and Converge-Rollback-From
(the revision it replaces), and the publisher who asked. A revision that
retention has dropped fails with the reason. Disks never shrink: a disk
larger now keeps its size, and the rollback says so. The guest's set stays
as it is. With planners that require signed desired events, sign with
--sign-key as for desire.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("want exactly one VMID")
			}
			if (to == 0) == (toTime == "") {
				return errors.New("give --to REVISION or --to-time T (one of them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseVMIDs(args)
			if err != nil {
				return usageError{err}
			}
			vmid := ids[0]
			var at time.Time
			if toTime != "" {
				if at, err = audit.ParseTime(toTime, time.Now()); err != nil {
					return usageError{fmt.Errorf("--to-time %q: %w", toTime, err)}
				}
			}
			var key ed25519.PrivateKey
			if signKey != "" {
				if key, keyID, err = loadSigningKey(signKey, keyID); err != nil {
					return usageError{err}
				}
			}
			if publisher == "" {
				publisher = operator()
			}
			ctx := cmd.Context()
			b, r, err := openViews(ctx, g, "converge-rollback")
			if err != nil {
				return err
			}
			defer b.Close()
			if to == 0 {
				if to, err = revise.RevisionAt(ctx, b, g.cluster, vmid, at); err != nil {
					return err
				}
			}
			var cur revise.Current
			var obs *events.Observed
			doc, err := r.Guest(ctx, vmid)
			if err != nil {
				return err
			}
			if doc != nil && doc.View != nil {
				cur = revise.Current{Desired: doc.View.Desired, Seq: doc.View.DesiredSeq}
				obs = doc.View.Observed
			}
			rb, err := revise.PlanRollback(ctx, b, g.cluster, vmid, to, cur, obs)
			if err != nil {
				return err
			}
			m, err := rb.Message(g.cluster, publisher, correlation)
			if err != nil {
				return err
			}
			if key != nil {
				if err := events.SignMessage(&m, key, keyID, time.Now()); err != nil {
					return err
				}
			}
			ack, err := b.Append(ctx, m, journal.Expect{})
			if err != nil {
				return fmt.Errorf("publish the rollback of %d: %w", vmid, err)
			}
			w := cmd.OutOrStdout()
			if g.output == "json" {
				return json.NewEncoder(w).Encode(map[string]any{"vmid": vmid, "seq": ack.Seq, "to": rb.To, "from": rb.From, "by": publisher, "notes": rb.Notes})
			}
			from := "no desired state"
			if rb.From != 0 {
				from = fmt.Sprintf("revision %d", rb.From)
			}
			fmt.Fprintf(w, "guest %d rolled back to revision %d (from %s) by %s: journalled as revision %d\n", vmid, rb.To, from, publisher, ack.Seq)
			for _, n := range rb.Notes {
				fmt.Fprintln(w, "  note:", n)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&to, "to", 0, "the revision to restore: a journal sequence of the guest's desired events (converge history VMID)")
	fl.StringVar(&toTime, "to-time", "", "restore the revision in force then: RFC 3339 (2026-11-22T10:00:00Z) or a duration ago (2h, 3d)")
	fl.StringVar(&publisher, "publisher", "", "who asks (default converge-cli:$USER)")
	fl.StringVar(&correlation, "correlation-id", "", "correlation id linking this change to what it causes")
	fl.StringVar(&signKey, "sign-key", "", "sign with this ed25519 private key (PEM, from converge keygen; env CONVERGE_SIGN_KEY)")
	fl.StringVar(&keyID, "key-id", "", "the signing key's id (default: the key file's name without extension)")
	return cmd
}

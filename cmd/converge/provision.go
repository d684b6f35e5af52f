package main

import (
	"fmt"
	"time"

	"github.com/converge-pve/converge/internal/bus"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/executor"
)

// newProvisionCmd creates what converge keeps in NATS, for deployments
// whose roles run as users that may not create streams or buckets
// (deploy/nats): run it once with the admin user.
func newProvisionCmd(g *globals) *cobra.Command {
	var (
		leaseTTL       = executor.DefaultLeaseTTL
		retentionAge   time.Duration
		retentionBytes int64
	)
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create the journal (with its keep stream when it has retention limits) and the views, leases, checkpoint and limits buckets (run with NATS admin credentials)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The roles may not change the journal: its limits are set
			// here, and the keep stream made for them (docs/retention.md).
			// Without the flags, an existing journal keeps the limits it
			// has: provisioning again for another setting (--lease-ttl,
			// --replicas) must not drop them.
			unset := !cmd.Flags().Changed("retention-age") && !cmd.Flags().Changed("retention-bytes")
			b, err := g.connectWith(cmd.Context(), "converge-provision", func(c *bus.Config) {
				c.MaxAge, c.MaxBytes, c.LimitsUnset = retentionAge, retentionBytes, unset
			})
			if err != nil {
				return err
			}
			defer b.Close()
			if err := b.Provision(cmd.Context()); err != nil {
				return err
			}
			if _, err := b.LeaseStore(cmd.Context(), leaseTTL, g.replicas); err != nil {
				return err
			}
			if err := b.Checkpoints().Open(cmd.Context()); err != nil {
				return err
			}
			if _, err := b.LimitsStore(cmd.Context(), g.replicas); err != nil {
				return err
			}
			keep := ""
			if ok, err := b.HasKeepStream(cmd.Context()); err != nil {
				return err
			} else if ok {
				keep = fmt.Sprintf(" (and %s)", b.KeepStream())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "provisioned: stream %s%s, buckets %s, converge_leases, converge_checkpoints, %s\n",
				g.stream, keep, g.bucket, bus.LimitsBucket)
			return nil
		},
	}
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", leaseTTL, "the leases bucket's TTL (the roles' --lease-ttl)")
	cmd.Flags().DurationVar(&retentionAge, "retention-age", 0, "keep journal events this long (0: no age limit); give the roles the same")
	cmd.Flags().Int64Var(&retentionBytes, "retention-bytes", 0, "keep at most this many bytes of journal, oldest dropped first (0: no size limit); give the roles the same")
	return cmd
}

package main

import (
	"fmt"
	"github.com/converge-pve/converge/internal/bus"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/executor"
)

// newProvisionCmd creates what converge keeps in NATS, for deployments
// whose roles run as users that may not create streams or buckets
// (deploy/nats): run it once with the admin user.
func newProvisionCmd(g *globals) *cobra.Command {
	var leaseTTL = executor.DefaultLeaseTTL
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create the journal, its keep stream and the views, leases, checkpoint and limits buckets (run with NATS admin credentials)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := g.connect(cmd.Context(), "converge-provision")
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
			fmt.Fprintf(cmd.OutOrStdout(), "provisioned: stream %s (and %s_KEEP), buckets %s, converge_leases, converge_checkpoints, %s\n",
				g.stream, g.stream, g.bucket, bus.LimitsBucket)
			return nil
		},
	}
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", leaseTTL, "the leases bucket's TTL (the roles' --lease-ttl)")
	return cmd
}

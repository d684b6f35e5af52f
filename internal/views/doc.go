// Package views owns the per-guest documents the planner materialises, so
// that status, wait, plan and the HTTP API answer without replaying the
// journal: their schema ([GuestDoc], [ClusterDoc], keys), the [Writer]
// that writes a planner's flushes off its loop, the [Reader], the
// bucket's watch ([WatchBucket]: a dropped bucket is recreated and every
// document written again) and [Rebuild]. It reaches NATS only through a
// [Store] (bus.ViewStore).
//
// A missing document means the planner has not seen the guest (or has not
// run yet), never that the guest is gone. The cluster document carries
// the policy the planner plans with, so that `converge plan` decides as
// the live planner does.
package views

// Package views owns the per-guest documents the planner materialises, so
// that status, wait, plan and the HTTP API answer without replaying the
// journal: their schema ([GuestDoc], [ClusterDoc], keys), the [Writer]
// that writes a planner's flushes off its loop, the [Reader], the
// bucket's watch ([WatchBucket]: a dropped bucket is recreated and every
// document written again) and [Rebuild]. It reaches NATS only through a
// [Store] (bus.ViewStore).
//
// Documents are bounded: one over [MaxDocBytes] (256 KiB, below NATS's
// 1 MiB message limit) has its long strings cut, or is replaced by a
// minimal one with the guest's state, and is marked truncated. A write
// that fails is logged once per run of failures, counted
// (Writer.Failures, Writer.Unwritten) and handed back for rewriting after
// a backoff that doubles up to 256 s ([WriteBackoff]), never at every
// flush.
//
// A missing document means the planner has not seen the guest (or has not
// run yet), never that the guest is gone. The cluster document carries
// the policy the planner plans with, so that `converge plan` decides as
// the live planner does.
package views

// Package views reads the per-guest documents the planner materialises in
// the projection bucket, so that status, wait, plan and the HTTP API answer
// without replaying the journal. A missing document means the planner has
// not seen the guest (or has not run yet), never that the guest is gone.
package views

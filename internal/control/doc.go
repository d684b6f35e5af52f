// Package control carries converge's control requests (today: resync, "do a
// full reconciliation pass now") between roles.
//
// Requests are journalled like every other event (pve.control.<cluster>),
// so the planner sees them in order in the stream; roles that only need to
// react (the observer re-reading every guest) receive them live over core
// NATS through a watermill Router, with panic recovery and correlation ids.
// Handling is idempotent: two resyncs in a row cost one extra pass, nothing
// else, so at-least-once, unordered delivery is enough here.
package control

// Package projector folds converge's events into per-guest views (desired,
// observed, in-flight action, last result, retry state) and cluster state
// (observer heartbeats), and materialises the views for queries.
//
// # Determinism
//
// [Projector.Apply] is a pure fold: it reads only the event (its stream
// sequence, subject, headers, body and the times written inside it), never
// the clock. The same events in the same order give the same views, so
// replaying the journal rebuilds exactly what the live planner holds
// (DESIGN.md §4, invariant 5). Anything that depends on the current time,
// such as a silent observer, is decided by [Assess] at query time.
//
// # Rules
//
//   - A valid desired event replaces the desired state and resets retries;
//     an invalid one is recorded as a rejection and changes nothing else.
//   - Observations are ordered by the time Proxmox was read, not by publish
//     order: an older read never replaces a newer one.
//   - An action is in flight from its publication until a final result
//     with its id; results embed a fresh observation.
//   - Failures count against the desired revision they were planned from;
//     a new revision starts from zero.
package projector

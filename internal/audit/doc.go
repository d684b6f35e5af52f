// Package audit reads converge's journal (the JetStream stream, "PVE" by
// default) for audit and point-in-time replay (docs/operations.md: `converge
// history`, `converge replay`). It only reads: nothing here publishes,
// acknowledges or changes a consumer that a role uses.
//
// # Timeline
//
// [Timeline] returns one guest's history in stream order: desired changes
// (publisher, correlation id, the fields, a rollback's "rollback to
// revision N (from M)", or the reason a change was rejected, decided exactly as package projector decides it), the
// observations that mattered (the first one, then each whose normalised
// state differs from the previous observation: existence, power, node,
// lock, kind, template, managed config, pending values; identical polls
// and digest-only changes are left out; from a time on, the first in the
// window is called "first seen" only if the journal holds no observation
// of the guest stored before it), actions and results (status,
// UPID, node, warnings, task log, error and its class, executor; the
// read-back a result embeds is left out) and the guest agent's addresses
// as the observer reported each change ("guest agent addresses: eth0
// 192.0.2.5/24", or unknown with the reason). It reads the guest's
// literal stored subjects (pve.<kind>.<cluster>.<vmid>.<partition>) with
// an ordered consumer, never a wildcard filter, and stops at the last of
// the guest's events that existed when it started.
//
// # Replay
//
// [FoldUntil] folds the journal from its first event up to a [Point] (a
// stream sequence, a stream time, or both; the whole stream when zero)
// into a fresh [projector.Projector], decoding batches in parallel as the
// planner does while it catches up. Because the fold is deterministic
// (package projector), the result is the state the live planner held at
// that point (invariant 5). A time is resolved to the last sequence stored
// at or before it; stream times are the leader's store times, which grow
// with the sequence.
//
// Times are stream (store) times, not the times written inside events.
package audit

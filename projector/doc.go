// Package projector folds converge's events into per-guest views (desired
// state, newest observation, in-flight action, last result, retry state)
// and the cluster's state (observer heartbeats, resync requests). It
// imports only events. The planner plans from its views; package views
// writes them as documents for queries; `converge replay` and the audit
// read side fold the journal with it.
//
// # Determinism
//
// [Projector.Apply] is a pure fold: it reads only the event (its stream
// sequence, subject, headers, body and the times written inside it), never
// the clock. The same events in the same order, folded with the same
// settings (Partitions, and Auth: the signing settings), give the same
// views, so replaying the journal with the planner's settings rebuilds
// exactly what the live planner holds (docs/architecture.md, invariant 5).
// Anything that depends on the current time, such as a silent observer,
// is decided by planner.Plan, which is given the time.
//
// # Rules
//
//   - A valid desired event replaces the desired state and resets retries;
//     an invalid one is recorded as a rejection and changes nothing else.
//   - Observations are ordered by the journal, never by readers' clocks
//     ([Supersedes]): an executor's read-back in a result follows its own
//     action and is always adopted, read or derived from the action's
//     basis (AfterSeq set), over any observation journalled while the
//     action ran (read concurrently, maybe before its outcome: it would
//     have the planner repeat the action); an observer's snapshot
//     replaces the current observation only if its reader knew that
//     observation's sequence before reading (Observed.AfterSeq), so a
//     read that may predate an action never rolls the view back.
//     Unstamped observations (other publishers) fall back to read_at. An
//     observation whose read_at is more than [MaxReadAhead] ahead of the
//     journal's time is refused (View.RefusedObservation says why).
//     Heartbeats count at the journal's time.
//   - Results of the current revision feed the planner's loop guard:
//     View.Burst counts actions that finished without failing within
//     [BurstWindow]; View.Repeats counts consecutive outcomes that changed
//     nothing (already done, skipped, digest conflict). Backoff and burst
//     times are the journal's.
//   - An action is in flight from its publication until a final result
//     with its id; results embed a fresh observation.
//   - Failures count against the desired revision they were planned from;
//     a new revision starts from zero. A terminal or unauthorized failure
//     (events.ErrorClass.Terminal) is not retried.
//   - A guest agent's addresses (pve.addresses) are informational: the
//     newest journalled report becomes View.Addresses (AddressesSeq), and
//     nothing else changes; Change.Info, not Change.View, reports it, so
//     the planner rewrites the guest's document without planning it. They
//     are never an observation: no basis, no fence moves (addresses.go).
//   - Events already folded (by sequence) and other clusters' events are
//     ignored, so a batch may be delivered twice.
//   - With Projector.Partitions set (the planner and replays set it), an
//     event stored under another partition than its guest's is not folded
//     (Change.Err): it skipped the journal's partition transform, and no
//     partition's reader or fence would see it.
//
// # Signatures and read-backs
//
// With [Projector.Auth] set (signed mode, docs/signing.md), a desired
// event is accepted only if a trusted key signed its published subject,
// publisher header and exact body within the window of its journal time,
// and its signature was not folded before for that guest (the seen
// signatures are part of the view, so checkpoints keep them); with
// Auth.Require, unsigned events are rejected too. Rejections carry the
// reason; View.SignedBy names the key of the accepted event. The settings
// judge every desired event whenever it was journalled: turned on (or
// keys changed), an unsigned desired state already in force is rejected
// as if it had just arrived, by the live planner (see Snapshots), a
// rebuild and a replay alike. A result's read-back replaces the
// observation only when the result is for the guest's own in-flight or
// last action.
//
// # Snapshots
//
// [Projector.Snapshot] copies the fold as of its last sequence; [Restore]
// continues from one. Snapshots are versioned ([SnapshotVersion]): a
// snapshot of another version is refused, and the journal folded from
// the start instead. A snapshot records the digest of the signing
// settings it was folded under ([Auth.Digest]); Restore refuses it under
// other settings ([ErrSigningChanged]), and the journal is folded from
// the start: re-checking only the desired state in force could not bring
// back the signed revision an unsigned one replaced, so only a refold
// gives the views a fold of the whole journal gives. The planner
// checkpoints them.
//
// # Decoding
//
// [Predecode] decodes a batch of events on several goroutines before they
// are folded in order (decoding is pure; folding stays sequential).
package projector

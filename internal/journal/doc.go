// Package journal names what converge's roles need from the journal, the
// JetStream stream that holds every event (docs/architecture.md): small interfaces,
// each for one role's use of it, and the entry type they exchange. The
// roles depend on these, never on a NATS connection; internal/bus
// implements them over JetStream, and package journaltest in memory for
// scenario tests.
//
// # Roles
//
//   - [Reader]: direct reads of a guest's newest entries, the next entry at
//     or after a sequence, an entry by sequence (the executor's fences and
//     its record of an action).
//   - [Appender]: publishes, optionally fenced: with [Expect.Fenced] the
//     write succeeds only if the subject's newest entry is still
//     [Expect.LastSubjectSeq] ([ErrFenced] otherwise), and with
//     [Expect.MsgID] a repeat within the stream's dedupe window is a
//     duplicate, not a second entry.
//   - [AsyncAppender]: the same without waiting, for the planner's actions
//     and the observer's snapshots.
//   - [KindReader]: a cluster's first entry of one kind at or after a
//     sequence, whatever the guest (the observer's look for desired
//     guests its last pass did not list).
//   - [Follower]: every entry after a sequence, in order (the planner's fold).
//   - [Kept]: every guest's newest desired events, actions and results,
//     whatever the journal's retention dropped, under their journal
//     sequences (the planner's fold across a retention gap).
//
// # Subjects
//
// Entries carry their stored subject (with the partition token the
// stream's subject transform adds, events.StoredSubject); publishes name
// the plain subject (events.Subject).
package journal

// Package planloop is the planner role's I/O loop around planner.Engine:
// it follows the journal (journal.Follower) and feeds the engine its
// events, ticks of its clock, the partitions its lease manager wins, and
// what became of its publishes, document writes and checkpoints; it
// carries out each planner.Ready the engine answers with, in the order the
// engine documents: publish the actions (fenced, asynchronously,
// journal.AsyncAppender), hand the documents to the views writer (package
// views), write the checkpoint (zstd-compressed JSON in a
// CheckpointStore), join the partition group once caught up.
//
// Everything that decides is in the engine, and scenario-tested there; the
// loop only moves data between it and NATS, so it is tested against an
// embedded server.
//
// # Start and stop
//
// [Loop.Run] restores the newest usable checkpoint (same cluster and
// stream, not beyond its end, not of a stream since recreated). If the
// journal now starts after the checkpoint (or, with none, after 1),
// retention dropped events the fold needs: it folds first what the
// journal keeps of them (journal.Kept: every guest's newest desired
// events, actions and results, under their own sequences), then follows
// the journal from its first event; otherwise from the event after the
// checkpoint; kept entries the journal held at start but dropped before
// the feed read them are folded where the feed skips them. It is
// [Loop.Ready] once the engine caught up. An action
// whose predecessor retention dropped is fenced on an empty subject
// (docs/retention.md). When
// its context ends it flushes the documents still to write, leaves the
// partition group, waits for a checkpoint being written, writes a last one
// if the fold advanced, and lets the writer finish (at most five seconds).
//
// # Rejections and unwritten documents
//
// Rejected desired events of the guests this planner writes documents for
// are logged once each (vmid, seq, publisher, reason), at most one line a
// second after a burst of ten, the rest counted
// (converge_rejected_events_total). Documents the writer could
// not write come back after its backoff (views.WriteBackoff), not at every
// flush; the writer's failures are metrics (converge_views_*).
//
// # Metrics
//
// Besides those above: converge_guests{state} and
// converge_guests_out_of_sync (every guest's state as this planner's fold
// has it, set at each flush), converge_held_actions,
// converge_convergence_seconds (Ready.Converged: once per desired
// revision, by the guest's owner), converge_partitions_owned
// {role="planner"}, and converge_consumer_pending{consumer="planner"}, the
// entries the journal held after the last batch folded.
//
// # Views bucket
//
// The loop watches the views bucket (views.WatchBucket): a bucket dropped
// or replaced (converge rebuild) is recreated, and every document this
// planner owns is written again from the fold.
package planloop

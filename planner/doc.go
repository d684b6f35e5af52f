// Package planner decides what converge does to each guest. It is pure: it
// imports only events and projector, does no I/O, reads no clock, logs
// nothing and starts no goroutine.
//
// # Plan
//
// [Plan] takes a guest's [projector.View], the cluster's observation
// state, a [Policy] and the current time, and returns a [Decision]: the
// guest's [Status] and the minimal ordered [Step]s that would bring
// Proxmox to the desired state, each with a human-readable reason. It is
// property-tested and used for dry runs (`converge plan`).
//
// Plan never acts on a guest without desired state (invariant 7), never
// while Proxmox is unreachable or the observer is silent (invariant 6:
// status blocked, never "gone"), never while an action is in flight, never
// on a locked guest (it waits), never from a rejected desired event (nor
// from one that did not state the guest's kind and holds a value the
// observed kind refuses, events.Desired.CheckKind: status rejected), and
// never stops a guest whose desired power is running. Retries back off
// exponentially with deterministic jitter ([Policy.Backoff]), keyed to
// the desired revision: a new revision starts again. Outcomes that change
// nothing (already done, skipped, repeated digest conflicts) back off the
// same way from the second in a row, and a revision whose actions keep
// finishing without converging the guest stops at [Policy.MaxBurst]
// actions per window with status error and the reason: a loop is visible
// and slow, never a flood.
//
// A guest whose view carries a pause (or the cluster's pause --all) is
// planned as usual but acted on by nobody: status paused, with what would
// follow. A released guest has no desired state: unmanaged.
//
// Changes Proxmox keeps pending until a restart are applied by a clean
// reboot only when the restart policy allows it (the desired event's
// restart, else [Policy.Restart], "never" by default), and inside
// [Policy.RestartWindow] if one is set; otherwise the guest is pending,
// "waits for a restart", with the keys (and, for a closed window, when it
// opens, as RetryAt).
//
// # Limits
//
// The engine applies [Limits] to the first step of each guest it would
// publish: at most NodeConcurrency node tasks in flight per node (power
// tasks, clones, destroys, snapshots, resizes, a migration on both nodes;
// config writes take none; from the fold: every planner's actions),
// guests beyond waiting in line per node,
// first come first served (a change whose first step takes no slot but
// whose node task is to come, a config write then its start or reboot,
// begins only when the guests holding the node's slots and those begun
// there are fewer than twice NodeConcurrency, and takes the next free slot
// first: begun.go); and the mass-change guard: beyond
// max(GuardShare × managed guests, GuardMin) guests shut down, stopped or
// rebooted within GuardWindow, or while more managed guests than that
// vanished from the observed inventory within it, a disruptive step is held:
// a hold (events.OpHold) is handed out in its place and, once folded
// (projector.View.Held), stands until an approval journalled after it names the
// guest (or all): status held, whatever the clock ([projector.View.HoldInForce]).
// A held plan's config write, if any, still goes ahead ([Deferrable]). What two planners decide at once is settled by the
// limits ledger the loop asks before publishing ([Publish.Claims], [Grant],
// [Engine.Live], [Engine.Refused]).
//
// A guest that does not exist (projector.View.Missing: gone, or not listed
// by a complete observer pass begun after its desired state) is cloned
// from its template when the desired state has clone, else an error with
// the reason; one that exists but was not created by converge
// (events.Observed.Owned) is never cloned onto. A guest desired absent is
// destroyed (out of HA, shut down, deleted) only through the destroy gate:
// [Policy.AllowDestroy] for the guests converge created, an approval naming
// the guest for any other, never a protected guest; otherwise blocked with
// the condition that holds it. Clones wait for the creation limits
// ([Limits] CloneConcurrency, CreateRate, MaxGuests, and one clone at a
// time per container template).
//
// An HA-managed guest is started, stopped and moved by HA, never by
// converge: its power through its HA state, its node, under HA groups, by
// asking HA to migrate it and, under PVE 9's HA rules (the observation
// carries events.HAPlacement), by the node-affinity rule converge owns for
// it (events.HARuleName; never an operator's rule, which leaves an allowed
// node to HA and blocks the guest on any other).
//
// A managed value is compared with what the guest will run with after its
// next restart: the pending value if Proxmox holds one, the applied one
// otherwise. A desired value that is only pending is not rewritten (it
// waits for a restart, or a reboot the policy allows); a pending value
// that differs from the desired one is drift: when the applied value is
// the desired one, the step is a set_config that only reverts the pending
// value (Step.Revert, Proxmox's revert parameter; no reboot follows),
// otherwise a config write like any other.
//
// # Engine
//
// [Engine] is the planner as a state machine, in the manner of etcd raft's
// Ready/Advance: its inputs are journal events ([Engine.Fold]), ticks
// ([Engine.Tick]), lease changes ([Engine.Acquired]; the partitions held
// are asked of an [Owner]) and what became of its own output
// ([Engine.Published], [Engine.PublishFailed], [Engine.Unwritten],
// [Engine.CheckpointWritten]); its output is a [Ready] the caller (the I/O
// loop, internal/planloop) takes with [Engine.Ready] and carries out.
// Scenario tests (testdata/*.txtar) drive it with scripted inputs and
// check its Ready, in microseconds.
//
// # Ordering rules
//
//  1. At most one action per guest is in flight: once an action is handed
//     out, the guest is not planned again until that action is folded
//     from the journal (and then its final result), or its publish is
//     reported failed.
//  2. Fence before publish: every [Publish] carries the sequence of the
//     guest's newest action as the engine folded it (ExpectLastSeq) and a
//     deterministic id (cluster, vmid, desired revision, the revision's
//     action count). The loop publishes it with
//     Nats-Expected-Last-Subject-Sequence and Nats-Msg-Id, so a planner
//     whose fold is behind (another planner acted, or it restarted) cannot
//     publish a second action, and a replan of the same step is a
//     duplicate.
//  3. A publish that fails (refused by its fence, failed, or not
//     acknowledged in time) frees the guest and replans it at once from
//     the fold; one that could not even be sent frees it to be replanned
//     on its next event or pass.
//  4. A guest is planned again when one of its events is folded, when its
//     retry falls due (Tick), when observations turn stale or fresh, on a
//     resync request and every FullPassInterval (every guest), and when its
//     partition is won. Its guest agent addresses (projector.Change.Info)
//     are not such an event: they change its document only.
//  5. Caught up first: nothing is planned until the fold reaches where the
//     journal ended at [Engine.Begin]; then every guest is planned once.
//     More than a thousand events behind (a burst), folding comes first and
//     each touched guest is planned once on its newest desired state, when
//     the engine is close behind again or after at most half a second.
//  6. Documents are handed out only for guests whose status changed and
//     whose partition this planner holds, at most a thousand per flush;
//     what the writer could not take is handed out again later.
//  7. A checkpoint (the fold as a projector.Snapshot) is handed out at
//     most every CheckpointInterval when the fold advanced, one at a time.
package planner

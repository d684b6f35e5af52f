// Package executor runs planned actions against Proxmox VE and journals
// what it did as result events: intent and the Proxmox task id (UPID)
// before waiting, the outcome after.
//
// # Usage
//
//	cfg := executor.DefaultConfig() // a zero field is refused, not defaulted
//	cfg.Cluster, cfg.Name = "pve", "executor@"+host
//	ex, err := executor.New(cfg, pveClient, b, b.LeaseStore)
//	...
//	err = ex.Run(ctx) // until ctx ends; then drains in-flight actions
//
// The executor reaches NATS only through its [Journal] (direct reads,
// fenced appends, the partitions' work consumers: *bus.Bus) and a lease
// store, and time only through Config.Clock.
//
// # Consumption and scale-out
//
// Executors of a cluster form a group (package lease, group
// "executor-<cluster>"): the stream's partitions (events.Partition of
// cluster and vmid) are shared among the live executors, each partition
// owned by one at a time, balanced, moving to survivors within about the
// lease TTL when an owner dies and to a newcomer when one joins (the old
// owner stops taking the partition's actions and finishes the in-flight
// ones before handing it over). An owner consumes its partition through a
// durable pull consumer <group>-pNN ([Executor.WorkSpec]) filtered to
// pve.action.<cluster>.*.<NN>, with explicit acks, AckWait (InProgress
// every AckWait/3 while an action is handled, so long tasks keep their
// message; a dead owner's un-acknowledged actions come back after AckWait
// to the partition's next owner), MaxAckPending = Config.Concurrency and
// unlimited redelivery. Each delivery is handled in its own goroutine, so
// one guest's long or failing task never holds up another guest of the same
// partition; Config.Concurrency bounds the actions in progress in the
// process.
//
// Ownership is not trusted blindly (a lease is not exclusive across a stall
// longer than its TTL). An executor checks that it still holds the
// action's partition right before issuing the mutation, and every result it
// journals must directly follow the guest's newest result it has read
// (Nats-Expected-Last-Subject-Sequence on the guest's result subject): a
// late write of an executor that lost the partition is refused, and it
// abandons the action to the new owner. When a lease is lost, its
// partition's in-flight actions are cancelled at once.
//
// Per-guest order holds by construction: the planner keeps at most one
// unfinished action per guest, so a guest's next action is not even in the
// stream before the previous one's final result is. The executor still
// serialises actions of one vmid with an in-process lock, and ignores a
// redelivery of an action it is still handling (that handler acknowledges
// the message).
//
// # Crash-safety protocol
//
// For each delivered action, in this order:
//
//  1. Decode. An undecodable action, or one whose body disagrees with its
//     subject, is terminated (Term) and logged: no redelivery can help. A
//     hold (events.OpHold, the planner's record of a step the mass-change
//     guard holds) is acknowledged: it asks for nothing and has no result.
//  2. Journal check. The guest's results after the action (up to a newer
//     action of the guest, if any) are read. A final result for the action
//     means it was handled before a crash: acknowledge, done. A "started"
//     result carrying a UPID means a predecessor issued the mutation: resume
//     at step 6 with that task, never issuing the mutation again, but only
//     if the result is for this action, guest and operation and its UPID
//     names a task of that operation on this guest and node (verify.go);
//     otherwise the action is skipped as not following from the journal.
//  3. Fence (invariant 2). The action is skipped (final result "skipped",
//     with the reason) if a newer action of the guest exists, if an accepted
//     desired event of the guest follows Action.DesiredSeq (a desired event
//     the projector rejects supersedes nothing), or if an observation of the
//     guest follows Action.BasisSeq that the projector would adopt over the
//     basis (read at or after it). All are direct gets on the stream.
//     Then operators' requests journalled after Action.FoldSeq (what the
//     planner had folded): a pause of the guest or of all guests not
//     resumed since, or a release, skips the action with the reason.
//     Then verification (verify.go): the action runs only if it follows
//     from the journal. Its operation is one the planner plans (never a
//     bare stop), its keys are ones converge manages (name, description,
//     tags, cores, memory, onboot: never hookscript, protection, startup),
//     Action.DesiredSeq is an accepted desired event of this guest (folded
//     by the same projector the planner uses), Action.ObservationSeq (or
//     BasisSeq) an observation or read-back of this guest, and
//     planner.Plan under Config.Policy (the planner's policy: the same
//     flags) produces exactly this action from them. Otherwise it is
//     skipped with "does not follow from the journal: …" and nothing
//     reaches Proxmox. The two entries are usually the newest ones the
//     journal check already read: no extra round trip.
//  4. Adopt (redeliveries only, when the Proxmox implements [TaskFinder], as
//     *pve.Client does): a task of the action's operation on the guest,
//     started since the action was planned (in whole seconds), was issued by
//     a predecessor that died before journalling it: continue at step 6 with
//     it. If the lookup fails, the pre-check below decides instead, but
//     not for a reboot: a guest reads as running before and after one,
//     so it is never rebooted on a guess. A transient failure leaves the
//     action un-acknowledged for its redelivery to look again (after the
//     ack wait); any other ends it failed, not rebooted.
//  5. Pre-check and mutate. For a redelivered start, stop, shutdown or
//     reboot (its mutation may have been made before a crash), a
//     container's reboot (pve-container reboots a locked container) and a
//     reboot whose basis is not running, the guest's status is read
//     first: already in the wanted state is
//     "succeeded" with the reason "already running"/"already stopped" and
//     no mutation; a Proxmox lock (other than "suspended") is "skipped"
//     with error class "locked", which the planner waits out. A first
//     delivery of a verified start, stop, shutdown or VM reboot (of a
//     running VM) trusts its basis (the newest reading, by the fence) and
//     saves the call: Proxmox answers a start of a running guest with
//     "already running" (already-done), a reboot of a stopped one with
//     "not running" (terminal), and refuses a locked one ("locked"). set_config carries the planned
//     config digest instead: a stale write is refused by Proxmox (class
//     "conflict"); one planned from a derived read-back (below) has none,
//     so the config is read first, and the write is skipped as superseded
//     if what converge manages changed since, or else made with the digest
//     just read. Then the mutation is issued exactly once (shutdown with
//     forceStop after Action.Timeout). A failure is classified by
//     internal/pve: "already-done" is success with Proxmox's message as the
//     reason; an indeterminate failure (the request may have taken effect) is
//     "failed" with class "transient" and a fresh read-back, so the planner
//     re-plans from what Proxmox shows; any other is "failed" with its class.
//  6. Journal the task (invariant 3). A non-zero task is journalled as a
//     "started" result with its UPID and node, and the stream's
//     acknowledgement is awaited before the task is. A call Proxmox
//     completed synchronously has no task and no "started": a config
//     write without drives (a PUT), and a QEMU drive change whose task
//     finished within background_delay (pve.Config.ConfigTaskWait, 5 s; a
//     failed one fails the call with the task's exit status). Then the task is waited
//     on (InProgress heartbeats keep the message). Its exit status decides:
//     OK is "succeeded", "WARNINGS: n" is "succeeded" with Warnings and the
//     task log, anything else "failed" with the classified error and log.
//     While Proxmox cannot be asked, waiting continues: the task runs on
//     regardless.
//  7. Read back the guest (status and config) into an events.Observed
//     (source "executor", ReadAt taken before the reads) embedded in the
//     final result; it is left out if the read fails. Where the outcome is
//     known, it is derived instead (readback.go): after a synchronous
//     config write of keys Proxmox applies at once (name, description,
//     tags, onboot; cores and memory of a guest whose status, read after
//     the write, is stopped) from a basis with nothing pending, the basis
//     with the written values and digest "" (unknown); after a start, stop
//     or shutdown of a guest with nothing converge manages pending, the
//     status read and the basis's config, digest ""; after a start that
//     booted the guest or a reboot, of a guest whose pending values are
//     all of those keys, the status read (running) and the basis's config
//     with them applied (a boot applies the pending section), digest "".
//     A derived
//     observation carries AfterSeq, the newest journal sequence read
//     before acting; it is derived only if no observation of the guest
//     was journalled after that (else the guest is read), and the
//     projector adopts it as a read one.
//  8. Journal the final result (Nats-Msg-Id "res-<action id>-final", so a
//     redone action does not journal twice within the dedupe window), wait
//     for the stream's acknowledgement, and only then acknowledge the action
//     (double ack). If the result cannot be journalled the action is not
//     acknowledged: its redelivery finds the journal as it is and resumes.
//
// Results carry the action's correlation id, the executor's name, the
// operation, the action id, the vmid and the cluster.
//
// # Failure windows
//
// A crash (or a lost connection) at any point leaves the action
// un-acknowledged, and it is redelivered after AckWait:
//
//   - before the mutation: nothing happened; the action runs normally;
//   - after Proxmox accepted the mutation but before its task was
//     journalled: the redelivery adopts the task through a [TaskFinder];
//     without one, the pre-check finds a start or stop already done, and a
//     set_config's digest no longer matches (failed "conflict"; the planner
//     re-plans from a fresh observation and finds nothing left to do);
//   - after "started" was journalled: the redelivery waits on the journalled
//     task and reports its outcome; it never issues the mutation again;
//   - after the final result was journalled: the redelivery acknowledges.
//
// # Shutdown
//
// When Run's context ends it stops pulling, lets in-flight actions finish
// for up to Config.DrainTimeout, then cancels them. A cancelled action
// journals nothing more (no final result is ever made up) and stays
// un-acknowledged, to be resumed from the journal by whichever executor
// gets it next.
//
// # Metrics
//
// [Metrics] (Config.Metrics, one per process): converge_actions_total
// {op,result,class} and converge_action_duration_seconds{op}, recorded
// when a final result is journalled (not when one is found journalled:
// a redelivery after a crash is not counted twice), the duration from the
// delivery; converge_pve_reachable{role="executor"}, whether Proxmox
// answered the last call made for them (their own, or their process's
// inventory calls: Metrics.Answered); and, read at scrape,
// converge_partitions_owned{role="executor"} and each owned partition
// consumer's converge_consumer_pending and converge_consumer_ack_pending
// (journal.Backlog).
//
// # Testing
//
// Scenario tests (testdata/*.txtar) hand deliveries to [Executor.Handle]
// from an in-memory journal (journaltest), against a scripted Proxmox, on
// a fake clock: the protocol above, crashes included, in milliseconds.
// Integration tests run it against an embedded JetStream server per test
// (internal/bus/bustest) and the Proxmox simulator (internal/pvesim) over
// HTTP; the crash test re-executes the test binary as an executor process
// and kills it with SIGKILL mid-task.
package executor

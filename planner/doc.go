// Package planner decides what converge does to each guest.
//
// [Plan] is pure: from a guest's [projector.View], the cluster's
// observation state, a [Policy] and the current time it returns a
// [Decision] — the guest's status and the minimal ordered actions that
// would bring Proxmox to the desired state, each with a human-readable
// reason. It does no I/O, reads no clock and logs nothing, so it can be
// property-tested and used for dry runs (`converge plan`).
//
// Plan never acts on a guest without desired state (invariant 7), never
// while Proxmox is unreachable or the observer is silent (invariant 6:
// status blocked, never "gone"), never while an action is in flight, never
// on a locked guest (it waits), never from a rejected desired event, and
// never stops a guest whose desired power is running.
//
// [Service] runs Plan: it folds the journal with package projector, keeps
// at most one action in flight per guest, publishes the first planned
// action fenced by the guest's last action sequence and with a
// deterministic Nats-Msg-Id (so a restarted planner never plans twice),
// retries failures with jittered exponential backoff tied to the desired
// revision, and materialises views for status queries. It plans a guest as
// each of its events is folded, except while it is more than a thousand
// events behind the journal (a burst of desired changes): then it folds
// first and plans each touched guest once, on its newest desired state,
// when it is close behind again or after at most half a second, so that
// it does not act on a state the journal already supersedes.
//
// Several planners may run (scale-out, or a standby). Each folds the whole
// journal, and once caught up joins the lease group "planner-<cluster>"
// (package lease): the guests' partitions are shared among the live
// planners, and a planner publishes actions and writes view documents only
// for guests of partitions it holds (checked before each publish). A
// partition it wins, from a planner that died or gave it up, has all its
// guests planned at once. Two planners acting on one guest during a
// hand-over cannot both plan: the action subject's sequence fence lets only
// one publish through, and the deterministic Nats-Msg-Id turns a replan of
// the same step into a duplicate.
package planner

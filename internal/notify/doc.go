// Package notify routes converge's events to webhooks where operators
// already look (Slack-compatible {"text": …} and generic JSON):
// `converge notify --config FILE`, or inside `converge up
// --notify-config FILE`. docs/notifications.md is the reference.
//
// # Where triggers come from
//
//   - A guest entering error, rejected, held by the mass-change guard
//     (awaits_approval "guard"), a destroy waiting for approval
//     (awaits_approval "destroy"), and converged at a new desired
//     revision: the planner's guest documents, read from the views
//     bucket's stream (KV_<views>, $KV.<views>.<cluster>.>) through one
//     durable consumer per route (Consumer(cluster, route)), pre-created here and
//     bound, MaxAckPending 1 so that a route sees each guest's documents
//     in order. A transition needs the previous state: each route keeps
//     it per guest in the notifier's own bucket ([Bucket],
//     g.<route>.<cluster>.<vmid>), written after the notice was delivered
//     or parked and before the message is acknowledged. Blocked and
//     paused do not end a state's episode; a new episode's key ends in
//     /e<n>; a guest's last key is never sent again.
//   - An executor lost (its lease membership expired: no delete marker),
//     the partitions it held, and a role not ready (no planner, no
//     executor, Proxmox unreachable, the observer silent): a poller reads
//     the leases bucket's keys and the cluster document every Poll and
//     compares them with its previous read, kept in the bucket
//     (poll.<cluster>); each notice it finds is created once as
//     ev.<cluster>.<hash>, which every route reads through a durable
//     consumer of the same name on the bucket's stream (created with
//     DeliverNew: a route added later is not sent older notices). Each
//     member's losses are counted (in the keys). Over a gap between polls
//     longer than the leases' TTL a vanished member is logged, not told
//     lost: its delete marker may have aged out.
//
// # Contract
//
//   - At least once: a message is acknowledged (and confirmed) only after
//     its notice was delivered (a 2xx) or parked; a notifier killed
//     before that delivers it again. Every copy of a notice carries the
//     same key, derived from its cause (cluster, guest or member, trigger,
//     desired revision, action id, the rejected event's sequence, or how
//     often a condition was entered), in the body and as the
//     Idempotency-Key and X-Converge-Key headers.
//   - One watermill Router handler per route, with its own consumers
//     (its own positions), Retry with backoff (each attempt with its own
//     Timeout: ResetContextOnRetry), an optional Throttle (around the
//     deliveries alone), and a poison queue: a notice still refused after
//     its retries, or whose handling panicked, is parked
//     (parked.<route>.<hash> in the bucket, converge_notify_parked_total)
//     and the route goes on; a route never waits for another's receiver.
//     A failure that is not the receiver's (the bus) is nacked and tried
//     again, never parked.
//   - While a route holds a message (its retries) the subscriber extends
//     the message's AckWait (in-progress heartbeats), so AckWait stays
//     short and a killed notifier's message comes back soon.
//   - Limits: the views bucket keeps one revision per guest, so a state
//     the planner held only briefly while a route was behind (the
//     notifier down, or a route slow) may be passed over: error,
//     rejected, held and destroy-gated entered and left in between are
//     missed, and two entries into one state count as one. converged is
//     missed only if a newer revision was published before the route read
//     the first. The poller sees what is there at each poll: a
//     condition that came and went between polls is missed; an expiry is
//     not missed (the previous read is kept) unless the gap was longer
//     than the leases' TTL. One notifier per cluster: it holds
//     owner.<cluster> in the bucket, renewed each poll; another refuses
//     to start while the holder renews it.
//   - Redirects are not followed: a 3xx is a failed attempt.
//   - URLs and header values are never logged (a Slack URL is a
//     credential).
package notify

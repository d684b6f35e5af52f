// Package lease shares a fixed set of partitions among the live instances
// of a role (executors, planners) through a JetStream key-value bucket, so
// that each partition has at most one owner at a time.
//
// # Contract
//
// Every instance of a group runs a [Manager] under a unique member id. Each
// round (Config.Renew, default TTL/5) a manager:
//
//   - rewrites its membership key <group>.m.<member>;
//   - lists the live members (keys the bucket's MaxAge of TTL has not yet
//     expired) and computes each partition's preferred owner with [Assign]
//     (rendezvous hashing bounded to floor(partitions/members) each, or one
//     more), so
//     ownership is balanced and moves little when members come and go;
//   - renews each lease it holds with a compare-and-set on the lease key's
//     revision (kv.Update); a failed renewal means the lease was lost
//     (expired while this process stalled, or taken): Config.OnLost is
//     called and the partition's work must stop at once;
//   - releases a lease whose preferred owner is now another live member:
//     Config.OnRelease is called (in its own goroutine, so renewals go on
//     while the partition drains), and once it returns the lease key is
//     deleted with a compare-and-set, letting the preferred owner claim it
//     on its next round;
//   - claims each free partition it prefers, and any partition left free
//     for longer than TTL whatever the ranking (its preferred owner is not
//     claiming it), with kv.Create, which only one claimant can win;
//     Config.OnAcquire is called for each lease won.
//
// A lease key that is not renewed vanishes after TTL (the bucket's MaxAge),
// so a dead member's partitions are claimed by a survivor within about
// TTL + Renew. [Manager.Held] says whether a lease is held and was renewed
// within TTL minus one round: callers check it right before a side effect
// (fencing), since a lease is never exclusive across a stall longer than
// that.
//
// Callbacks are called one at a time per partition and never concurrently
// for the same partition. Run returns when its context ends, after
// releasing every lease (OnRelease is called for each and awaited up to
// Config.ReleaseTimeout) and deleting its membership key.
package lease

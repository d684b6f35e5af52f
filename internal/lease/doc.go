// Package lease shares a fixed set of partitions among the live instances
// of a role (executors, planners) through a key-value [Store] (in
// production the JetStream bucket [Bucket], see bus.Bus.LeaseStore), so
// that each partition has at most one owner at a time.
//
// # Contract
//
// Every instance of a group runs a [Manager] under a unique member id. Each
// round (Config.Renew, default TTL/5) a manager:
//
//   - rewrites its membership key <group>.m.<member>;
//   - lists the live members (keys the store's TTL has not yet expired)
//     and computes each partition's preferred owner with [Assign]
//     (rendezvous hashing bounded to floor(partitions/members) each, or one
//     more), so
//     ownership is balanced and moves little when members come and go;
//   - renews each lease it holds with a compare-and-set on the lease key's
//     revision ([Store].Update); a refused renewal means the lease was lost
//     (expired while this process stalled, or taken): Config.OnLost is
//     called and the partition's work must stop at once; a renewal that
//     cannot reach the store keeps the lease until it is stale (TTL minus
//     one round after its last renewal), and then it is lost too;
//   - releases a lease whose preferred owner is now another live member:
//     Config.OnRelease is called (in its own goroutine, so renewals go on
//     while the partition drains), and once it returns the lease key is
//     deleted with a compare-and-set, letting the preferred owner claim it
//     on its next round;
//   - claims each free partition it prefers, and any partition left free
//     for longer than TTL whatever the ranking (its preferred owner is not
//     claiming it), with [Store].Create, which only one claimant can win;
//     Config.OnAcquire is called for each lease won.
//
// A lease key that is not renewed vanishes after TTL (the store's TTL),
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
//
// # Time
//
// A manager reads the time and waits (rounds, Held, staleness, the
// retries while the store cannot be opened, ReleaseTimeout, timeouts of
// the deletes on the way out) only through Config.Clock. With a fake clock
// (package clocktest) and the in-memory store of package leasetest, a
// group of managers runs as a script, without waiting for real time.
package lease

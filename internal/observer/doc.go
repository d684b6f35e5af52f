// Package observer is converge's OBSERVER role: it polls Proxmox VE and
// publishes what it sees as observed events (DESIGN.md §2, §6), plus a
// heartbeat after every pass so that the planner can tell "Proxmox is
// unreachable" or "the observer is silent" from "the guest is gone"
// (DESIGN.md §4, invariant 6).
//
// # A pass
//
// [Observer.Pass] (run immediately by [Observer.Run], then every
// Config.Interval, and at once after [Observer.Resync]) does:
//
//  1. Exactly one inventory call (GET /cluster/resources?type=vm).
//  2. Config reads (pve.Client.GuestConfig: …/pending, which lists applied
//     values, pending ones and the digest) only for guests that
//     were never read by this process, whose inventory row changed since
//     their last successful read (status, lock, tags, name, node, kind,
//     template, maxcpu, maxmem), that are due for Config.ConfigRefresh, or
//     after a Resync (every guest). An idle pass therefore makes one
//     Proxmox call. The refresh is staggered: each vmid has its own phase
//     within the refresh period, so a steady estate is re-read a slice at a
//     time; a guest is re-read at most ConfigRefresh after its last read.
//  3. One [events.Observed] per guest, built from the inventory row and the
//     applied config, with the managed keys whose new value waits for a
//     restart in Pending (PVE key names, "hostname" reported as "name";
//     values normalised: tags ';'-joined sorted lower-case, booleans 0/1,
//     memory in MiB, a pending deletion as the key's default). ReadAt is
//     the clock reading taken before the pass's inventory call that
//     produced the data, so it never claims to be newer than any of the
//     reads it combines.
//  4. A publish to pve.observed.<cluster>.<vmid> only when the snapshot
//     differs from the last one this observer published for the vmid
//     (Meta and ReadAt ignored). Publishes are asynchronous with a bounded
//     number in flight; one that is not acknowledged is not recorded and is
//     retried on the next pass.
//  5. After a successful inventory only: every vmid last published as
//     existing that the inventory no longer lists is published as
//     Exists=false. A failed inventory (unreachable, timeout, 5xx, bad
//     credentials) publishes nothing but the heartbeat.
//  6. A heartbeat on pve.heartbeat.<cluster>, reachable or not, with the
//     error text, the pass number, the guest count of the last successful
//     inventory and the interval.
//
// A config read that fails for one guest (it vanished between inventory and
// read, it is migrating, a transient error) does not fail the pass: the
// guest keeps its last published snapshot and is read again next pass.
//
// # Restart
//
// Before its first pass an observer loads the last observed event of every
// vmid of its cluster from the journal, so a restart neither republishes
// unchanged guests nor forgets guests that vanished while it was down (they
// are published as Exists=false after the first successful inventory). The
// first pass of a process reads every guest's config once.
//
// The observer compares against what observers published; observations
// embedded in results by executors are not consulted (the projector orders
// all observations by ReadAt).
//
// # Concurrency
//
// Passes are serialised. Resync is safe from any goroutine, non-blocking
// and coalescing. The observer logs with zerolog and never logs secrets:
// Proxmox errors carry no credentials.
package observer

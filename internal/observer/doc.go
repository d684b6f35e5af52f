// Package observer is converge's OBSERVER role: it polls Proxmox VE and
// publishes what it sees as observed events (docs/architecture.md), plus a
// heartbeat after every pass so that the planner can tell "Proxmox is
// unreachable" or "the observer is silent" from "the guest is gone"
// (docs/architecture.md, invariant 6).
//
// # A pass
//
// [Observer.Pass] (run immediately by [Observer.Run], then every
// Config.Interval, at once after a [Observer.Resync] that is carried out,
// and early, at most once a second, when a desired event journalled since
// the last pass began names a guest that pass did not list: the planner
// clones a missing guest only after a pass begun after its desired state,
// soon.go) does:
//
//  1. Reads the journal's last sequence (the pass's AfterSeq; if that
//     fails the pass goes on with 0), then exactly one inventory call
//     (GET /cluster/resources?type=vm).
//     With a Proxmox that is an [HAReader], the cluster's facts (GET
//     /version and /cluster/ha/groups: its release and whether HA rules
//     are in force) on the first pass, every 30 passes and at a resync,
//     published in every heartbeat (events.PVEFacts); under HA groups with
//     HA guests listed, the HA mode (the groups endpoint) every pass, so
//     that a cluster finishing its upgrade is placed by rules at once;
//     and, under HA rules
//     with HA guests listed, GET /cluster/ha/rules and /cluster/ha/resources
//     (failback) every pass. Each HA guest's snapshot carries its
//     placement (events.HAPlacement: Groups under HA groups, else the rule
//     that places it), and a changed placement has the guest's config read
//     again like a changed inventory row. A failed read keeps what was
//     read before; a guest whose placement was never read carries none
//     (unknown: the planner moves it neither way).
//  2. Config reads (pve.Client.GuestConfig: …/pending, which lists applied
//     values, pending ones and the digest), at once for guests that were
//     never read by this process, whose inventory row changed since their
//     last successful read (status, lock, tags, name, node, kind,
//     template, maxcpu, maxmem, HA state, pool), whose last read failed,
//     or whose last snapshot was published to contradict a read-back and
//     is unconfirmed (below). Except a row
//     change an executor's read-back explains (explain.go): the guest's
//     newest result (the direct get of step 4), journalled after the
//     journal's end before the guest's last read, held by the fold (no
//     observation journalled after it, or after a derived read-back's
//     basis), saying what the new row says, field by field (cores =
//     maxcpu, memory = maxmem). That guest is not read at once: its row
//     is adopted, nothing is built or published from it until it is read
//     (the fold holds the read-back, which the row agrees with), and it
//     is verified as if last read a verification period ago, so first
//     among the guests within their period (PassStats.Deferred, reads
//     reason "deferred"). Verification off, a snapshot due again (half
//     ObservedTTL), a changed placement or a last read without an
//     AfterSeq read at once. Nor is a row change read at once that only
//     catches up with what the guest's last read found, when no result
//     of it was journalled since: live fields (node, kind, lock, tags,
//     template, HA state, pool) unchanged, name, maxcpu and maxmem as read,
//     and the status the fold holds; the row is adopted
//     (PassStats.CaughtUp). Then verification: the other guests, deferred
//     ones included, are re-read within a budget per node, Config.VerifyRate
//     reads a second (each node's pveproxy serves its own guests' reads):
//     a sliding window on Config.Clock, each read counted from when it was
//     sent, so no node is sent more than ⌊VerifyRate⌋ verification reads
//     in any second (nodebudget.go). The pass spends what the window
//     allows before its reads; between passes [Observer.Run] runs a
//     verification round whenever every node's window is whole again
//     (verifyround.go) that spends the rest on guests the last pass left
//     settled (read, last read successful, confirmed or to be re-read to
//     confirm), recording their configs, ReadAt and AfterSeq those of the
//     round, for the next pass to publish. Either way confirmations first,
//     then those of a resync, then the longest unverified, none within
//     Config.ConfigRefresh of its last read (but a deferred one or a
//     confirmation). One read (…/pending) answers applied and pending
//     values. This catches drift /cluster/resources does not show
//     (pending values, description, onboot): every guest is verified at
//     least once per max(ConfigRefresh, guests of the fullest node /
//     VerifyRate), plus one window (PassStats.VerifyPeriod, the metric
//     converge_observer_verify_period_seconds; docs/drift.md), while
//     deferred reads leave the budget room (a deferred read is its
//     guest's verification: only a guest changed again within its period
//     costs the others a read, and none goes ahead of a guest past its
//     period; confirmations, step 5, stretch it only while they alone
//     outrun a node's budget), and its drift published within one
//     Interval more: 10,000 guests on 100 nodes at the default 2 a second
//     in 50 s. An idle small
//     estate costs one inventory call a pass plus its verification; a
//     large one never more than each node's budget.
//  3. One [events.Observed] per guest, built from the inventory row and the
//     applied config, with the managed keys whose new value waits for a
//     restart in Pending (PVE key names, "hostname" reported as "name";
//     values normalised: tags ';'-joined sorted lower-case, booleans 0/1,
//     memory in MiB, a pending deletion as the key's default). ReadAt is
//     the clock reading taken before the pass's inventory call that
//     produced the data, so it never claims to be newer than any of the
//     reads it combines; AfterSeq, which orders reads (the projector adopts
//     an observation only if its AfterSeq reaches the sequence of the one
//     it replaces), is the AfterSeq of the pass (or round) that read the config.
//  4. The status check (status.go), for guests read this pass and those
//     to be published for another reason than their age: the inventory's
//     status (pvestatd's broadcast, up to a cycle old) is kept only if it
//     agrees with the guest's newest journalled status, the observer's own
//     last observation or an executor's read-back journalled after what
//     that observation had read (the guest's newest result, one direct
//     get on the journal); nothing journalled of the guest at all accepts
//     a power state. Otherwise the status is read from status/current
//     (PassStats.StatusReads) and the snapshot carries it; the decision
//     stands while the inventory shows the same status. A snapshot whose
//     directly read status contradicts the read-back the projector holds
//     is published even if it equals the observer's own last one. A failed
//     status read keeps the last snapshot, like a failed config read.
//  5. A publish to pve.observed.<cluster>.<vmid> when the snapshot differs
//     from the last one this observer published for the vmid (Meta,
//     ReadAt and AfterSeq ignored), or is past half ObservedTTL (published
//     again as it is, so it never expires from the journal; its AfterSeq,
//     that of its read, keeps it from superseding anything newer), and
//     once more for a changed snapshot, re-read, unchanged or not (a
//     confirmation): an executor's read-back journalled while the pass
//     read Proxmox has a higher sequence than the pass's AfterSeq, so the
//     projector keeps it and a real change would hide behind "already
//     published". The re-read goes first within the node's verification
//     budget (before a resync's guests; at once with verification off, or
//     for a snapshot published to contradict a read-back, whose read-back
//     the projector holds with a status known to be wrong), and the first
//     pass after it publishes; until then the projector holds the
//     read-back, as for a deferred guest, and a row change is read at
//     once. A pass after which the
//     journal grew by exactly its own observations needs no confirmation
//     (nothing came between); nor, on a busy journal, does a snapshot
//     whose guest has no result journalled after its read's AfterSeq and
//     no other observation since (two gets on the journal, publish.go):
//     the projector adopted it and holds it. Publishes are asynchronous
//     with a bounded number in flight; one that is not acknowledged is
//     not recorded and is retried on the next pass.
//  6. After a successful inventory only: every vmid last published as
//     existing that the inventory no longer lists is published as
//     Exists=false (and confirmed like a change). A failed inventory
//     (unreachable, timeout, 5xx, bad credentials) publishes nothing but
//     the heartbeat.
//  7. A heartbeat on pve.heartbeat.<cluster>, reachable or not, with the
//     error text, the pass number, the guest count of the last successful
//     inventory and the interval.
//
// A config read that fails for one guest (it vanished between inventory and
// read, it is migrating, a transient error) does not fail the pass: the
// guest keeps its last published snapshot and is read again next pass.
//
// # Guest agent addresses
//
// With a Proxmox that can ask guest agents ([AgentReader]; *pve.Client
// can), a pass also asks the QEMU guest agent of every running guest
// whose last config read enables it (config key agent, enabled=1; not a
// managed value) for its addresses (GET …/agent/network-get-interfaces,
// agent.go). Those reads have a budget of their own, VerifyRate a second
// per node as one bucket for the cluster (an Interval's worth a pass):
// agents never asked since their guest started go first with up to a
// quarter of it, by vmid, then the longest unasked, none within
// ConfigRefresh of its last read. A guest just
// started is asked on the next pass. An agent Proxmox says cannot be asked
// (pve.ErrAgentUnavailable: not configured, VM not running, "QEMU guest
// agent is not running") is no failure of the pass: it is logged at debug
// and the addresses become unknown with Proxmox's reason; another failed
// read keeps the last addresses. The addresses (events.Addresses) are
// published on pve.addresses.<cluster>.<vmid>, synchronously, only when
// they change (the set read, or known becoming unknown: the guest stopped,
// its agent disabled or silent, the guest gone), with no TTL; after a
// restart the last published ones are loaded first. They are apart from
// the observations: nothing plans or fences on them.
//
// # Resync
//
// [Observer.Resync] puts every guest first in the verification order; the
// reads still go through each node's budget, so a large estate is re-read
// over its verification period rather than in one burst. At most one resync is carried
// out per Config.ResyncInterval (default 1m): requests in between are
// merged into the next one, which a later pass carries out (logged with
// the number merged; metrics converge_observer_resync_requests_total and
// converge_observer_resyncs_total). A merged request does not wake Run.
//
// # Metrics
//
// Besides the figures above, each pass sets converge_pve_reachable
// {role="observer"} (1 if the inventory answered, as the heartbeat says)
// and converge_observer_last_pass_timestamp_seconds (the observer's
// clock, when the pass ended, reachable or not): an alert on its age
// catches an observer that stopped passing, one on reachable an
// unreachable Proxmox. Proxmox requests themselves are counted by the
// client (package pve).
//
// # Restart
//
// Before its first pass an observer loads the last observed event of every
// vmid of its cluster from the journal, so a restart neither republishes
// unchanged guests nor forgets guests that vanished while it was down (they
// are published as Exists=false after the first successful inventory). The
// first pass of a process reads every guest's config once.
//
// The observer compares what it publishes against what it published; of
// the observations embedded in results by executors it consults only the
// guest's newest, for the status check (the projector orders all
// observations by AfterSeq and journal sequence).
//
// # Concurrency
//
// Passes are serialised, and Run runs no pass during a verification
// round. A round holds the observer's lock to pick its guests and to
// record its reads, not while they are in flight; a read a pass overtook
// meanwhile is dropped (verifyround.go).
// Resync is safe from any goroutine, non-blocking and coalescing. The
// observer logs with zerolog and never logs secrets: Proxmox errors carry
// no credentials.
package observer

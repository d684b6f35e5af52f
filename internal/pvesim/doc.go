// Package pvesim is a stateful Proxmox VE API simulator that go-proxmox, and
// any other Proxmox client, drives unchanged over real HTTP.
//
// It is what converge's tests, demo and benchmark run against, so it follows
// the wire contract of a real pveproxy rather than what is convenient:
//
//   - Everything is served under /api2/json with the {"data": ...} envelope,
//     over HTTP/1.1 only (HTTP/2 is off, also under TLS).
//   - Errors carry their message in the HTTP status line's reason phrase
//     ("HTTP/1.1 500 VM 100 already running"), written on the hijacked
//     connection because net/http always writes the canonical phrase, and in
//     PVE's error body {"data":null,"message":"...\n"} (plus "errors" for 400).
//     Unknown paths answer 501, as pveproxy does; guest reads never answer 404.
//   - Answers are encoded with github.com/go-json-experiment/json, in the
//     bytes encoding/json writes (map keys sorted, HTML characters
//     escaped, nil lists as null), which clients that compare answers
//     have always seen. Request bodies may be JSON or form-encoded.
//   - JSON typing follows PVE: integers as numbers, booleans as 0/1,
//     number-typed keys (cpulimit) as strings, /cluster/nextid as a string,
//     QEMU memory as a string from PVE 8 on, "template" only when 1 in guest
//     lists and status but always 0/1 in /cluster/resources.
//   - Every request is checked, before anything changes, against its
//     operation's rules generated from Proxmox's API schema (package
//     pveschema, schemacheck.go): undeclared or missing parameters, types,
//     patterns, lengths, ranges, enumerations, named formats and property
//     strings; all problems in one 400 with pve-common's messages.
//     Booleans are 1 or 0 (or JSON true/false), as check_type takes them.
//     Config keys the schema declares are stored even where the simulator
//     does not model them; other declared parameters it does not model
//     (bwlimit, …) are accepted without effect.
//   - Auth is API tokens or tickets (cookie plus CSRFPreventionToken on
//     writes); anything else is 401.
//   - Guests keep applied config, a [PENDING] section and a SHA-1 digest of
//     the serialised file that changes on every write; a write carrying a
//     stale digest fails. Running guests keep non-hotpluggable changes pending
//     until the next start or reboot. A deleted disk is kept as unusedN or,
//     with force (and through unlink), freed. Every write drops pending values equal
//     to the applied ones (cleanup_pending); revert drops a key's pending
//     value or deletion, and may not name a key the request also sets or
//     deletes.
//   - Mutations run as asynchronous tasks with PVE-format UPIDs (trailing
//     colon), task status that echoes upid and node, logs ending in
//     "TASK OK", "TASK WARNINGS: n" or "TASK ERROR: ...", and Proxmox's own
//     outcomes for edge cases (starting a running VM is a failed task, for a
//     container an immediate 500). Every task is listed in /cluster/tasks.
//   - Storage is read as pve-storage answers it: the cluster's storage.cfg
//     (GET /storage), each node's view of it (status, and content: the
//     volumes of the guests' disks on it, a local storage holding only its
//     node's guests'), and volume attributes; a volume is freed through
//     the storage API without regard to the configs naming it, and a VM's
//     disk moves to another storage, the source kept as unusedN or freed
//     (volumes.go); ISO images and templates download from a URL into a
//     directory storage.
//     Node reads cover status,
//     version and a default install's network (eno1 and the bridge vmbr0).
//   - HA follows pve-ha-manager: ha/resources.cfg, groups (PVE 7/8, and
//     PVE 9 clusters whose groups are not migrated yet) and, on PVE 9, HA
//     rules with Proxmox's feasibility checks (harules.go, harulecheck.go,
//     hagroups.go). A minimal CRM acts HADelay after a change: requested
//     states, migrate requests, placement by node- and resource-affinity
//     (hacrm.go, haplace.go), and, with Options.HARebalance, PVE 9.2's
//     load balancer (hacrs.go); Sim.HAMoves records what it moved.
//   - PVE 9 is the default release (Options.Version; "8" and "7" keep
//     theirs). On 9 a container created without "unprivileged" is
//     unprivileged; on every release an explicit 0 writes no key and a
//     clone keeps its source's flag. A VM suspended to disk carries
//     vmstate, runningmachine, runningcpu and, on 9, running-nets-host-mtu
//     in its config until it starts or a write deletes vmstate (through
//     the suspended lock, which goes with them); a RAM snapshot carries
//     running-nets-host-mtu on 9 too; a running VM's config carries none
//     of them (pve9.go).
//   - A clone regenerates every NIC's MAC and prints its NICs canonically;
//     the QEMU guest agent answers network-get-interfaces for a running VM
//     with the agent enabled, and Proxmox's refusals otherwise.
//
// # Faults
//
// [Faults] (latency per call, per task and per task type, failure and
// warning rates, unreachability, /cluster/resources lag) can be set at
// start through [Options], changed while running with [Sim.SetFaults],
// [Sim.LockGuest] and [Sim.SetUnreachable], or over HTTP under /_sim/
// (outside /api2/json, no auth): see docs/simulator.md.
//
// # Proxmox's concurrency limits
//
// The simulator serves no faster than Proxmox can; each limit is pinned by
// a test citing its source:
//
//   - API workers (apiworkers.go): every node has a pvedaemon and a
//     pveproxy pool of 3 workers ([DefaultAPIWorkers]; pve-manager
//     PVE/Service/pvedaemon.pm and pveproxy.pm max_workers). A call under
//     /nodes/{node}/ holds a worker of that node's pvedaemon if the API
//     schema marks its handler protected (PVE::HTTPServer::rest_handler;
//     protected_gen.go), else of its pveproxy; any other call one of the
//     first node's. It holds it for Faults.Latency and its handler
//     (inline work such as the synchronous qmconfig included), not for
//     the task it starts, nor for a 401's delay. Calls wait in arrival
//     order, never refused. Options.APIWorkers and ProxyWorkers (0:
//     3, negative: unlimited); [Sim.APIWorkerStats] and GET /_sim/stats
//     "api_workers" report them.
//   - Storage lock (storagelock.go): a task takes the storage locks of
//     its volume operations one after another from its start, each for
//     Faults.StorageLockHold (0: not modelled), per node for a local
//     storage, cluster-wide for a shared one (pve-storage
//     cluster_lock_storage, around vdisk_alloc, vdisk_clone,
//     vdisk_create_base and vdisk_free); a waiter past
//     Faults.StorageLockTimeout (0: 10 s) gives up with pve-storage's
//     message, which the operation handles as its Proxmox code does (a
//     failed task or call, a warning; docs/simulator.md), freeing under
//     their locks again the volumes it made before where Proxmox does.
//     Clones take it per volume (qemu-server clone_disk,
//     pve-container copy_volume: a full clone's allocation, a linked
//     one's vdisk_clone), creates per volume they allocate (create_disks),
//     template conversions per volume (vdisk_create_base), disk moves
//     for the new volume and, with delete, the source (move_vm_disk),
//     destroys per volume they free (destroy_vm, destroy_lxc_container),
//     the storage API's volume deletion (vdisk_free), and config writes
//     per unusedN they free and volume they allocate (update_vm_api,
//     update_pct_config; configlock.go).
//   - LXC clone source: the source container carries lock "disk" for
//     the whole clone task; a second clone of it is refused at once with
//     500 "CT is locked (disk)" (pve-container clone_vm, pve-guest-common
//     AbstractConfig::set_lock/check_lock).
//   - HA (halrm.go): each node's LRM runs at most Options.HAMaxWorkers
//     (0: 4, datacenter.cfg max_workers; pve-ha-manager LRM.pm
//     run_workers) actions at once; the others wait their turn.
//   - Guest config lock: a locked guest refuses what Proxmox refuses
//     ([Sim.LockGuest]); the injected flock timeout is Faults.FailRate.
//
// # Concurrency
//
// A Sim is safe for concurrent use. All guest state sits behind one mutex;
// task workers take it only to apply their effect, so reads never wait for a
// task to finish. With zero task latency a task completes before its UPID is
// returned, which keeps benchmarks free of timer noise.
package pvesim

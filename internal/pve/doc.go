// Package pve is converge's only door to Proxmox VE: reads, writes, task
// waiting, error classification and normalisation, over go-proxmox v0.8.1.
//
// go-proxmox builds, authenticates and sends every request (its raw Req);
// this package reads every answer itself, into its own types, because
// go-proxmox's structs lose or mis-decode fields a reconciler needs (lock,
// template, cpulimit strings, memory property strings, …) and its Req
// decodes every answer twice. A call hands go-proxmox a client of its own
// whose transport keeps the answer's body (answerReader, the one adapter
// go-proxmox v0.8.1 needs).
//
// # Answers
//
// Answers are read with github.com/go-json-experiment/json, typed per
// endpoint: the inventory's rows, a guest's config and pending list, its
// status, task status and log, HA resources, pools, snapshots. Members a
// type does not know are skipped, so a newer Proxmox that adds some never
// breaks a read. Every member Proxmox types inconsistently (a number here,
// a string there; a boolean as 0/1, "0"/"1" or true/false) is read into a
// [Value], which yields the Go type a field needs whichever way Proxmox
// wrote it. The inventory is read a row at a time off the answer's bytes,
// paced (package pace), into [Resource]s. An answer that does not read is
// ClassUnknown (for a mutation, Indeterminate).
//
// # Reads
//
// [Client.Inventory] lists every guest of the cluster with one call
// (GET /cluster/resources?type=vm). [Client.GuestConfig] reads the applied
// config (…/config?current=1) and the pending changes (…/pending): pending
// values are not drift, they wait for a reboot. Read a guest's config only
// when its digest, lock or desired state changed. [Client.GuestStatus] reads
// the live power state. Values are normalised on the way in (see
// [events.ParseTags], [events.NormaliseDescription], [ParseMemoryMiB], [ParseBool],
// [ParseInt]; absent keys take PVE's defaults), so a round trip through
// Proxmox never looks like a change. [GuestConfig.Managed] and
// [GuestConfig.ManagedPending] give the managed part as events carry it:
// the observer and the executor both report guests through them.
// [Client.AgentAddresses] asks a running QEMU guest's agent for its
// addresses (…/agent/network-get-interfaces; needs VM.GuestAgent.Audit on
// PVE 9), for guests whose config enables it ([GuestConfig.AgentEnabled],
// read from the raw config and never part of the managed values); an
// agent Proxmox says cannot be asked is [ErrAgentUnavailable].
// [Client.HAResources] lists the guests under Proxmox's HA manager;
// [Client.RemoveHA] takes one out of it (synchronously, no task).
//
// # Mutations
//
// [Client.Start], [Client.Stop], [Client.Shutdown], [Client.Reboot],
// [Client.UpdateConfig], [Client.Clone], [Client.Destroy] and [Client.Delete]
// send exactly one request and return the [TaskRef] of the task Proxmox started, before
// anything waits on it: callers journal the TaskRef first, so that a
// resumed caller waits on the journalled task instead of issuing the call
// again. A zero TaskRef means Proxmox completed the call synchronously (a
// config PUT: every LXC write, and a QEMU write that touches no drive; a
// QEMU drive change's POST whose task finished within background_delay,
// Config.ConfigTaskWait). A QEMU drive change therefore holds its request
// up to that long before a slow task's TaskRef is known: a caller that
// dies meanwhile finds the task with [Client.FindTask].
//
// Nothing in this package retries a mutation, and go-proxmox's retry option
// is never enabled (it re-sends POSTs). The only repeated request is one
// that Proxmox rejected with 401 before running it, re-sent once after a
// fresh ticket login. When a mutation's outcome is unknown (timeout,
// connection reset, gateway error), the *Error says so in Indeterminate:
// re-observe before deciding anything.
//
// # Tasks
//
// [Client.WaitTask] polls a task with a growing, context-aware interval.
// Success is exit status "OK" or "WARNINGS: n"; anything else returns the
// task's log tail and an *Error classified from the exit status. A
// cancelled context returns the context's error and claims no outcome.
// After a start or stop task, [Client.VerifyPower] re-checks the guest:
// HA-managed guests report the task OK before the guest changes state.
// [Client.FindTask] looks a guest's task of an operation up in the node's
// task list (running or finished, started since a given second), for a
// caller that lost the TaskRef between Proxmox's answer and its journal;
// [Client.FindClone] does so for a clone into one new vmid, which a clone
// task's UPID (naming only the source) cannot tell apart.
//
// # Errors
//
// Every failure is classified once, here, into a [Class]; callers switch on
// [Classify] or use errors.Is with the sentinels ([ErrTransient],
// [ErrLocked], [ErrAlreadyDone], [ErrGone], [ErrTerminal], [ErrConflict],
// [ErrUnauthorized], [ErrUnknown]) and never match message texts:
//
//   - transient: network errors, timeouts, 502/503/504/595/596, flock
//     contention ("can't lock file … got timeout"), shutdown timeouts;
//   - locked: "VM is locked (backup)", "CT is locked (…)" — wait, not an error;
//   - already-done: "already running" on start, "not running" on
//     stop/shutdown (but terminal on reboot), "not HA managed" on RemoveHA;
//   - gone: "Configuration file … does not exist", "no such VM", "no such
//     task" — on the addressed node; the guest may have migrated;
//   - terminal: 400 parameter errors, 501, violated preconditions (destroying
//     a running or protected VM, or an HA-managed one without purge,
//     shutting down a paused one, a clone Proxmox cannot make as asked), a
//     storage, bridge, volume or pool that does not exist;
//   - conflict: digest mismatch ("checksum mismatch", "detected modified
//     configuration"), target vmid already exists — re-read and re-plan;
//   - unauthorized: 401/403, rejected credentials, untrusted certificate;
//   - unknown: anything else (500 with an unfamiliar message); treat as
//     transient with bounded retries and surface the message.
//
// PVE puts its error message in the HTTP reason phrase ("500 VM 100 already
// running"); the transport keeps it, along with the body's message and 400
// parameter errors, and also turns non-2xx answers go-proxmox would decode
// as success (e.g. a 595 with {"data":null}) into errors.
//
// # Security
//
// Token secrets, passwords and tickets are never logged; [Config] redacts
// them when printed. TLS is verified against the system pool, a CA file, or
// a pinned SHA-256 certificate fingerprint; HTTP/2 is off (PVE speaks
// HTTP/1.1 and its messages live in the reason phrase). A plain http URL is
// accepted (the simulator speaks it) but sends the credentials and tickets
// in clear: [Config.PlainHTTP] says so, and callers warn loudly.
//
// # Metrics
//
// Every HTTP request is counted and timed at the client's transport
// (converge_pve_requests_total{method,class},
// converge_pve_request_duration_seconds{method}); [Client.Collectors]
// hands them to the process's registry. A role that wants to know whether
// Proxmox answered its own calls, sharing the Client with another role,
// asks with [WithAnswered].
//
// # Concurrency
//
// A [Client] is safe for concurrent use. Ticket logins are serialised and
// shared; API tokens need no login.
//
// # Testing
//
// Tests run against an in-process fake that writes PVE's status lines itself
// (http.Hijacker). The Proxmox simulator in internal/pvesim serves the full
// contract for integration tests.
package pve

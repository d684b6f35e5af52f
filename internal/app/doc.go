// Package app is converge's one assembly: from one [Config] it starts the
// embedded NATS server (when no external one is given), connects,
// provisions the journal, and builds and runs the roles of a process, the
// observer, the planner (planloop), the executors, with the control
// router (resync requests and the poison queue) and the HTTP API. `converge
// up`, the role commands, `converge bench` and the end-to-end tests all
// run converge through it, so what they measure and test is what runs.
//
// # Configuration
//
// A [Config] starts from [DefaultConfig], every role's defaults; Validate
// refuses a field left zero where zero means nothing, naming the field.
// What a process shares is set once: each role's cluster, name
// (<role>@Name), partition and replica counts are the process's, and the
// executors judge with the planner's policy. [Setup] is what `converge
// up` and the role commands prepare alike before Start: the Proxmox
// client and its start-up check ([CheckProxmox]), the HTTP API's tokens,
// the trust in signed desired state and the signing of what /v1 accepts.
//
// # Connections
//
// A process running one role uses one NATS connection. With several roles
// each gets a connection of its own: one connection is read by one
// goroutine, and the planner folding the journal would otherwise starve
// the executor's pull requests and heartbeats. The control router and the
// HTTP API share the process's main connection.
//
// # Readiness
//
// /readyz (internal/api) is ready when every check passes:
//
//   - journal, and journal:<role> for each role's own connection: the
//     connection is up and the stream takes writes. Every
//     ReadyConfig.Interval (5 s) a probe publishes on the cluster's
//     heartbeat subject with a fence no subject can pass; a writable
//     stream refuses it as "wrong last sequence" and stores nothing, while
//     a sealed or deleted stream, a stream without leader or quorum, or
//     JetStream disabled (as the server does when out of disk) answers
//     otherwise or not within 3 s. A single server whose JetStream storage
//     limit is reached refuses only real writes (it checks the limit after
//     the fence): the probe does not see that.
//   - planner (where it runs): caught up with the journal.
//   - proxmox (where the observer or an executor runs): the newest
//     inventory call answered, without a 401/403 or an untrusted
//     certificate. The observer's passes make that call anyway; when none
//     answered within ReadyConfig.ProxmoxFresh (three observe intervals, at
//     least 30 s; an executor alone never lists the inventory), the probe
//     makes one itself. A /readyz request never calls Proxmox or NATS.
//
// # Lifecycle
//
// [Start] returns once every role is running in the background; [App.Wait]
// returns when they have stopped, after ctx ended or [App.Stop], or after
// the first role failed (which stops the others). The executors finish
// their in-flight actions first (executor.Config.DrainTimeout); the
// embedded server stops last.
package app

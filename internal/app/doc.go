// Package app is converge's one assembly: from one [Config] it starts the
// embedded NATS server (when no external one is given), connects,
// provisions the journal, and builds and runs the roles of a process, the
// observer, the planner (planloop), the executors, with the control
// router (resync requests and the poison queue) and the HTTP API. `converge
// up`, the role commands, `converge bench` and the end-to-end tests all
// run converge through it, so what they measure and test is what runs.
//
// # Connections
//
// A process running one role uses one NATS connection. With several roles
// each gets a connection of its own: one connection is read by one
// goroutine, and the planner folding the journal would otherwise starve
// the executor's pull requests and heartbeats. The control router and the
// HTTP API share the process's main connection.
//
// # Lifecycle
//
// [Start] returns once every role is running in the background; [App.Wait]
// returns when they have stopped, after ctx ended or [App.Stop], or after
// the first role failed (which stops the others). The executors finish
// their in-flight actions first (executor.Config.DrainTimeout); the
// embedded server stops last.
package app

// Package control carries converge's control requests (today: resync, "do a
// full reconciliation pass now") between roles, and keeps the poison queue
// of one process.
//
// Requests are journalled like every other event (pve.control.<cluster>),
// so the planner sees them in order in the stream; roles that only need to
// react (the observer re-reading every guest) receive them live over core
// NATS on the process's own connection ([Subscriber]) and through a
// watermill Router (on an in-process gochannel), with panic recovery,
// correlation ids and Prometheus metrics. Handling is idempotent: the
// observer merges resyncs (at most one per its ResyncInterval, its reads
// within its verification budget), so a flood of requests costs Proxmox no
// more than one; at-least-once, unordered delivery is enough here. The
// router logs the first resync request of each minute.
//
// # Poison queue
//
// A control request that cannot be decoded goes to the router's poison
// queue, as do the journal events the planner cannot fold and the actions
// an executor terminates ([Router.Poison]): each is logged with why, and
// counted in converge_poisoned_total. The journal keeps the message.
package control

package bench

import "time"

// Proxmox's limits per node, which the ideal schedule is computed from
// (not converge's settings: a client cannot go faster than Proxmox serves
// it, and converge's own limits are what the bench measures against it).
const (
	// PveDaemonWorkers serve a node's protected API calls (writes and
	// task-starting POSTs, proxied by pveproxy): pve-manager
	// PVE/Service/pvedaemon.pm, `max_workers => 3`.
	PveDaemonWorkers = 3
	// PveProxyWorkers serve a node's unprotected calls (reads):
	// pve-manager PVE/Service/pveproxy.pm, `max_workers => 3`.
	PveProxyWorkers = 3
	// PvePowerTasks is the most power tasks a node runs at once in the
	// ideal. Proxmox itself does not cap them for API clients, but its own
	// mass actions do, at 4: the bulk guest actions of pve-manager 9.1
	// (PVE/API2/Cluster/BulkAction/Guest.pm, `max-workers` default 4,
	// get_max_workers($param, 4), for the whole action, so at most 4 on
	// any node) and HA's local resource manager (pve-ha-manager
	// src/PVE/HA/Env/PVE2.pm get_max_workers: datacenter.cfg max_workers
	// or 4, per node, src/PVE/HA/LRM.pm). Many guests booting at once
	// load a node's storage and CPU; 4 per node is the boot-storm-safe
	// figure Proxmox itself chose. IdealUnbounded drops it (workers only).
	PvePowerTasks = 4
)

// IdealInput is what the shortest schedule of the Proxmox-shaped profiles
// depends on: the guests on each node, Proxmox's limits, and what Proxmox
// takes per call and per task. [ProxmoxIdeal] fills the limits.
type IdealInput struct {
	// GuestsPerNode is the number of guests on each node.
	GuestsPerNode []int
	// DaemonWorkers and ProxyWorkers are a node's pvedaemon and pveproxy
	// workers; PowerTasks the most power tasks at once on a node (0: no
	// limit).
	DaemonWorkers, ProxyWorkers, PowerTasks int
	// APILatency is how long every API call holds its worker.
	APILatency time.Duration
	// ConfigTask is a config write's work, done within the call (a
	// synchronous PUT …/config, or a POST that waits for its qmconfig
	// task): the call holds its pvedaemon worker APILatency + ConfigTask.
	// PowerTask is how long a start task runs; the POST that starts it
	// holds its worker for APILatency only.
	ConfigTask, PowerTask time.Duration
}

// ProxmoxIdeal is the IdealInput of Proxmox's limits (the constants
// above); unbounded drops the power-task limit.
func ProxmoxIdeal(guestsPerNode []int, apiLatency, configTask, powerTask time.Duration, unbounded bool) IdealInput {
	in := IdealInput{GuestsPerNode: guestsPerNode, DaemonWorkers: PveDaemonWorkers, ProxyWorkers: PveProxyWorkers,
		PowerTasks: PvePowerTasks, APILatency: apiLatency, ConfigTask: configTask, PowerTask: powerTask}
	if unbounded {
		in.PowerTasks = 0
	}
	return in
}

// IdealMakespan is a lower bound on the time in which Proxmox's limits let
// any client give every guest its config write and then its start. With
// a = APILatency + ConfigTask (the write's hold on a pvedaemon worker),
// b = APILatency (the start POST's), p = PowerTask and L = APILatency, a
// node of n guests needs at least the largest of:
//
//  1. Chain: one guest's write, its start POST, its task: a + b + p.
//  2. Daemon workers: the node's n(a + b) of pvedaemon work over its
//     DaemonWorkers; the last call to end is a start POST (each guest's
//     comes after its write), whose task still runs: n(a + b)/D + p.
//  3. Power tasks (PowerTasks = K > 0): none starts before a + b, and K
//     slots run n tasks of p in ceil(n/K) rounds: a + b + ceil(n/K) × p.
//  4. Proxy workers: each task's end is seen by one status read (sent
//     L before the end: it adds nothing to 1), none before a + b, n reads
//     of L over ProxyWorkers: a + b + nL/R.
//
// The answer is the largest over the nodes. Nothing of the client is
// counted: no planning, no journal, no read-back, no wait between a
// task's end and the next call. With the defaults (15 ms calls, 0.2 s
// config, 1 s power, 100 guests a node) bound 3 decides: 25.23 s; without
// the power limit, bound 2: 8.67 s.
func IdealMakespan(in IdealInput) time.Duration {
	a := in.APILatency + in.ConfigTask
	b := in.APILatency
	head := a + b
	var ideal time.Duration
	for _, n := range in.GuestsPerNode {
		if n <= 0 {
			continue
		}
		node := head + in.PowerTask
		if in.DaemonWorkers > 0 {
			node = max(node, time.Duration(n)*head/time.Duration(in.DaemonWorkers)+in.PowerTask)
		}
		if k := in.PowerTasks; k > 0 {
			node = max(node, head+time.Duration((n+k-1)/k)*in.PowerTask)
		}
		if in.ProxyWorkers > 0 {
			node = max(node, head+time.Duration(n)*in.APILatency/time.Duration(in.ProxyWorkers))
		}
		ideal = max(ideal, node)
	}
	return ideal
}

// spread is how guests are placed: guest i on node i mod nodes.
func spread(guests, nodes int) []int {
	per := make([]int, nodes)
	for i := 0; i < guests; i++ {
		per[i%nodes]++
	}
	return per
}

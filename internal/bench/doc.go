// Package bench is `converge bench` (docs/benchmarks.md): in one run, on an
// embedded JetStream and the simulator with no added latency, it measures
// the raw JetStream limit (async publish, durable consume and ordered
// replay of as many messages, of the same size, as the pipeline writes),
// then the full pipeline at saturation (throughput) and at a fixed rate
// below it (latency, desired sent → mutation received by the
// simulator), then a replay of the journal into a fresh fold, and the
// Proxmox calls of an idle observer pass.
//
// Ratios, not absolute numbers, are the result: the machine is shared, so
// the bus measured in the same run is the yardstick.
//
// # What a change is
//
// A change is one desired event, published by an async JetStream client,
// that differs from the guest's previous desired state (its description),
// so converging it takes one Proxmox config write. The throughput run
// sends one change per guest by default, so that every change is an
// action, and reports what an action costs (CPU, Proxmox calls, bytes
// allocated, all in the same run). The coalesced burst follows, labelled
// apart: ten changes per guest spread round-robin; when several changes of
// one guest arrive while an action for it runs, the planner acts on the
// newest only (desired state is level-triggered), and it counts every
// published change once all guests have converged to their last one.
// Options.LatencyAt repeats the latency run with the simulator grown to
// larger estates.
//
// # The Proxmox profile
//
// [RunProxmox] (`converge bench --profile proxmox`) measures instead a
// Proxmox-shaped workload: a simulator with ProxmoxOptions.Nodes nodes
// (10), 15 ms per API call, 1 s per power task and 0.2 s per config task
// (pvesim's per-task-type latency), and converge assembled as `converge up`
// assembles it, with its shipped defaults (app.DefaultConfig, read at run
// time) unless ConvergeLimits lifts them (LimitsOff: every per-node limit,
// the report's limits "off") or overrides one. Every guest starts stopped
// and gets one desired change that takes a config write and then a start.
// makespan_s runs from the first publish until the planner has seen every
// guest running with its new config (checked against the simulator after);
// ideal_makespan_s is [IdealMakespan] under Proxmox's limits, not
// converge's (3 pvedaemon and 3 pveproxy workers per node, at most 4 power
// tasks per node as Proxmox's own bulk and HA actions run them; see
// ideal.go), ideal_unbounded_makespan_s the same without the power-task
// limit; baseline_makespan_s is the same work, on a fresh simulator in the
// same state, by a Terraform-like client (baseline.go).
//
// # The estate profile
//
// [RunEstate] (`converge bench --profile estate`) is the same change at
// estate scale: 10,000 guests on 100 nodes, created through the API of a
// simulator in a process of its own (`converge sim`), so that what the
// bench's process spends is converge's: its CPU (getrusage) over the
// makespan and its peak RSS (VmHWM, reset at the start). After the change
// it measures drift detection: how long until converge has read every
// guest's config and pending values again, and the most config reads any
// node was sent within one second, counted on converge's side
// (estate_verify.go).
//
// Nothing in the profiles is asserted against a speed.
//
// # The failover profile
//
// [RunFailover] (`converge bench --profile failover`) SIGKILLs executors
// under load. The simulator, an embedded NATS, an observer and a planner
// run in the bench's process; FailoverOptions.Executors (3) executors run
// as `converge executor` processes (FailoverOptions.ExecutorCommand) and
// reach the simulator through a front that records their mutating calls
// with the answer's status. A steady stream of desired changes (a new
// description and the other power state, round-robin over the guests)
// keeps config writes and power tasks in flight. Each kill waits for the
// executors to share the partitions, then for a task of the victim in
// flight, reads the partitions it holds from the lease bucket, SIGKILLs
// it by PID, and measures from the kill: takeover, until a survivor holds
// each of those leases (the bucket polled every 20 ms); resume, until a
// survivor has journalled a result for every action the victim left
// unfinished (stored before the kill, not final then); kill → act, the
// later of the two. The victim is restarted under a new name before the
// next kill. Afterwards, once every action is final, each recorded call
// is attributed to its guest's newest action stored before it (a
// guest's actions run one at a time): the same call carried out twice for
// one action is a duplicate task; refused repeats (a stale digest) are
// counted apart. Actions with results of two executors are handoffs,
// spurious when the first executor was not killed.
package bench

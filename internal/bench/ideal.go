package bench

import "time"

// IdealInput is what the shortest schedule of the Proxmox profile depends
// on: the guests on each node, the limits, and what Proxmox takes per call
// and per task.
type IdealInput struct {
	// GuestsPerNode is the number of guests on each node.
	GuestsPerNode []int
	// Slots is the node concurrency: the most tasks in flight per node.
	Slots int
	// NodeRate is the most mutating calls a second per node (0: none).
	NodeRate float64
	// APILatency is what every API call takes before Proxmox handles it.
	APILatency time.Duration
	// ConfigTask and PowerTask are how long the qmconfig and qmstart
	// tasks run.
	ConfigTask, PowerTask time.Duration
}

// IdealMakespan is the shortest time in which Proxmox's limits let every
// guest get its config change and then its power change, a lower bound
// no client can beat. Per node it is the largest of three bounds, and the
// answer is the largest over the nodes:
//
//  1. Slots: each guest's two actions hold a slot for at least one API
//     call plus the task it starts: the config write (a QEMU POST …/config
//     that answers when its task ends, or the PUT that runs the same work
//     inline) holds it APILatency + ConfigTask, the start APILatency +
//     PowerTask (its end can be seen by a status poll sent APILatency
//     before the task ends: nothing more is counted). A node's n guests
//     need n × (2 × APILatency + ConfigTask + PowerTask) of slot time,
//     spread over Slots slots at best. When Slots divides n (the default:
//     100 guests a node, 4 slots) this is exactly the schedule that runs
//     each slot's guests back to back, config then start.
//  2. Order: one guest's config write, then its start, one after the
//     other: 2 × APILatency + ConfigTask + PowerTask.
//  3. Rate: the node's 2n mutating calls, at most NodeRate a second
//     (spread evenly, as converge paces them), the last one a start:
//     (2n − 1) / NodeRate + APILatency + PowerTask.
//
// Nothing else is counted: no planning, no journal, no read-back of the
// guest, no wait between a task's end and the next call.
func IdealMakespan(in IdealInput) time.Duration {
	chain := 2*in.APILatency + in.ConfigTask + in.PowerTask
	var ideal time.Duration
	for _, n := range in.GuestsPerNode {
		if n <= 0 {
			continue
		}
		node := chain
		if in.Slots > 0 {
			node = max(node, time.Duration(n)*chain/time.Duration(in.Slots))
		}
		if in.NodeRate > 0 {
			node = max(node, time.Duration(float64(2*n-1)/in.NodeRate*float64(time.Second))+in.APILatency+in.PowerTask)
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

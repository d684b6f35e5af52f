package planner

import (
	"cmp"
	"slices"

	"github.com/converge-pve/converge/events"
)

// A change whose first step takes no node slot (a config write) but which
// has a node task to come on that node (the start or reboot that applies
// it) is begun only when the node's slots are near: the guests holding one
// of the node's slots and those begun there are at most twice
// NodeConcurrency (leadWindow beyond the slots). Its write then lands
// while the node's tasks before it run, and begun guests take the next
// free slots in the order they began, before any guest not begun. A guest
// part-way through its change (continuing: after a resize or a clone)
// begins at once.
//
// Why: a fleet change handed every guest's write at once sent a node task
// (the start or reboot of the first guests) to the back of the executors'
// delivery, behind every other guest's write: at 10,000 guests the first
// start went out seven seconds after the change (the estate bench). And
// fewer guests sit half-changed (their config pending, their restart far
// off) when the change is stopped or revised part-way.
//
// A write with no node task to come (a stopped guest's, a change that
// waits for a restart the policy refuses, a held guest's) is not limited:
// it begins at once, as before.

// leadWindow is how many guests may be begun on a node beyond those
// holding its slots: one wave of tasks ahead.
func leadWindow(slots int) int { return slots }

// leadsTo reports whether a plan's first step takes no node slot and a
// later one is a node task: its first step begins the guest's change.
func leadsTo(steps []Step) bool {
	if len(steps) < 2 || NodeTask(steps[0].Op) || steps[0].Op == events.OpHold {
		return false
	}
	for _, s := range steps[1:] {
		if NodeTask(s.Op) {
			return true
		}
	}
	return false
}

// admitLead reports whether vmid's change may begin on node now: it has
// begun there already, or there is room for one more begun guest and no
// earlier waiter is owed it. Otherwise vmid waits in the node's line.
func (l *limiter) admitLead(node string, vmid, slots int, first bool) (ok bool, inUse, begun, ahead int) {
	inUse, begun = len(l.busy[node]), len(l.begun[node])
	if l.begunNode[vmid] == node {
		return true, inUse, begun, 0
	}
	if first { // part-way through its change: it goes on
		l.dequeue(vmid)
		l.begin(node, vmid)
		return true, inUse, begun, 0
	}
	if l.inTurn(node, vmid, l.leadRoom(node, slots)) {
		l.begin(node, vmid)
		return true, inUse, begun, 0
	}
	return false, inUse, begun, l.waitIn(node, vmid, true)
}

// leadRoom is how many more guests may begin on node.
func (l *limiter) leadRoom(node string, slots int) int {
	return slots + leadWindow(slots) - len(l.busy[node]) - len(l.begun[node])
}

// headRoom is how many of node's line to plan when room frees: the free
// slots, or the room to begin, whichever is more (each guest planned then
// takes what its own first step needs).
func (l *limiter) headRoom(node string, slots int) int {
	if l.leadWaiting[node] == 0 {
		return slots - len(l.busy[node])
	}
	return max(slots-len(l.busy[node]), l.leadRoom(node, slots))
}

func (l *limiter) begin(node string, vmid int) {
	l.unbegin(vmid)
	if l.begun[node] == nil {
		l.begun[node] = map[int]uint64{}
	}
	l.begunSeq++
	l.begun[node][vmid] = l.begunSeq
	l.begunNode[vmid] = node
}

// unbegin forgets vmid's begun change; it returns the node it was begun
// on ("" if none).
func (l *limiter) unbegin(vmid int) string {
	node, ok := l.begunNode[vmid]
	if !ok {
		return ""
	}
	delete(l.begunNode, vmid)
	delete(l.begun[node], vmid)
	return node
}

// begunOn are the guests begun on node, in vmid order.
func (l *limiter) begunOn(node string) []int {
	ids := make([]int, 0, len(l.begun[node]))
	for id := range l.begun[node] {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int) int { return cmp.Compare(l.begun[node][a], l.begun[node][b]) })
	return ids
}

// begunAhead is how many guests begun on node before vmid (all of them if
// vmid has not begun there): they take a free slot first.
func (l *limiter) begunAhead(node string, vmid int) int {
	mine, ok := l.begun[node][vmid]
	if !ok {
		return len(l.begun[node])
	}
	n := 0
	for _, t := range l.begun[node] {
		if t < mine {
			n++
		}
	}
	return n
}

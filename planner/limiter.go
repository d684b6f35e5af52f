package planner

import (
	"slices"
	"time"

	"github.com/converge-pve/converge/events"
)

// limiter is the engine's view of the limits: actions in flight per
// node, the guard's window, and the guests waiting for a node.
type limiter struct {
	busy map[string]map[int]bool // node → guests with an action in flight or handed out
	// busyNode is the nodes each such guest's action takes a slot on: one,
	// or a migration's source and target.
	busyNode map[int][]string
	// begun are the guests whose change has begun on a node with a step
	// that takes no slot (a config write) and has a node task to come
	// there (begun.go); begunNode is each one's node.
	begun     map[string]map[int]bool
	begunNode map[int]string
	queues    map[string]*nodeQueue
	queued    map[int]queuedAt
	ticket    uint64
	// disrupted are disruptive actions folded, oldest first (vmid, time).
	disrupted []disruption
	// managed are the guests with desired state (the guard's base);
	// existing those of them that exist or are being created (MaxGuests).
	managed, existing vmidSet
	// created are clones folded, oldest first (CreateRate).
	created []disruption
}

type disruption struct {
	vmid int
	at   time.Time
}

type queuedAt struct {
	node   string
	ticket uint64
}

// nodeQueue is the guests waiting for a node, in arrival order; an entry
// whose ticket is no longer its guest's is dead (skipped, compacted).
type nodeQueue struct {
	order []queueEntry
	dead  int
}

type queueEntry struct {
	vmid   int
	ticket uint64
}

func newLimiter() limiter {
	return limiter{busy: map[string]map[int]bool{}, busyNode: map[int][]string{}, queues: map[string]*nodeQueue{}, queued: map[int]queuedAt{},
		begun: map[string]map[int]bool{}, begunNode: map[int]string{}}
}

// setBusy records the nodes vmid has an action in flight on (none, or
// only "": none); it returns the nodes that freed a slot.
func (l *limiter) setBusy(vmid int, nodes ...string) (freed []string) {
	if have := l.busyNode[vmid]; len(have) == 0 && (len(nodes) == 0 || len(nodes) == 1 && nodes[0] == "") ||
		len(nodes) == 1 && len(have) == 1 && have[0] == nodes[0] {
		return nil // unchanged: the common case of every folded event
	}
	var want []string
	for _, n := range nodes {
		if n != "" && !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	for _, old := range l.busyNode[vmid] {
		if !slices.Contains(want, old) {
			delete(l.busy[old], vmid)
			freed = append(freed, old)
		}
	}
	for _, n := range want {
		if l.busy[n] == nil {
			l.busy[n] = map[int]bool{}
		}
		l.busy[n][vmid] = true
	}
	if len(want) == 0 {
		delete(l.busyNode, vmid)
	} else {
		l.busyNode[vmid] = want
	}
	return freed
}

// actionNodes are the nodes whose task slots (Limits.NodeConcurrency) an
// action takes: a migration's source and target (both nodes' daemons and
// storage work), one node for the other node tasks (NodeTask), none for
// the rest.
func actionNodes(node string, op events.Op, m *events.MigrateOp) []string {
	switch {
	case !NodeTask(op):
		return nil
	case op == events.OpMigrate && m != nil && m.Target != node:
		return []string{node, m.Target}
	}
	return []string{node}
}

// NodeTask reports whether op is a task that loads its node (boots,
// shutdowns, storage copies), which is what a node's task slots bound: a
// node boots many guests at once only at the cost of its storage and CPU,
// which is why Proxmox's own bulk guest actions (pve-manager 9.1,
// /cluster/bulk-action/guest) and HA's LRM (max_workers) run 4 at a time.
// A clone waits for the locks it contends for instead: its storage's
// (Limits.CloneConcurrency) and a container template's (create.go). A
// config write, a pool change and HA's own requests contend for no
// node-wide resource (only the guest's config lock, which the guest's own
// ordering already holds to one action): they wait only for an API worker
// (the executor's per-node call limit, executor.Config.NodeCalls). HA
// carries out what it is asked at its LRM's max_workers per node itself.
func NodeTask(op events.Op) bool {
	switch op {
	case events.OpStart, events.OpStop, events.OpShutdown, events.OpReboot, events.OpMigrate,
		events.OpDestroy, events.OpSnapshot, events.OpResize:
		return true
	}
	return false
}

func (l *limiter) dequeue(vmid int) {
	q, ok := l.queued[vmid]
	if !ok {
		return
	}
	delete(l.queued, vmid)
	nq := l.queues[q.node]
	nq.dead++
	if nq.dead > 64 && nq.dead > len(nq.order)/2 {
		live := nq.order[:0]
		for _, en := range nq.order {
			if l.queued[en.vmid].ticket == en.ticket && l.queued[en.vmid].node == q.node {
				live = append(live, en)
			}
		}
		clear(nq.order[len(live):])
		nq.order, nq.dead = live, 0
	}
}

// heads are the first n live guests waiting for node.
func (l *limiter) heads(node string, n int) []int {
	nq := l.queues[node]
	if nq == nil || n <= 0 {
		return nil
	}
	var out []int
	for _, en := range nq.order {
		if q, ok := l.queued[en.vmid]; ok && q.ticket == en.ticket && q.node == node {
			out = append(out, en.vmid)
			if len(out) == n {
				break
			}
		}
	}
	return out
}

// admitNode reports whether vmid may have an action on node now: a slot
// is free and no earlier waiter is owed it (or vmid goes first: a guest
// part-way through its change). Otherwise vmid waits in the node's queue
// (keeping its place) and the answer says how many are busy and ahead.
func (l *limiter) admitNode(node string, vmid, limit int, first bool) (ok bool, inUse, ahead int) {
	inUse = len(l.busy[node])
	free := limit - inUse
	if free > 0 && first {
		l.dequeue(vmid)
		return true, inUse, 0
	}
	if l.inTurn(node, vmid, free) {
		return true, inUse, 0
	}
	return false, inUse, l.waitIn(node, vmid)
}

// inTurn reports whether vmid is owed one of free places on node: it is
// among the first free in line (it leaves the line), or the line is
// shorter than that and it waits in no other place of it.
func (l *limiter) inTurn(node string, vmid, free int) bool {
	if free <= 0 {
		return false
	}
	hs := l.heads(node, free)
	if slices.Contains(hs, vmid) {
		l.dequeue(vmid)
		return true
	}
	// Waiting in another node's line (a migration's other node) is no
	// place in this one, and keeps its place there.
	q, waiting := l.queued[vmid]
	return len(hs) < free && !(waiting && q.node == node)
}

// waitIn puts vmid in node's line (keeping its place) and says how many
// wait ahead of it.
func (l *limiter) waitIn(node string, vmid int) (ahead int) {
	l.enqueue(node, vmid)
	q := l.queued[vmid]
	for _, en := range l.queues[node].order {
		if en.ticket >= q.ticket {
			break
		}
		if w, ok := l.queued[en.vmid]; ok && w.ticket == en.ticket {
			ahead++
		}
	}
	return ahead
}

// enqueue puts vmid in line for node, keeping its place if it is there.
func (l *limiter) enqueue(node string, vmid int) {
	if q, ok := l.queued[vmid]; ok && q.node == node {
		return
	}
	l.dequeue(vmid)
	l.ticket++
	l.queued[vmid] = queuedAt{node: node, ticket: l.ticket}
	if l.queues[node] == nil {
		l.queues[node] = &nodeQueue{}
	}
	l.queues[node].order = append(l.queues[node].order, queueEntry{vmid: vmid, ticket: l.ticket})
}

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
	begun     map[string]map[int]uint64 // vmid → begin ticket
	begunSeq  uint64
	begunNode map[int]string
	queues    map[string]*nodeQueue
	queued    map[int]queuedAt
	// leadWaiting counts each node's waiters that wait for room to
	// begin: with none, a freed slot plans only the slot's worth of the
	// line.
	leadWaiting map[string]int
	ticket      uint64
	// disrupted are disruptive actions folded, oldest first (vmid, time);
	// disruptedN how many of them each guest has (the guard counts
	// distinct guests at every disruptive step: a scan of the window's
	// actions each time was quadratic in a fleet reboot).
	disrupted  []disruption
	disruptedN map[int]int
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

// disrupt records a disruptive action of vmid folded at at.
func (l *limiter) disrupt(vmid int, at time.Time) {
	l.disrupted = append(l.disrupted, disruption{vmid: vmid, at: at})
	l.disruptedN[vmid]++
}

// expireDisrupted forgets the disruptions older than window at now.
func (l *limiter) expireDisrupted(now time.Time, window time.Duration) {
	i := 0
	for i < len(l.disrupted) && now.Sub(l.disrupted[i].at) >= window {
		d := l.disrupted[i]
		if l.disruptedN[d.vmid]--; l.disruptedN[d.vmid] <= 0 {
			delete(l.disruptedN, d.vmid)
		}
		i++
	}
	l.disrupted = l.disrupted[i:]
}

type queuedAt struct {
	node   string
	ticket uint64
	// lead: it waits for room to begin (begun.go), not for a slot.
	lead bool
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
		begun: map[string]map[int]uint64{}, begunNode: map[int]string{}, leadWaiting: map[string]int{},
		disruptedN: map[int]int{}}
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
	l.countLead(q, -1)
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
	return false, inUse, l.waitIn(node, vmid, false)
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
func (l *limiter) waitIn(node string, vmid int, lead bool) (ahead int) {
	l.enqueue(node, vmid, lead)
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

// enqueue puts vmid in line for node, keeping its place if it is there;
// lead says what it waits for (room to begin, or a slot).
func (l *limiter) enqueue(node string, vmid int, lead bool) {
	if q, ok := l.queued[vmid]; ok && q.node == node {
		if q.lead != lead {
			l.countLead(q, -1)
			q.lead = lead
			l.queued[vmid] = q
			l.countLead(q, 1)
		}
		return
	}
	l.dequeue(vmid)
	l.ticket++
	q := queuedAt{node: node, ticket: l.ticket, lead: lead}
	l.queued[vmid] = q
	l.countLead(q, 1)
	if l.queues[node] == nil {
		l.queues[node] = &nodeQueue{}
	}
	l.queues[node].order = append(l.queues[node].order, queueEntry{vmid: vmid, ticket: l.ticket})
}

func (l *limiter) countLead(q queuedAt, d int) {
	if !q.lead {
		return
	}
	if l.leadWaiting[q.node] += d; l.leadWaiting[q.node] == 0 {
		delete(l.leadWaiting, q.node)
	}
}

package observer

import (
	"math"
	"time"
)

// nodeBudget is the verification budget of each node: at most limit
// verification reads in any window of its length, per node. Each node's
// pveproxy serves the reads of its own guests (three workers), so the
// budget is the node's, not the cluster's: an estate of 100 nodes is
// verified as fast as one of its nodes, not 100 times slower.
//
// It is a sliding window, not a token bucket: a bucket refilled between
// passes lets a node serve a pass's whole share at once; the window
// bounds every second. A read counts from when it is picked until it is
// sent, then for a window from when it was sent: a read sent late (behind
// a pass's other reads, or a slow journal call) must not let the next
// ones come less than a window after it. Its times are the observer's
// clock, so tests drive it with a fake one.
type nodeBudget struct {
	window time.Duration
	limit  int
	nodes  map[string][]budgetRead // each node's reads within a window, or not sent yet (at most limit)
}

// budgetRead is one read a node's budget counts.
type budgetRead struct {
	at   time.Time // when it was sent; while not sent, when it was picked
	sent bool
}

// newNodeBudget paces rate reads a second per node: limit ⌊rate⌋ in any
// second from 1 a second up, one per 1/rate below.
func newNodeBudget(rate float64) nodeBudget {
	if rate >= 1 {
		return nodeBudget{window: time.Second, limit: int(math.Floor(rate)), nodes: map[string][]budgetRead{}}
	}
	return nodeBudget{window: time.Duration(float64(time.Second) / rate), limit: 1, nodes: map[string][]budgetRead{}}
}

// rate is the budget's reads per second per node.
func (b *nodeBudget) rate() float64 { return float64(b.limit) / b.window.Seconds() }

// counts reports whether r still counts against its node at now.
func (b *nodeBudget) counts(r budgetRead, now time.Time) bool {
	return !r.sent || now.Sub(r.at) < b.window
}

// avail is how many reads node may start at now.
func (b *nodeBudget) avail(node string, now time.Time) int {
	n := b.limit
	for _, r := range b.nodes[node] {
		if b.counts(r, now) {
			n--
		}
	}
	return max(n, 0)
}

// spend records n reads of node picked at now (n ≤ avail), not sent yet.
func (b *nodeBudget) spend(node string, now time.Time, n int) {
	rs := b.nodes[node]
	kept := rs[:0]
	for _, r := range rs {
		if b.counts(r, now) {
			kept = append(kept, r)
		}
	}
	for range n {
		kept = append(kept, budgetRead{at: now})
	}
	b.nodes[node] = kept
}

// sent records that one of node's picked reads was sent at at (at or
// after it was picked): it counts for a window from then.
func (b *nodeBudget) sent(node string, at time.Time) {
	rs := b.nodes[node]
	for i := range rs {
		if !rs[i].sent {
			rs[i] = budgetRead{at: at, sent: true}
			return
		}
	}
}

// settle is sent(node, at) for a picked read that was sent, else release.
func (b *nodeBudget) settle(node string, at time.Time, wasSent bool) {
	if wasSent {
		b.sent(node, at)
	} else {
		b.release(node)
	}
}

// release gives back one of node's picked reads that was never sent.
func (b *nodeBudget) release(node string) {
	rs := b.nodes[node]
	for i := range rs {
		if !rs[i].sent {
			b.nodes[node] = append(rs[:i], rs[i+1:]...)
			return
		}
	}
}

// whole is when every node's budget is whole again: a window after the
// last read sent (the zero time if that is not after now).
func (b *nodeBudget) whole(now time.Time) time.Time {
	var w time.Time
	for _, rs := range b.nodes {
		for _, r := range rs {
			if end := r.at.Add(b.window); r.sent && end.After(now) && end.After(w) {
				w = end
			}
		}
	}
	return w
}

// forget drops the nodes none of whose reads counts any more: the map
// holds the nodes verified lately, not every node ever seen.
func (b *nodeBudget) forget(now time.Time) {
	for node, rs := range b.nodes {
		counted := false
		for _, r := range rs {
			counted = counted || b.counts(r, now)
		}
		if !counted {
			delete(b.nodes, node)
		}
	}
}

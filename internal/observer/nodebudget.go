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
// bounds every second. Its times are the observer's clock, so tests drive
// it with a fake one.
type nodeBudget struct {
	window time.Duration
	limit  int
	nodes  map[string][]time.Time // each node's last reads, oldest first (at most limit)
}

// newNodeBudget paces rate reads a second per node: limit ⌊rate⌋ in any
// second from 1 a second up, one per 1/rate below.
func newNodeBudget(rate float64) nodeBudget {
	if rate >= 1 {
		return nodeBudget{window: time.Second, limit: int(math.Floor(rate)), nodes: map[string][]time.Time{}}
	}
	return nodeBudget{window: time.Duration(float64(time.Second) / rate), limit: 1, nodes: map[string][]time.Time{}}
}

// rate is the budget's reads per second per node.
func (b *nodeBudget) rate() float64 { return float64(b.limit) / b.window.Seconds() }

// avail is how many reads node may start at now.
func (b *nodeBudget) avail(node string, now time.Time) int {
	n := b.limit
	for _, t := range b.nodes[node] {
		if now.Sub(t) < b.window {
			n--
		}
	}
	return max(n, 0)
}

// spend records n reads of node started at now (n ≤ avail).
func (b *nodeBudget) spend(node string, now time.Time, n int) {
	at := b.nodes[node]
	for range n {
		if len(at) == b.limit {
			at = append(at[:0], at[1:]...)
		}
		at = append(at, now)
	}
	b.nodes[node] = at
}

// forget drops the nodes whose reads are all older than a window: the
// map holds the nodes verified lately, not every node ever seen.
func (b *nodeBudget) forget(now time.Time) {
	for node, at := range b.nodes {
		if len(at) == 0 || now.Sub(at[len(at)-1]) >= b.window {
			delete(b.nodes, node)
		}
	}
}

package executor

import (
	"context"
	"testing"

	"golang.org/x/time/rate"
)

// The node rate is shared by the executors, and each may make a few calls
// at once within its share: up to the node's three pvedaemon workers
// between them, never more than a second's share.
func TestNodeRateShareAndBurst(t *testing.T) {
	for _, tc := range []struct {
		perNode   float64
		executors int
		burst     int
	}{{10, 1, 3}, {10, 2, 1}, {10, 3, 1}, {2, 1, 2}, {1, 1, 1}, {0.5, 1, 1}, {100, 4, 1}} {
		if got := nodeBurst(tc.perNode, tc.executors); got != tc.burst {
			t.Errorf("rate %g, %d executors: burst %d, want %d", tc.perNode, tc.executors, got, tc.burst)
		}
	}
	members := 1
	r := newNodeRates(10, func() int { return members })
	if err := r.wait(context.Background(), "pve1"); err != nil {
		t.Fatal(err)
	}
	l := r.lim["pve1"]
	if l.Limit() != 10 || l.Burst() != 3 {
		t.Fatalf("one executor: limit %v burst %d", l.Limit(), l.Burst())
	}
	members = 2
	if err := r.wait(context.Background(), "pve2"); err != nil {
		t.Fatal(err)
	}
	for node, l := range r.lim {
		if l.Limit() != rate.Limit(5) || l.Burst() != 1 {
			t.Errorf("two executors, %s: limit %v burst %d", node, l.Limit(), l.Burst())
		}
	}
}

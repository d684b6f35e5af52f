package observer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/observer"
)

// sentTimes records when each read of a countingPVE was sent, on the fake
// clock, and checks that no node was sent more than 2 in any second.
type sentTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (s *sentTimes) add(t time.Time) {
	s.mu.Lock()
	s.at = append(s.at, t)
	s.mu.Unlock()
}

// check fails t if 3 reads were sent within a second (one node).
func (s *sentTimes) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 2; i < len(s.at); i++ {
		if d := s.at[i].Sub(s.at[i-2]); d < time.Second {
			t.Fatalf("3 reads sent within %s: %s, %s, %s", d, s.at[i-2], s.at[i-1], s.at[i])
		}
	}
}

// TestVerifyBudgetCountsFromSend: a verification read counts against its
// node's budget from when it was sent, not from when its round picked it.
// Here the round's first read takes 300 ms (the node is busy), so its
// second is sent 300 ms after the pick; a round a second after the pick
// may send one read, not two: two would make three within a second of
// the late one.
func TestVerifyBudgetCountsFromSend(t *testing.T) {
	px := newCountingPVE(10)
	clk := newClock()
	o, _ := memObserver(t, px, clk, func(c *observer.Config) { c.ReadConcurrency = 1 }) // one read at a time
	pass(t, o)
	clk.Advance(11 * time.Second) // every guest due
	var sent sentTimes
	slow := true
	px.onRead = func(int) {
		sent.add(clk.Now())
		if slow {
			slow = false
			clk.Advance(300 * time.Millisecond)
		}
	}
	if n, _ := o.VerifyRound(tctx(t)); n != 2 {
		t.Fatalf("first round: %d reads, want 2", n)
	}
	clk.Set(t0.Add(12 * time.Second)) // a second after the first round's pick
	if n, _ := o.VerifyRound(tctx(t)); n != 1 {
		t.Fatalf("a second after the pick: %d reads, want 1 (the late read counts until %s)", n, t0.Add(12300*time.Millisecond))
	}
	clk.Set(t0.Add(12300 * time.Millisecond))
	if n, _ := o.VerifyRound(tctx(t)); n != 1 {
		t.Fatalf("a second after the late read: %d reads, want 1", n)
	}
	sent.check(t)
}

// TestRoundsKeepTheRate: Run starts each verification round when every
// node's budget is whole again, not on a fixed tick. On a tick, a round
// whose journal call answered a moment quicker than the last one's came
// less than a window after it, found every budget spent and read nothing:
// rounds read at two thirds of the rate (converge bench --profile estate:
// 75 s to verify every guest where 50 s were due). Here the journal call
// that starts each round takes 0 to 3 ms, and every round reads each
// node's whole budget, never 3 in a second.
func TestRoundsKeepTheRate(t *testing.T) {
	const nodes, rounds = 3, 20
	px := newCountingPVEOn(120, nodes)
	clk := newClock()
	o, j := memObserver(t, px, clk)
	pass(t, o)
	clk.Advance(11 * time.Second) // every guest due
	perNode := map[string]*sentTimes{}
	for _, r := range px.inv {
		if perNode[r.Node] == nil {
			perNode[r.Node] = &sentTimes{}
		}
	}
	nodeOf := func(vmid int) string { return px.inv[vmid-100].Node }
	px.onRead = func(vmid int) { perNode[nodeOf(vmid)].add(clk.Now()) }
	lag := []time.Duration{3 * time.Millisecond, 0, 2 * time.Millisecond, time.Millisecond}
	i := 0
	j.onInfo = func() { clk.Advance(lag[i%len(lag)]) }
	start := clk.Now()
	for ; i < rounds; i++ {
		n, failed := o.VerifyRound(tctx(t))
		if n != 2*nodes || failed != 0 {
			t.Fatalf("round %d at %s: %d reads (%d failed), want %d", i, clk.Now().Sub(start), n, failed, 2*nodes)
		}
		d := o.NextRound(true)
		if d > time.Second {
			t.Fatalf("round %d: next in %s, more than a window", i, d)
		}
		clk.Advance(d)
	}
	if took := clk.Now().Sub(start); took > rounds*(time.Second+3*time.Millisecond) {
		t.Fatalf("%d rounds took %s", rounds, took)
	}
	for _, s := range perNode {
		s.check(t)
	}
	// A round that read nothing (nothing due) waits a window.
	j.onInfo = nil
	if d := o.NextRound(false); d <= 0 || d > time.Second {
		t.Fatalf("after a round that read nothing: next in %s", d)
	}
}

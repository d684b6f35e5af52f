package views_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/views"
)

// A planner writes its cluster document at every flush, also between
// `converge rebuild` dropping the bucket and the planner noticing it: the
// wait must not end on that document while the guests' documents are
// still missing (it reported "0 guests rewritten" under load).
func TestWaitRewrittenWaitsForEveryGuest(t *testing.T) {
	f := newFixture(t)
	f.put(t, views.ClusterKey("pve"), views.ClusterDoc{Seq: 50, Guests: 3})
	clk := clocktest.New(t0)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := views.WaitRewritten(f.ctx, f.r, clk, 40)
		done <- result{n, err}
	}()
	// poll lets the waiter make one more check; false once it returned.
	poll := func() bool {
		for clk.Pending() == 0 {
			select {
			case r := <-done:
				done <- r
				return false
			default:
				runtime.Gosched()
			}
		}
		clk.Advance(time.Second)
		return true
	}
	for i := range 10 {
		if !poll() {
			r := <-done
			t.Fatalf("returned after %d checks with %d documents of 3 (%v)", i, r.n, r.err)
		}
	}
	for vmid := 100; vmid < 103; vmid++ {
		f.put(t, views.GuestKey("pve", vmid), doc("pve", vmid, "converged", ""))
	}
	for poll() {
	}
	if r := <-done; r.err != nil || r.n != 3 {
		t.Fatalf("WaitRewritten = %d, %v; want 3 documents", r.n, r.err)
	}
}

package observer_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// What becomes of a guest whose change was deferred (explain.go) until
// the budget reads it.

// TestDeferredThenChangedOutOfBand: a deferred guest whose row changes
// again, unexplained, before the budget reads it is read at once.
func TestDeferredThenChangedOutOfBand(t *testing.T) {
	w := newExplainWorld(t, nil)
	w.result(t, w.act(explainVMID))
	if st := pass(t, w.o); st.Deferred != 1 || st.ConfigReads != 0 {
		t.Fatalf("deferral: %+v", st)
	}
	w.row(explainVMID, func(r *pve.Resource) { r.Lock = "migrate" })
	last := w.j.last()
	st := pass(t, w.o) // same instant: no budget
	if st.Deferred != 0 || st.ConfigReads != 1 || w.reads(explainVMID) != 2 {
		t.Fatalf("out-of-band change of a deferred guest: %+v, %d reads", st, w.reads(explainVMID))
	}
	if obs := w.published(t, last, explainVMID); len(obs) != 1 || obs[0].Lock != "migrate" || obs[0].Config.MemoryMiB != 1024 {
		t.Fatalf("published %+v", obs)
	}
}

// TestDeferredNotLeftToExpire: a deferred guest the budget has not read
// by the time its snapshot is due again (half ObservedTTL) is read at once:
// its snapshot is not built from a config older than its row.
func TestDeferredNotLeftToExpire(t *testing.T) {
	w := &explainWorld{px: newCountingPVE(3), clk: newClock()}
	// One read a node per 20 s: a verification period of a minute.
	w.o, w.j = memObserver(t, w.px, w.clk, func(c *observer.Config) { c.ObservedTTL, c.VerifyRate = 40*time.Second, 0.05 })
	w.j.Publish(events.Message{Subject: events.Subject(events.KindDesired, events.DefaultCluster, 999), Data: []byte(`{}`)})
	pass(t, w.o)
	w.clk.Advance(10 * time.Second)
	if n, _ := w.o.VerifyRound(tctx(t)); n != 1 {
		t.Fatalf("round: %d reads, want 1", n)
	}
	const vmid = 101
	ob := w.act(vmid)
	r := events.Result{Meta: events.NewMeta("executor@test", "", w.clk.Now()), ActionID: "a1", VMID: vmid,
		Cluster: events.DefaultCluster, Op: events.OpSetConfig, Status: events.ResultSucceeded, Executor: "executor@test", Observed: ob}
	body, err := events.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	w.j.Publish(events.Message{Subject: events.Subject(events.KindResult, events.DefaultCluster, vmid), Data: body})
	if st := pass(t, w.o); st.Deferred != 1 || st.ConfigReads != 0 {
		t.Fatalf("deferral: %+v", st)
	}
	w.clk.Advance(11 * time.Second) // 21 s since the first pass; the budget's next read at 30 s
	last := w.j.last()
	st := pass(t, w.o)
	obs := w.published(t, last, vmid)
	if st.ConfigReads != 1 || w.reads(vmid) != 2 || len(obs) != 1 || obs[0].Config.MemoryMiB != 1024 || obs[0].Status != "stopped" {
		t.Fatalf("a deferred guest due for its TTL: %+v, %d reads, published %+v", st, w.reads(vmid), obs)
	}
}

// TestDeferredBehindOverdue: a deferred guest goes ahead of the guests
// within their verification period, not of those already past it: an
// executor changing a node's guests faster than its budget reads them
// must not starve the guests it does not touch.
func TestDeferredBehindOverdue(t *testing.T) {
	w := newExplainWorld(t, nil)    // every guest read at 0 s, 100 and 101 again at 11 s
	w.clk.Advance(14 * time.Second) // 25 s: all but 100 and 101 past their period (20 s)
	if n, _ := w.o.VerifyRound(tctx(t)); n != 2 || w.reads(102) != 2 || w.reads(103) != 2 {
		t.Fatalf("round: %d reads", n)
	}
	const vmid = 101
	w.result(t, w.act(vmid))
	if st := pass(t, w.o); st.Deferred != 1 || st.ConfigReads != 0 {
		t.Fatalf("deferral: %+v", st)
	}
	w.clk.Advance(time.Second)
	if n, _ := w.o.VerifyRound(tctx(t)); n != 2 || w.reads(104) != 2 || w.reads(105) != 2 || w.reads(vmid) != 2 {
		t.Fatalf("round: %d reads, %d of 104, %d of 105, %d of %d; want the overdue 104 and 105 first",
			n, w.reads(104), w.reads(105), w.reads(vmid), vmid)
	}
	// Then, once the overdue are read, no later than the guests within
	// their period (100, read at 11 s).
	for range 20 {
		w.clk.Advance(time.Second)
		w.o.VerifyRound(tctx(t))
		if w.reads(100) == 3 && w.reads(vmid) == 2 {
			t.Fatalf("100, within its period, verified before %d", vmid)
		}
		if w.reads(vmid) == 3 {
			break
		}
	}
	if w.reads(vmid) != 3 {
		t.Fatalf("%d never verified", vmid)
	}
	for v := 102; v < 140; v++ {
		if w.reads(v) != 2 {
			t.Fatalf("%d read %d times when %d was: every overdue guest goes first, once", v, w.reads(v), vmid)
		}
	}
}

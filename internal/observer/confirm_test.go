package observer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// TestConfirmationSparedPerGuest: a changed snapshot is confirmed (read
// and published once more on the next pass) only when something of its
// own guest may have come between its read and its publish: a result of
// the guest journalled after the read's AfterSeq, or another observation
// of it. Another guest's result on a busy journal (an estate's executors
// at work) spares it: the projector adopted the snapshot and holds it.
// Before, any other event did not: after a mass change, every guest the
// budget had just read and found changed was read again at once, outside
// the budget, a node's share in one burst.
func TestConfirmationSparedPerGuest(t *testing.T) {
	const vmid = 100
	for _, tc := range []struct {
		name    string
		during  func(t *testing.T, j *memJournal) // while the changed guest is read
		confirm bool
	}{
		{"another guest's result", func(t *testing.T, j *memJournal) { foreign(t, j, 101) }, false},
		{"its own result", func(t *testing.T, j *memJournal) { foreign(t, j, vmid) }, true},
		{"another observation of it", func(t *testing.T, j *memJournal) {
			ob := events.Observed{Meta: events.NewMeta("someone", "", t0), VMID: vmid, Cluster: events.DefaultCluster, Exists: true}
			body, err := events.Encode(ob)
			if err != nil {
				t.Fatal(err)
			}
			j.Publish(events.Message{Subject: events.Subject(events.KindObserved, events.DefaultCluster, vmid), Data: body})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			px := newCountingPVE(3)
			clk := newClock()
			o, j := memObserver(t, px, clk, func(c *observer.Config) { c.VerifyOff = true })
			foreign(t, j, 999) // a journal that is not empty: reads carry an AfterSeq
			pass(t, o)
			// Renamed: the row shows it, so the next pass reads it at once.
			px.edit(vmid, func(c *pve.GuestConfig) { c.Name = "renamed" })
			px.mu.Lock()
			px.inv[0].Name = "renamed"
			px.mu.Unlock()
			px.onRead = func(v int) {
				if v == vmid {
					tc.during(t, j)
				}
			}
			clk.Advance(10 * time.Second)
			if st := pass(t, o); st.ConfigReads != 1 || st.Published != 1 {
				t.Fatalf("the change: %+v", st)
			}
			px.onRead = nil
			last := j.last()
			clk.Advance(10 * time.Second)
			st := pass(t, o)
			confirmed := len(j.observed(t, last)) == 1
			if confirmed != tc.confirm || st.ConfigReads != map[bool]int{false: 0, true: 1}[tc.confirm] {
				t.Fatalf("next pass: %+v, confirmed %v; want confirmed %v", st, confirmed, tc.confirm)
			}
		})
	}
}

// TestConfirmationsWithinBudget: the reads that confirm changed snapshots
// go first within each node's verification budget, ahead of guests due
// for verification, instead of at once on the next pass: after a mass
// change that was a node's share of them in one burst. Here six guests of
// one node changed while their own results were journalled; the rounds
// read them two a second, and the next pass publishes them once more
// without reading anything at once.
func TestConfirmationsWithinBudget(t *testing.T) {
	px := newCountingPVE(20)
	clk := newClock()
	o, j := memObserver(t, px, clk)
	foreign(t, j, 999)
	pass(t, o)
	changed := []int{110, 111, 112, 113, 114, 115}
	for _, vmid := range changed {
		px.edit(vmid, func(c *pve.GuestConfig) { c.Name = "renamed" })
		px.mu.Lock()
		px.inv[vmid-100].Name = "renamed"
		px.mu.Unlock()
	}
	px.onRead = func(vmid int) {
		if vmid >= 110 && vmid <= 115 {
			foreign(t, j, vmid) // its own result, while the observer reads it
		}
	}
	clk.Advance(10 * time.Second)
	if st := pass(t, o); st.ConfigReads != 8 || st.Verified != 2 || st.Published != 6 {
		t.Fatalf("the change: %+v", st)
	}
	px.onRead = nil
	var sent sentTimes
	px.onRead = func(int) { sent.add(clk.Now()) }
	for i := range 3 {
		clk.Advance(time.Second)
		if n, _ := o.VerifyRound(tctx(t)); n != 2 {
			t.Fatalf("round %d: %d reads", i, n)
		}
	}
	for _, vmid := range changed {
		if px.reads[vmid] != 3 {
			t.Fatalf("%d read %d times, want 3: the confirmations go first", vmid, px.reads[vmid])
		}
	}
	last := j.last()
	clk.Advance(7 * time.Second)
	st := pass(t, o)
	if st.ConfigReads != st.Verified || len(j.observed(t, last)) != 6 {
		t.Fatalf("the pass after: %+v, published %d; want the six confirmed, nothing read at once", st, len(j.observed(t, last)))
	}
	sent.check(t)
}

// TestConfirmationDueAgainReadAtOnce: a guest waiting for its
// confirmation read whose snapshot is due again (half ObservedTTL) is read
// at once, as a deferred one is: published again as it was, the
// republish would have passed for its confirmation.
func TestConfirmationDueAgainReadAtOnce(t *testing.T) {
	px := newCountingPVE(3)
	clk := newClock()
	// One read a node per 20 s; snapshots due again after 20 s.
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.ObservedTTL, c.VerifyRate = 40*time.Second, 0.05 })
	foreign(t, j, 999)
	pass(t, o)
	results := map[int]uint64{}
	var resultsMu sync.Mutex // 100 and 101 are read at once
	for _, vmid := range []int{100, 101} {
		px.edit(vmid, func(c *pve.GuestConfig) { c.Name = "renamed" })
		px.mu.Lock()
		px.inv[vmid-100].Name = "renamed"
		px.mu.Unlock()
	}
	px.onRead = func(vmid int) {
		if vmid == 100 || vmid == 101 {
			seq := foreign(t, j, vmid) // its own result, while the observer reads it
			resultsMu.Lock()
			results[vmid] = seq
			resultsMu.Unlock()
		}
	}
	clk.Advance(10 * time.Second)
	if st := pass(t, o); st.ConfigReads != 3 || st.Verified != 1 || st.Published != 2 {
		t.Fatalf("the change: %+v", st) // 102 verified: the budget's next read at 30 s
	}
	px.onRead = nil
	last := j.last()
	clk.Advance(20 * time.Second)
	if n, _ := o.VerifyRound(tctx(t)); n != 1 || px.reads[100] != 3 {
		t.Fatalf("round at 30 s: %d reads, %v; want 100's confirmation", n, px.reads)
	}
	st := pass(t, o)
	obs := map[int]events.Observed{}
	for _, ob := range j.observed(t, last) {
		obs[ob.VMID] = ob
	}
	if st.ConfigReads != 1 || px.reads[101] != 3 || len(obs) != 3 {
		t.Fatalf("30 s: %+v, reads %v, published %d; want 101 read at once, all three published", st, px.reads, len(obs))
	}
	for _, vmid := range []int{100, 101} {
		if obs[vmid].AfterSeq < results[vmid] {
			t.Fatalf("%d published with after_seq %d, before its result %d", vmid, obs[vmid].AfterSeq, results[vmid])
		}
	}
}

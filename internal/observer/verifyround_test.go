package observer_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// TestVerifyRoundReadsUnlocked: a verification round does not hold the
// observer's lock while its reads are in flight (a read may take seconds
// on a busy node), and a read that a pass overtook meanwhile is dropped:
// here a pass reads guest 100 again, changed, while the round's read of
// the old config is in flight; the round must not put the old one back.
func TestVerifyRoundReadsUnlocked(t *testing.T) {
	px := newCountingPVE(3)
	clk := newClock()
	// One read at a time: the pass run during the first must not be
	// taken for the round holding the lock during the second.
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.ReadConcurrency = 1 })
	pass(t, o)
	clk.Advance(11 * time.Second) // every guest due; the round reads 100 and 101

	locked, overtaken, inPass := 0, false, false
	px.onRead = func(vmid int) {
		if inPass {
			return // the pass's own read, under its lock
		}
		if !o.Unlocked() {
			locked++
			return
		}
		if vmid != 100 || overtaken {
			return
		}
		overtaken = true
		// Changed by hand during the read: the row shows it, so a pass
		// reads it at once, the new config.
		px.edit(100, func(c *pve.GuestConfig) { c.Name, c.Description = "renamed", "new" })
		px.mu.Lock()
		px.inv[0].Name = "renamed"
		px.mu.Unlock()
		inPass = true
		if st := pass(t, o); st.ConfigReads != 1 || st.Published != 1 {
			t.Errorf("pass during the round's read: %+v", st)
		}
		inPass = false
	}
	if n, failed := o.VerifyRound(tctx(t)); n != 2 || failed != 0 {
		t.Fatalf("round: %d reads, %d failed", n, failed)
	}
	px.onRead = nil
	if locked > 0 || !overtaken {
		t.Fatalf("the round held the observer's lock during %d of its reads", locked)
	}

	// The round's older read of 100 was dropped: the next pass publishes
	// nothing of it (had it been kept, the old description would be).
	last := j.last()
	clk.Advance(time.Second)
	pass(t, o)
	for _, ob := range j.observed(t, last) {
		if ob.VMID == 100 {
			t.Fatalf("published %+v after the round: an overtaken read came back", ob)
		}
	}
}

package observer_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// TestResyncAmplificationBounded: 83 resync requests in 10 s over 200
// guests cost 16,849 Proxmox calls: every request re-read every guest.
// Requests are merged now (one resync per minute at most) and a resync's
// reads go through the verification budget: about one full re-read.
func TestResyncAmplificationBounded(t *testing.T) {
	const guests, requests = 200, 83
	px := newCountingPVE(guests)
	clk := newClock()
	reg := prometheus.NewRegistry()
	o, _ := memObserver(t, px, clk, func(c *observer.Config) { c.Registerer = reg })
	pass(t, o) // every guest read once: the observer starts knowing nothing
	before := px.totalReads()
	for range requests {
		clk.Advance(10 * time.Second / requests)
		o.Resync()
		pass(t, o) // as if each request woke a pass
	}
	reads := px.totalReads() - before
	t.Logf("%d resync requests in 10 s over %d guests: %d config reads", requests, guests, reads)
	if reads > guests {
		t.Fatalf("%d resync requests over %d guests made %d config reads, want at most one full re-read (%d)", requests, guests, reads, guests)
	}
	// The merging shows in the metrics.
	metric := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue() + mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	if asked, done, period := metric("converge_observer_resync_requests_total"), metric("converge_observer_resyncs_total"),
		metric("converge_observer_verify_period_seconds"); asked != requests || done != 1 || period != 10 {
		t.Fatalf("metrics: %v requests, %v resyncs, verify period %vs; want %d, 1, 10", asked, done, period, requests)
	}
}

// TestResyncMergedAndSpread: requests within ResyncInterval of a resync are
// merged into the next one, carried out once the interval has passed; a
// resync of an estate larger than the budget spreads its reads over passes
// at VerifyRate.
func TestResyncMergedAndSpread(t *testing.T) {
	const guests = 2000
	px := newCountingPVE(guests)
	clk := newClock()
	o, _ := memObserver(t, px, clk) // 20 reads/s, a pass every 10 s: 200 a pass
	pass(t, o)
	o.Resync()
	clk.Advance(10 * time.Second)
	st := pass(t, o)
	if !st.Resync || st.ResyncsMerged != 0 || st.Verified != 200 || st.ConfigReads != 200 {
		t.Fatalf("resync pass: %+v", st)
	}
	before := map[int]int{}
	for vmid, n := range px.reads {
		before[vmid] = n
	}
	for range 5 {
		o.Resync()
	}
	for i := range 9 {
		clk.Advance(10 * time.Second)
		st := pass(t, o)
		switch {
		case i < 5 && st.Resync, st.Verified != 200:
			t.Fatalf("pass %d after the resync: %+v", i, st)
		case i == 5 && (!st.Resync || st.ResyncsMerged != 4):
			// A minute since the resync: the five requests, merged.
			t.Fatalf("merged resync: %+v", st)
		}
	}
	// Ten passes at the budget since the first resync: every guest read.
	for vmid := 100; vmid < 100+guests; vmid++ {
		if px.reads[vmid] <= before[vmid] && before[vmid] < 2 {
			t.Fatalf("guest %d not verified within 10 passes of the resync (%d reads)", vmid, px.reads[vmid])
		}
	}
}

// TestVerificationBound: drift the inventory does not show (a pending value
// on a running VM, a description) is seen within one verification period,
// max(ConfigRefresh, guests / VerifyRate), counted in passes of the fake
// clock: one pass (10 s) at 100 guests, 50 at 10,000, and never more than
// the budget's reads a pass (20/s: 200). Until now it waited for the
// 5-minute config refresh at any size, with no budget.
func TestVerificationBound(t *testing.T) {
	for _, tc := range []struct {
		guests int
		passes int // one period, in passes of 10 s
	}{{100, 1}, {10000, 50}} {
		px := newCountingPVE(tc.guests)
		clk := newClock()
		o, j := memObserver(t, px, clk)
		pass(t, o)
		// Someone sets a pending value on every guest: each must be seen.
		for vmid := 100; vmid < 100+tc.guests; vmid++ {
			px.edit(vmid, func(c *pve.GuestConfig) { c.Pending["cores"] = "1" })
		}
		last := j.last()
		seen := map[int]bool{}
		n := 0
		for n < 2*tc.passes && len(seen) < tc.guests {
			n++
			clk.Advance(10 * time.Second)
			if st := pass(t, o); st.ConfigReads > 200 {
				t.Fatalf("%d guests, pass %d: %d config reads, over the budget (200 a pass)", tc.guests, n, st.ConfigReads)
			}
			for _, ob := range j.observed(t, last) {
				if ob.Pending["cores"] == "1" {
					seen[ob.VMID] = true
				}
			}
			last = j.last()
		}
		if len(seen) < tc.guests || n > tc.passes {
			t.Fatalf("%d guests: %d pending edits seen after %d passes, want all within %d", tc.guests, len(seen), n, tc.passes)
		}
		t.Logf("%d guests: every pending edit seen within %d passes of 10 s", tc.guests, n)
	}
}

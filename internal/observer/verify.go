package observer

import (
	"time"
)

// Verification re-reads the configs of guests whose inventory row did not
// change, or changed as an executor's read-back says (explain.go), within
// a budget per node (Config.VerifyRate reads a second per
// node, nodeBudget, on the observer's clock, so tests drive it with a fake
// one): each node's pveproxy serves its own guests' reads. A pass spends
// what the budget allows at its start, and between passes verifyRound
// (verifyround.go) spends the rest, every budget window, so every node is
// verified at its rate and no second of any node holds more. Candidates
// are the guests longest unverified (a deferred one as if unverified for a
// whole period), those of a resync first; none but a deferred one is
// verified twice within Config.ConfigRefresh.

// verifyCand is a guest that may be verified: its index in the pass's
// list (verify) or its vmid (verifyRound), its node and its state.
type verifyCand struct {
	idx  int
	vmid int
	node string
	g    *guestState
}

// verifyBefore reports whether a is verified before b: confirmations
// first (publish.go), then those of a resync, then the longest unverified
// (a deferred guest as if unverified for a whole period, explain.go),
// then by vmid.
func verifyBefore(a, b *verifyCand) bool {
	switch {
	case a.g.recheck != b.g.recheck:
		return a.g.recheck // confirmations first (publish.go)
	case a.g.due != b.g.due:
		return a.g.due
	case !a.g.verifiedAt().Equal(b.g.verifiedAt()):
		return a.g.verifiedAt().Before(b.g.verifiedAt())
	}
	return a.vmid < b.vmid
}

// verifyDue reports whether g may be verified at now.
func (o *Observer) verifyDue(g *guestState, now time.Time) bool {
	return g.recheck || g.due || now.Sub(g.verifiedAt()) >= o.cfg.ConfigRefresh
}

// confirmDue reports whether g's snapshot is to be published once more,
// unconfirmed and read since (publish.go).
func (g *guestState) confirmDue() bool { return g.unconfirmed && !g.recheck }

// pickVerify keeps, of the candidates offered to add, each node's best
// within what its budget allows at now, spends that budget and returns
// them (in no particular order; the slice is reused by the next call).
//
// It keeps each node's candidates in a bounded heap rather than sorting
// them all: at 100,000 guests, every one due, sorting them was most of a
// pass's CPU, for the few hundred the budget reads.
func (o *Observer) pickVerify(now time.Time, each func(add func(verifyCand))) []verifyCand {
	if o.verifyHeaps == nil {
		o.verifyHeaps = map[string][]verifyCand{}
	}
	heaps := o.verifyHeaps
	for node, h := range heaps {
		heaps[node] = h[:0]
	}
	limits := map[string]int{} // what each node's budget allows now
	each(func(c verifyCand) {
		limit, ok := limits[c.node]
		if !ok {
			limit = o.nodes.avail(c.node, now)
			limits[c.node] = limit
		}
		if limit == 0 {
			return
		}
		heaps[c.node] = pushBounded(heaps[c.node], limit, c)
	})
	out := o.verifyPicked[:0]
	for node, h := range heaps {
		if len(h) == 0 {
			delete(heaps, node) // nodes come and go; keep the map small
			continue
		}
		o.nodes.spend(node, now, len(h))
		out = append(out, h...)
	}
	o.verifyPicked = out
	o.nodes.forget(now)
	return out
}

// pushBounded adds c to h, a max-heap under verifyBefore (its root the
// worst kept) of at most limit candidates.
func pushBounded(h []verifyCand, limit int, c verifyCand) []verifyCand {
	switch {
	case len(h) < limit:
		h = append(h, c)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !verifyBefore(&h[p], &h[i]) {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
	case verifyBefore(&c, &h[0]):
		h[0] = c
		for p := 0; ; {
			i := 2*p + 1
			if i >= len(h) {
				break
			}
			if i+1 < len(h) && verifyBefore(&h[i], &h[i+1]) {
				i++
			}
			if !verifyBefore(&h[p], &h[i]) {
				break
			}
			h[p], h[i] = h[i], h[p]
			p = i
		}
	}
	return h
}

// verify marks, among the guests this pass does not read anyway, those
// whose config the budget lets it verify now, and returns how many, how
// many of them were deferred (explain.go) and how many confirmations
// (publish.go).
func (o *Observer) verify(guests []listed, now time.Time) (n, deferred, confirm int) {
	if o.cfg.VerifyOff {
		return 0, 0, 0
	}
	picked := o.pickVerify(now, func(add func(verifyCand)) {
		for i := range guests {
			l := &guests[i]
			if l.read || !o.verifyDue(l.state, now) {
				continue
			}
			add(verifyCand{idx: i, vmid: l.res.VMID, node: l.res.Node, g: l.state})
		}
	})
	for _, c := range picked {
		guests[c.idx].read, guests[c.idx].verify = true, true
		if c.g.stale() {
			deferred++
		}
		if c.g.recheck {
			confirm++
		}
	}
	return len(picked), deferred, confirm
}

// perNode counts the guests of the node that has most, and the nodes.
func perNode(guests []listed) (most, nodes int) {
	counts := map[string]int{}
	for i := range guests {
		n := counts[guests[i].res.Node] + 1
		counts[guests[i].res.Node] = n
		most = max(most, n)
	}
	return most, len(counts)
}

// verifyPeriod bounds how long a guest goes unverified when the node with
// most guests has n (one budget window more at most, the rounds'
// granularity); 0 when verification is off.
func (o *Observer) verifyPeriod(n int) time.Duration {
	if o.cfg.VerifyOff {
		return 0
	}
	spread := time.Duration(float64(n) / o.nodes.rate() * float64(time.Second))
	return max(o.cfg.ConfigRefresh, spread)
}

// resyncAllowed reports whether a resync asked for now would be carried
// out now rather than merged into a later one.
func (o *Observer) resyncAllowed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lastResync.IsZero() || o.now().Sub(o.lastResync) >= o.cfg.ResyncInterval
}

// takeResync carries out the resync requests made since the last one, if
// ResyncInterval has passed: every known guest goes first in the
// verification order. Otherwise they wait, merged, for a later pass.
func (o *Observer) takeResync(st *PassStats, now time.Time) {
	n := o.resyncs.Load()
	if n == 0 {
		return
	}
	if !o.lastResync.IsZero() && now.Sub(o.lastResync) < o.cfg.ResyncInterval {
		o.log.Debug().Int64("requests", n).Time("at", o.lastResync.Add(o.cfg.ResyncInterval)).
			Msg("resync requests merged into the next resync")
		return
	}
	o.resyncs.Add(-n)
	o.lastResync = now
	for _, g := range o.guests {
		g.due = true
	}
	o.ha.resync = true // the cluster's facts too
	st.Resync, st.ResyncsMerged = true, int(n-1)
	o.log.Info().Uint64("pass", o.pass).Int64("requests", n).Int("guests", len(o.guests)).
		Dur("within", o.verifyPeriod(o.lastPerNode)).Float64("verify_rate", o.cfg.VerifyRate).
		Msg("resync: every guest is verified first, within each node's verification budget")
}

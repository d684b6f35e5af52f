package observer

import (
	"time"
)

// Verification re-reads the configs of guests whose inventory row did not
// change, within a budget of config reads per second (Config.VerifyRate,
// a token bucket on the observer's clock, so tests drive it with a fake
// one). Each pass spends what accrued since the last one on the guests
// longest unverified, those of a resync first; none is verified twice
// within Config.ConfigRefresh.

// verify marks, among the guests this pass does not read anyway, those
// whose config the budget lets it verify, and returns how many.
//
// It keeps the budget's n best candidates in a bounded heap rather than
// sorting them all: at 100,000 guests, every one due, sorting them was
// most of a pass's CPU, for the 200 or so the budget reads.
func (o *Observer) verify(guests []listed, now time.Time) int {
	if o.cfg.VerifyOff {
		return 0
	}
	budget := int(o.budget.TokensAt(now))
	if budget <= 0 {
		return 0
	}
	// before reports whether guest a is verified before guest b: those of
	// a resync first, then the longest unverified, then by vmid.
	before := func(a, b int) bool {
		la, lb := &guests[a], &guests[b]
		ga, gb := la.state, lb.state
		switch {
		case ga.due != gb.due:
			return ga.due
		case !ga.readAt.Equal(gb.readAt):
			return ga.readAt.Before(gb.readAt)
		}
		return la.res.VMID < lb.res.VMID
	}
	// h is a max-heap under before: its root is the worst kept candidate.
	h := o.verifyHeap[:0]
	for i := range guests {
		l := &guests[i]
		if l.read || !(l.state.due || now.Sub(l.state.readAt) >= o.cfg.ConfigRefresh) {
			continue
		}
		switch {
		case len(h) < budget:
			h = append(h, i)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if !before(h[p], h[c]) {
					break
				}
				h[p], h[c] = h[c], h[p]
				c = p
			}
		case before(i, h[0]):
			h[0] = i
			for p := 0; ; {
				c := 2*p + 1
				if c >= len(h) {
					break
				}
				if c+1 < len(h) && before(h[c], h[c+1]) {
					c++
				}
				if !before(h[p], h[c]) {
					break
				}
				h[p], h[c] = h[c], h[p]
				p = c
			}
		}
	}
	o.verifyHeap = h
	if len(h) == 0 {
		return 0
	}
	o.budget.AllowN(now, len(h))
	for _, i := range h {
		guests[i].read = true
	}
	return len(h)
}

// verifyPeriod bounds how long a guest goes unverified at an estate of n
// guests (one Interval more at most, the passes' granularity); 0 when
// verification is off.
func (o *Observer) verifyPeriod(n int) time.Duration {
	if o.cfg.VerifyOff {
		return 0
	}
	// While guests have agents to ask, they take up to a quarter of the
	// budget first (agent.go).
	spread := time.Duration(float64(n) / (o.cfg.VerifyRate * o.agents.verifyShare()) * float64(time.Second))
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
		Dur("within", o.verifyPeriod(len(o.guests))).Float64("verify_rate", o.cfg.VerifyRate).
		Msg("resync: every guest is verified first, within the verification budget")
}

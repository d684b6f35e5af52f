package observer

import (
	"context"
	"errors"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// verifyRound verifies, between passes, the guests each node's budget
// allows now (Run calls it whenever the budgets are whole again,
// nextRound): a pass every Interval could spend a node's budget only at
// its start, so a node's reads would come in bursts or a tenth of its
// rate. A round reads configs only; what changed is published by the next
// pass, which builds every guest's snapshot from its last read (a drift
// shows within one Interval more).
//
// Only guests the last pass left settled are verified here: read at least
// once, last read successful, last snapshot confirmed or to be re-read to
// confirm it (publish.go; those first). The others the next pass reads at
// once anyway. A round that cannot read the journal's extent reads
// nothing: its reads would carry no AfterSeq.
//
// The observer's lock is held to pick the guests and to record the reads,
// not while they are in flight (a read on a busy node takes seconds). A
// read whose guest was read, deferred, forgotten or unsettled meanwhile (a
// pass run concurrently; Run runs none) is dropped: the pass's knowledge
// is at least as new. Each read counts against its node's budget from
// when it was sent (nodeBudget).
//
// It returns how many configs it read and how many of those failed (the
// guest is read again by the next pass).
func (o *Observer) verifyRound(ctx context.Context) (reads, failed int) {
	o.mu.Lock()
	ready := !o.cfg.VerifyOff && o.loaded && o.pass > 0 && o.reachable
	o.mu.Unlock()
	if !ready {
		return 0, 0
	}
	// Before the reads: what they read is at least as new (AfterSeq).
	info, err := o.j.Info(ctx)
	if err != nil {
		o.log.Debug().Err(err).Msg("journal extent unknown; verification waits for the next pass")
		return 0, 0
	}
	now, picked := o.pickRound()
	if len(picked) == 0 {
		return 0, 0
	}
	// Each node serves its own reads: up to ReadConcurrency a node in
	// flight, so that a node's reads of the round are sent together (its
	// budget counts from the last one sent).
	cfgs := make([]*pve.GuestConfig, len(picked))
	errs := make([]error, len(picked))
	sent := make([]time.Time, len(picked))
	width := o.readersOver(len(picked), func(k int) string { return picked[k].node })
	reads = parallel(ctx, width, len(picked), func(k int) {
		c := &picked[k]
		sent[k] = o.now()
		cfgs[k], errs[k] = o.px.GuestConfig(ctx, pve.GuestRef{Kind: c.kind, Node: c.node, VMID: c.vmid})
		if errs[k] == nil && cfgs[k] == nil {
			errs[k] = errors.New("no config returned")
		}
	})

	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range picked {
		o.nodes.settle(picked[k].node, sent[k], k < reads)
	}
	deferred, confirm, dropped := 0, 0, 0
	for k := range picked[:reads] {
		c := &picked[k]
		g := c.g
		switch {
		case c.recheck:
			confirm++
		case c.deferred:
			deferred++
		}
		if errs[k] != nil {
			failed++
			o.log.Debug().Int("vmid", c.vmid).Str("node", c.node).Str("class", pve.Classify(errs[k]).String()).
				Err(errs[k]).Msg("verification read failed; the next pass reads the guest again")
		}
		if o.guests[c.vmid] != g || g.gen != c.gen || !g.read || g.force || g.unconfirmed && !c.recheck {
			dropped++
			continue
		}
		if errs[k] != nil {
			g.force = true // the next pass reads it at once
			continue
		}
		g.cfg, g.readAt, g.afterSeq, g.afterKnown, g.due, g.deferred, g.recheck = o.ownSnap(cfgs[k]), now, info.LastSeq, true, false, time.Time{}, false
		g.gen++
	}
	o.metrics.budgetReads(reads, deferred, confirm)
	o.log.Debug().Int("verified", reads).Int("failed", failed).Int("dropped", dropped).Int("readers", width).
		Dur("window", o.nodes.window).Msg("verification round")
	return reads, failed
}

// roundRead is a guest a round reads, as it was when picked.
type roundRead struct {
	vmid     int
	node     string
	kind     pve.Kind
	g        *guestState
	gen      uint32
	deferred bool
	recheck  bool // a confirmation (publish.go)
}

// pickRound picks, under the observer's lock, the settled guests each
// node's budget allows now and spends it. The list is the round's own:
// pickVerify's is reused by the next pass.
func (o *Observer) pickRound() (time.Time, []roundRead) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	picked := o.pickVerify(now, func(add func(verifyCand)) {
		for vmid, g := range o.guests {
			if !g.read || g.force || g.unconfirmed && !g.recheck || !o.verifyDue(g, now) {
				continue
			}
			add(verifyCand{vmid: vmid, node: g.row.Node, g: g})
		}
	})
	out := make([]roundRead, len(picked))
	for i, c := range picked {
		out[i] = roundRead{vmid: c.vmid, node: c.node, kind: c.g.row.Kind, g: c.g, gen: c.g.gen, deferred: c.g.stale(),
			recheck: c.g.recheck}
	}
	return now, out
}

// nextRound is how long Run waits for the next verification round after
// a round or pass that read something (read) or not: until every node's
// budget is whole again, a window after the last read sent; a window
// after a round that read nothing (none due). Not a fixed tick: a round
// that came a moment less than a window after the last one (its journal
// call answered quicker) found every budget spent and read nothing, so
// rounds read at two thirds of the rate (converge bench --profile estate:
// every guest verified in 75 s where 50 s were due).
func (o *Observer) nextRound(read bool) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if w := o.nodes.whole(now); read || w.After(now) {
		return max(w.Sub(now), 0)
	}
	return o.nodes.window
}

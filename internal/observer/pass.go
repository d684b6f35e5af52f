package observer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pace"
	"github.com/converge-pve/converge/internal/pve"
)

// listed is one guest of this pass's inventory.
type listed struct {
	res   *pve.Resource // the inventory's row (the inventory lives as long as the pass)
	state *guestState
	read  bool // its config is read this pass
	// explain: read only for its row's change, which an executor's
	// read-back may explain (explain.go)
	explain bool
	// verify: read within its node's budget (verify.go)
	verify bool
	cfg    *pve.GuestConfig
	err    error
}

// Pass observes Proxmox once: one inventory call, the config reads that are
// needed, publishes of what changed and of guests that disappeared, and a
// heartbeat. The error reports an unreachable Proxmox or events that could
// not be published; either way the next pass retries.
func (o *Observer) Pass(ctx context.Context) (PassStats, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.loaded {
		if err := o.load(ctx); err != nil {
			return PassStats{}, fmt.Errorf("observer: load last observations: %w", err)
		}
		o.loaded = true
	}
	o.pass++
	st := PassStats{Pass: o.pass}
	readAt := o.now()
	o.takeResync(&st, readAt)
	// The journal's end before reading Proxmox: what this pass reads is at
	// least as new as every event up to it (AfterSeq).
	info, err := o.j.Info(ctx)
	if o.extentKnown = err == nil; err != nil {
		o.log.Debug().Err(err).Msg("journal extent unknown; this pass's observations carry no after_seq")
	} else {
		st.AfterSeq = info.LastSeq
		o.desiredFrom = max(o.desiredFrom, info.LastSeq+1) // this pass covers them (soon.go)
	}
	inv, err := o.px.Inventory(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		o.noteReachability(false, err)
		herr := o.heartbeat(ctx, st, err)
		o.metrics.lastPass.Set(float64(o.now().UnixNano()) / 1e9)
		return st, errors.Join(fmt.Errorf("observer: inventory: %w", err), herr)
	}
	st.Reachable = true
	o.noteReachability(true, nil)
	o.readCluster(ctx, inv)

	guests := o.plan(inv, readAt, pace.Default(ctx))
	st.Guests = len(guests)
	o.lastCount = len(guests)
	most, nodes := perNode(guests)
	o.lastPerNode = most
	// Before the budget is spent: a deferred guest goes first (explain.go).
	var lagStatusReads int
	st.Deferred, st.CaughtUp, lagStatusReads = o.deferExplained(ctx, guests, readAt)
	// Agent reads get VerifyRate a second per node too (agent.go), as one
	// bucket for the cluster.
	o.budget.SetLimitAt(readAt, rate.Limit(o.cfg.VerifyRate*float64(max(nodes, 1))))
	o.budget.SetBurstAt(readAt, burst(o.cfg)*max(nodes, 1))
	o.reserveAgentReads(guests, readAt) // agent.go
	// The budget as it is now, not at the pass's start: a round may have
	// been due while the inventory was read.
	st.Verified, st.DeferredReads, st.ConfirmReads = o.verify(guests, o.now())
	st.VerifyPeriod = o.verifyPeriod(o.lastPerNode)
	o.period.Store(int64(st.VerifyPeriod))
	st.ConfigReads, st.ConfigErrors = o.readConfigs(ctx, guests, readAt, st.AfterSeq)
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	o.readAgents(ctx, guests, readAt, &st) // agent.go

	now := o.now()
	// Guests read this pass, and those whose snapshot is to be published
	// for another reason than its age, have their status checked against
	// the journal first (status.go). Built on the stack, and copied to the
	// heap only when published: an idle pass allocates nothing per guest.
	checks := o.checks[:0]
	for i := range guests {
		l := &guests[i]
		if l.read && l.err != nil || !l.state.read || l.state.stale() {
			continue
		}
		snap := o.snapshot(l.res, l.state, now)
		if l.read || !sameObservation(&snap, o.published[snap.VMID]) || l.state.confirmDue() {
			checks = append(checks, statusCheck{idx: i})
		}
	}
	o.checks = checks
	st.StatusReads, st.StatusErrors = o.confirmStatuses(ctx, guests, checks)
	st.StatusReads += lagStatusReads
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	var out []*events.Observed
	var unread []int
	for i, c := 0, 0; i < len(guests); i++ {
		l := &guests[i]
		var chk *statusCheck
		if c < len(checks) && checks[c].idx == i {
			chk = &checks[c]
			c++
		}
		if l.read && l.err != nil || !l.state.read || l.state.stale() || chk != nil && chk.err != nil {
			if o.published[l.res.VMID] == nil {
				unread = append(unread, l.res.VMID) // listed, yet nothing journalled
			}
			continue // keep the last published snapshot; read again next pass
		}
		snap := o.snapshot(l.res, l.state, now)
		prev := o.published[snap.VMID]
		contradicts := chk != nil && chk.contradicts(&snap)
		if !sameObservation(&snap, prev) || o.expiring(prev, now) || l.state.confirmDue() || contradicts {
			published := snap
			o.ownObservation(&published)
			out = append(out, &published)
			if contradicts {
				o.contra = append(o.contra, snap.VMID)
			}
		}
	}
	clear(checks)
	out = append(out, o.disappeared(readAt, now, st.AfterSeq)...)
	clear(guests) // the inventory and the configs read go with the pass

	pubErr := o.publish(ctx, out, &st)
	o.confirmContradictions()
	o.settleConfirmations(ctx, st, o.readers(nodes))
	o.metrics.pass(st)
	// The heartbeat vouches that every guest listed is in the journal or
	// named unread (a guest with neither does not exist) only when nothing
	// went unpublished. One unreadable guest (its node down) must not
	// keep every missing guest from being created or explained.
	slices.Sort(unread)
	st.Unread = unread
	st.Complete = o.extentKnown && len(unread) <= events.MaxUnread && st.PublishErrors == 0 && pubErr == nil
	herr := o.heartbeat(ctx, st, nil)
	o.metrics.lastPass.Set(float64(o.now().UnixNano()) / 1e9)
	ev := o.log.Debug()
	if st.Published > 0 || st.PublishErrors > 0 || st.ConfigErrors > 0 || st.StatusErrors > 0 {
		ev = o.log.Info()
	}
	ev.Uint64("pass", st.Pass).Int("guests", st.Guests).Int("config_reads", st.ConfigReads).
		Int("verified", st.Verified).Int("deferred", st.Deferred).Int("caught_up", st.CaughtUp).
		Int("confirm_reads", st.ConfirmReads).Dur("verify_period", st.VerifyPeriod).Uint64("after_seq", st.AfterSeq).
		Int("config_errors", st.ConfigErrors).Int("status_reads", st.StatusReads).Int("status_errors", st.StatusErrors).
		Int("published", st.Published).Int("gone", st.Gone).
		Int("publish_errors", st.PublishErrors).Msg("observer pass")
	return st, errors.Join(pubErr, herr)
}

// plan matches the inventory against what is remembered and decides which
// configs to read at once: guests never read, whose row changed, whose last
// read failed, or whose last changed snapshot is unconfirmed; those read
// only for a row change an executor's read-back may explain are marked for
// deferExplained. verify adds those the budget lets it verify. (A snapshot
// about to expire from the journal is published again as it is, with the
// after_seq of the read it comes from: it cannot supersede anything newer.)
// Guests no longer listed are forgotten here; disappeared reports them.
// plan is paced by p (package pace): a pass is background work.
//
// The list and the set of listed vmids (o.seen, which disappeared reads)
// are the observer's, reused from pass to pass: at 100,000 guests they
// were most of an idle pass's garbage.
func (o *Observer) plan(inv []pve.Resource, readAt time.Time, p *pace.Pacer) []listed {
	out := o.list[:0]
	if o.seen == nil {
		o.seen = make(map[int]struct{}, len(inv))
	}
	clear(o.seen)
	for i := range inv {
		p.Step()
		r := &inv[i]
		if _, dup := o.seen[r.VMID]; dup {
			o.log.Warn().Int("vmid", r.VMID).Str("node", r.Node).Msg("inventory lists a vmid twice; keeping the first row")
			continue
		}
		o.seen[r.VMID] = struct{}{}
		g := o.guests[r.VMID]
		if g == nil {
			g = &guestState{}
			o.guests[r.VMID] = g
		}
		if g.decided && g.statusRow != r.Status {
			// The inventory moved on: a status decided while it showed
			// another one says nothing of this one (were it to come back,
			// the guest may have changed since).
			g.decided = false
		}
		// A new HA placement (a rule changed) is read like a changed row:
		// a snapshot carries the AfterSeq of its read, and one older than
		// the guest's last observation would not be adopted.
		placed := g.placement.Equal(o.placement(r))
		// A confirmation waits for the budget (publish.go), but for one
		// that must not.
		recheck := g.recheck && (g.contra || o.cfg.VerifyOff)
		read := !g.read || g.force || !g.row.matches(r) || recheck || !placed
		explain := read && placed && o.mayDefer(r.VMID, g, readAt)
		if !read && (g.stale() || g.recheck) && o.expiring(o.published[r.VMID], readAt) {
			read = true // its snapshot is due again: not left for the budget
		}
		out = append(out, listed{res: r, state: g, read: read, explain: explain})
	}
	for vmid := range o.guests {
		if _, ok := o.seen[vmid]; !ok {
			delete(o.guests, vmid)
		}
	}
	o.list = out
	return out
}

// readConfigs reads, with bounded concurrency (readers), the configs plan
// asked for and records the successful reads.
func (o *Observer) readConfigs(ctx context.Context, guests []listed, readAt time.Time, afterSeq uint64) (reads, failed int) {
	var todo []int
	for i := range guests {
		if guests[i].read {
			todo = append(todo, i)
		}
	}
	sent := make([]time.Time, len(todo)) // a verification read's, for its node's budget
	reads = parallel(ctx, o.readersOver(len(todo), func(k int) string { return guests[todo[k]].res.Node }), len(todo), func(k int) {
		l := &guests[todo[k]]
		if l.verify {
			sent[k] = o.now()
		}
		l.cfg, l.err = o.px.GuestConfig(ctx, l.res.Ref())
		if l.err == nil && l.cfg == nil {
			l.err = errors.New("no config returned")
		}
	})
	for k, i := range todo {
		if l := &guests[i]; l.verify {
			o.nodes.settle(l.res.Node, sent[k], k < reads)
		}
	}

	var firstErr error
	for _, i := range todo[:reads] {
		l := &guests[i]
		g := l.state
		if l.err != nil {
			failed++
			g.force = true
			class := pve.Classify(l.err)
			// Gone: vanished or migrating since the inventory; the next
			// inventory tells.
			if firstErr == nil && class != pve.ClassGone && ctx.Err() == nil {
				firstErr = l.err
			}
			o.log.Debug().Int("vmid", l.res.VMID).Str("node", l.res.Node).Str("class", class.String()).
				Err(l.err).Msg("config read failed; keeping the last snapshot")
			continue
		}
		g.cfg, g.row, g.readAt, g.afterSeq, g.afterKnown, g.read, g.force, g.due, g.recheck = o.ownSnap(l.cfg), o.ownRow(l.res), readAt, afterSeq, o.extentKnown, true, false, false, false
		g.deferred = time.Time{}
		g.gen++
		g.placement = o.placement(l.res)
	}
	if firstErr != nil {
		o.log.Warn().Int("failed", failed).Int("reads", reads).Err(firstErr).
			Msg("config reads failed; those guests keep their last snapshot and are read again next pass")
	}
	for _, i := range todo[reads:] {
		guests[i].err = ctx.Err()
	}
	return reads, failed
}

// disappeared returns an Exists=false observation for every vmid last
// published as existing that this (successful) inventory does not list
// (o.seen, as plan left it), and once more for those published gone and
// not confirmed yet.
func (o *Observer) disappeared(readAt, now time.Time, afterSeq uint64) []*events.Observed {
	var gone []int
	for vmid, p := range o.published {
		if _, listed := o.seen[vmid]; (p.Exists || o.goneUnconf[vmid]) && !listed {
			gone = append(gone, vmid)
		}
	}
	for vmid := range o.goneUnconf {
		if _, listed := o.seen[vmid]; listed {
			delete(o.goneUnconf, vmid) // back: its own snapshot says so
		}
	}
	sort.Ints(gone)
	out := make([]*events.Observed, 0, len(gone))
	for _, vmid := range gone {
		out = append(out, o.goneSnapshot(vmid, readAt, now, afterSeq))
	}
	return out
}

// heartbeat publishes the pass's heartbeat (synchronously).
func (o *Observer) heartbeat(ctx context.Context, st PassStats, passErr error) error {
	hb := events.Heartbeat{
		Meta:      events.NewMeta(o.cfg.Name, "", o.now()),
		Cluster:   o.cfg.Cluster,
		Observer:  o.cfg.Name,
		Reachable: passErr == nil,
		Pass:      st.Pass,
		Guests:    o.lastCount,
		Interval:  o.cfg.Interval,
		// Published so that status can say how long a drift may hide.
		VerifyPeriod: o.verifyPeriod(o.lastPerNode),
		PVE:          o.pveFacts(),
	}
	if passErr != nil {
		hb.Error = passErr.Error()
	}
	if st.Complete {
		hb.AfterSeq, hb.Unread = st.AfterSeq, st.Unread
	}
	body, err := events.Encode(hb)
	if err != nil {
		return fmt.Errorf("observer: encode heartbeat: %w", err)
	}
	m := events.Message{Subject: events.ClusterSubject(events.KindHeartbeat, o.cfg.Cluster), Data: body}
	if _, err := o.j.Append(ctx, m, o.expect()); err != nil {
		return fmt.Errorf("observer: publish heartbeat: %w", err)
	}
	return nil
}

// noteReachability logs changes of Proxmox's reachability once, not every
// pass.
func (o *Observer) noteReachability(ok bool, err error) {
	switch {
	case ok && !o.reachable:
		o.log.Info().Uint64("pass", o.pass).Msg("proxmox reachable again")
	case !ok && (o.reachable || err.Error() != o.lastErr):
		o.log.Warn().Uint64("pass", o.pass).Str("class", pve.Classify(err).String()).Err(err).
			Msg("proxmox unreachable: publishing heartbeats only, no observations")
	case !ok:
		o.log.Debug().Uint64("pass", o.pass).Err(err).Msg("proxmox still unreachable")
	}
	o.reachable = ok
	if ok {
		o.metrics.reachable.Set(1)
	} else {
		o.metrics.reachable.Set(0)
	}
	o.lastErr = ""
	if err != nil {
		o.lastErr = err.Error()
	}
}

// expiring reports whether a published snapshot is past half its TTL: it
// is published again, so that the guest's newest observation never expires
// from the journal.
func (o *Observer) expiring(prev *events.Observed, now time.Time) bool {
	return o.cfg.ObservedTTL > 0 && prev != nil && now.Sub(prev.Time) >= o.cfg.ObservedTTL/2
}

// expect stamps the observer's events with their term (ObservedTTL).
func (o *Observer) expect() journal.Expect { return journal.Expect{TTL: o.cfg.ObservedTTL} }

// readers is how many reads a pass runs at once over nodes nodes:
// ReadConcurrency a node, since each node's pveproxy serves its own
// guests' reads (the Proxmox client keeps each node's share to what its
// workers serve). Four at once for the whole cluster made a pass over an
// estate's changed guests take a read's latency per four guests: at 100
// nodes and 10,000 guests changed, 40 s a pass (converge bench --profile
// estate, 3.6 × the ideal).
func (o *Observer) readers(nodes int) int { return o.cfg.ReadConcurrency * max(nodes, 1) }

// readersOver is readers for n reads (or journal lookups), node(i) being
// the i-th one's node.
func (o *Observer) readersOver(n int, node func(i int) string) int {
	nodes := map[string]struct{}{}
	for i := range n {
		nodes[node(i)] = struct{}{}
	}
	return o.readers(len(nodes))
}

package observer

import (
	"context"
	"errors"
	"sync"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// A guest's status in /cluster/resources is what its node's pvestatd last
// broadcast (every 10 s, later when pvestatd is stuck on a slow storage):
// it may predate an action an executor finished and read back. Journalled
// with an observation whose AfterSeq follows that read-back, it would
// replace it in the fold, and the planner would repeat the action (a
// second shutdown of a guest already stopped, a start of one already
// running). So a status is journalled only when it agrees with the
// guest's newest journalled one (the observer's own observation, or an
// executor's read-back journalled after what that observation's reader
// knew); any other is read from the guest's status/current, a direct read
// made after the pass's AfterSeq. The inventory's status only tells the
// observer when to read. The decision stands, for the snapshots of passes
// that check nothing, while the inventory shows the same status (a stuck
// pvestatd costs one read per check of the guest, not one a pass); every
// check compares the inventory's own status with the journal again.

var errStatusMissing = errors.New("no status returned")

// journalled is a guest's newest journalled status, as far as the fold
// may hold it.
type journalled struct {
	known  bool // false: nothing journalled, unreadable, or an action without a read-back
	none   bool // nothing journalled of the guest: no observation, no result
	exists bool
	status string
}

// agrees reports whether a snapshot may carry status without a direct
// read: it is what the fold holds, or nothing of the guest is journalled
// and the inventory names a power state (a guest converge never saw, so
// no read-back it could contradict; "unknown", a guest pvestatd has not
// broadcast yet, is read).
func (j journalled) agrees(status string) bool {
	if j.none {
		return status == "running" || status == "stopped"
	}
	return j.known && j.exists && j.status == status
}

// statusCheck is a guest whose status this pass checks before publishing.
type statusCheck struct {
	idx    int // into the pass's guests
	j      journalled
	direct bool   // status read from status/current this pass
	status string // what it read
	err    error
	agreed bool // the inventory's status agrees with the journal
}

// newestJournalled is the guest's status as the fold may hold it: an
// executor's newest result, if it was journalled after what the
// observer's last published observation of the guest had read (the fold
// then keeps the read-back), else that observation.
func (o *Observer) newestJournalled(ctx context.Context, vmid int) journalled {
	e, _, err := o.lastResult(ctx, vmid, false)
	if err != nil {
		return journalled{}
	}
	return journalledOf(o.published[vmid], e)
}

// journalledOf is newestJournalled of a guest whose newest result is e
// (nil: none) and last published observation prev.
func journalledOf(prev *events.Observed, e *journal.Entry) journalled {
	if e != nil && (prev == nil || e.Seq > prev.AfterSeq) {
		r, err := events.Decode[events.Result](e.Data)
		if err != nil || r.Observed == nil {
			// An action under way, or one that ended without a read-back:
			// the guest may have changed since anything journalled.
			return journalled{}
		}
		return journalled{known: true, exists: r.Observed.Exists, status: r.Observed.Status}
	}
	if prev == nil {
		return journalled{none: e == nil}
	}
	return journalled{known: true, exists: prev.Exists, status: prev.Status}
}

// lastResult is the guest's newest result (nil: none) and, if observed,
// the sequence of its newest observation (0: none): one direct get on the
// journal, for the status check and for the deferral of changes a
// read-back explains (explain.go).
func (o *Observer) lastResult(ctx context.Context, vmid int, observed bool) (*journal.Entry, uint64, error) {
	var es []*journal.Entry
	var err error
	kinds := 1
	if observed {
		kinds = 2
		es, err = o.j.Lasts(ctx, o.cfg.Cluster, vmid, events.KindResult, events.KindObserved)
	} else {
		es, err = o.j.Lasts(ctx, o.cfg.Cluster, vmid, events.KindResult)
	}
	if err == nil && len(es) != kinds {
		err = errors.New("journal: lasts answered for the wrong number of kinds")
	}
	if err != nil {
		return nil, 0, err
	}
	var seq uint64
	if observed && es[1] != nil {
		seq = es[1].Seq
	}
	return es[0], seq, nil
}

// confirmStatuses decides the status of each guest in checks: it looks up
// the newest journalled status and reads status/current where the
// inventory's (or the standing decision's) disagrees with it. Lookups and
// reads run ReadConcurrency a node at a time (readers). A failed read leaves the guest
// unpublished this pass (err set, read again next pass).
func (o *Observer) confirmStatuses(ctx context.Context, guests []listed, checks []statusCheck) (reads, failed int) {
	parallel(ctx, o.readersOver(len(checks), func(i int) string { return guests[checks[i].idx].res.Node }), len(checks), func(i int) {
		c := &checks[i]
		l := &guests[c.idx]
		c.j = o.newestJournalled(ctx, l.res.VMID)
		// The inventory's own status, not a standing decision: a guest
		// may have changed again since one was made, the row still
		// lagging (the decision only spares reads of passes that check
		// nothing).
		if c.j.agrees(l.res.Status) {
			c.agreed = true
			return
		}
		st, err := o.px.GuestStatus(ctx, l.res.Ref())
		if err == nil && st == nil {
			err = errStatusMissing
		}
		c.direct, c.err = true, err
		if err == nil {
			c.status = st.Status
		}
	})
	for i := range checks {
		c := &checks[i]
		if c.agreed {
			guests[c.idx].state.decided = false // the inventory's status is the one
		}
		if !c.direct {
			continue
		}
		reads++
		if c.err == nil { // interned here: the reads ran concurrently
			l := &guests[c.idx]
			l.state.status, l.state.statusRow, l.state.decided = o.intern(c.status), o.intern(l.res.Status), true
		} else {
			failed++
			g := guests[c.idx].state
			g.force = true
			o.log.Debug().Int("vmid", guests[c.idx].res.VMID).Str("class", pve.Classify(c.err).String()).Err(c.err).
				Msg("status read failed; keeping the last snapshot")
		}
	}
	return reads, failed
}

// contradicts reports whether a snapshot's status differs from what the
// fold may hold: published even if it equals the observer's own last
// observation, so that a read-back the guest no longer matches gives way
// (and confirmed next pass: the read-back may have been journalled after
// this pass's AfterSeq).
func (c *statusCheck) contradicts(s *events.Observed) bool {
	return c.direct && c.j.known && (!c.j.exists || c.j.status != s.Status)
}

// parallel calls fn(0..n-1) on at most width goroutines, in order,
// stopping early when ctx ends; it returns how many it called fn for
// (those are 0..fed-1).
func parallel(ctx context.Context, width, n int, fn func(i int)) (fed int) {
	if n == 0 {
		return 0
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(width, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	defer func() { close(next); wg.Wait() }()
	for ; fed < n; fed++ {
		select {
		case next <- fed:
		case <-ctx.Done():
			return fed
		}
	}
	return fed
}

package observer

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// An executor's action changes the guest's inventory row some seconds
// later (pvestatd's broadcast), after the executor read the guest back and
// journalled the read-back with its result, which the fold holds. Reading
// the guest at once then tells the fold nothing new, and at an estate's
// scale it was the observer's burst: every changed guest of a node read as
// soon as its broadcast came (converge bench --profile estate: 46 reads to
// one node in one second, against a budget of 2). So a row change that the
// guest's newest read-back explains in full is not read at once: the row
// is adopted and the guest is verified first, within its node's budget.
//
// Explained, by the guest's newest result (one direct get, lastResult):
//   - journalled after the journal's end before the observer's last read
//     of the guest (a read-back that read knew of cannot explain a change
//     since);
//   - held by the fold: a read-back read (no AfterSeq) with no observation
//     journalled after it, or one derived with no observation journalled
//     after its basis (AfterSeq) either: the fold holds a read-back over
//     an observation journalled while its action ran, but that read (of a
//     change made meanwhile, maybe) may be newer than the basis the
//     derived config comes from, so the guest is read at once;
//   - saying what the row says, field by field of rowKey: exists, node,
//     kind, status, lock, template, HA state, pool, name, tags, cores =
//     maxcpu, memory = maxmem (the running values; pending ones are not in
//     Config). An unnamed VM ("VM 100") or sockets × cores are read at once.
//
// Until its read the guest's snapshot (new row, older config) is neither
// built nor published: the last published one stands, and what the fold
// holds, the read-back, is what the row shows, so nothing the inventory
// shows is hidden. Nothing published carries the deferral: the read that
// ends it carries its own AfterSeq, at or past the read-back (journalled
// before the lookup that found it). A guest never read, whose last read
// failed, unconfirmed, whose placement changed, whose snapshot is about
// to expire, with verification off (nothing would read it) or after a
// read without a known AfterSeq (the journal unreachable; an empty one is
// known: 0) is read at once, as is any change the
// read-back does not explain.
//
// Deferred guests are verified as if last read a whole verification period
// ago: ahead of every guest still within its period, so first while the
// budget keeps up, yet never ahead of one already past it, so an executor
// changing a node's guests faster than its budget delays everyone alike
// instead of starving the guests it does not touch.
//
// The broadcast may come after the guest was read again (verification got
// to it after the read-back): no result is then newer than the read, and
// a row that says what the read and the fold say is adopted without a
// read or a deferral (caughtUp).

// mayDefer reports whether a row change of g may wait for the budget, if a
// read-back explains it (looked up by deferExplained).
func (o *Observer) mayDefer(vmid int, g *guestState, now time.Time) bool {
	prev := o.published[vmid]
	return !o.cfg.VerifyOff && g.read && !g.force && !g.unconfirmed && g.afterKnown &&
		prev != nil && prev.Exists && !o.expiring(prev, now)
}

// rowChange is what becomes of a row change mayDefer let wait.
type rowChange uint8

const (
	readNow   rowChange = iota
	deferRead           // an executor's read-back explains it: verified first
	caughtUp            // the row caught up with what the observer read: adopted
)

// deferExplained looks up the newest result of each guest plan would read
// only for its row's change (l.explain), ReadConcurrency a node at a time,
// defers the read of those whose read-back explains the row and adopts
// the rows of those that caught up. It returns how many it deferred and
// how many it adopted.
func (o *Observer) deferExplained(ctx context.Context, guests []listed, now time.Time) (deferred, adopted, statusReads int) {
	var todo []int
	for i := range guests {
		if guests[i].explain {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return 0, 0, 0
	}
	verdict := make([]rowChange, len(todo))
	var reads atomic.Int64 // status/current reads of trailing rows
	parallel(ctx, o.readersOver(len(todo), func(k int) string { return guests[todo[k]].res.Node }), len(todo), func(k int) {
		l := &guests[todo[k]]
		verdict[k] = o.explained(ctx, l.res, l.state, &reads)
	})
	at := now.Add(-o.verifyPeriod(o.lastPerNode))
	for k, i := range todo {
		l := &guests[i]
		g := l.state
		switch verdict[k] {
		case caughtUp:
			// Its last read stands: nothing to read, defer or drop.
			l.read, g.row = false, o.ownRow(l.res)
			adopted++
		case deferRead:
			l.read, g.row = false, o.ownRow(l.res)
			g.gen++
			if g.deferred.IsZero() || at.Before(g.deferred) {
				g.deferred = at
			}
			deferred++
		}
	}
	return deferred, adopted, int(reads.Load())
}

// explained tells whether the guest's newest result carries a read-back
// that the fold holds, journalled after g's last read, saying what r says
// (deferRead), or, with no result journalled after g's last read,
// whether r caught up with what that read found (caughtUp).
func (o *Observer) explained(ctx context.Context, r *pve.Resource, g *guestState, statusReads *atomic.Int64) rowChange {
	e, observedSeq, err := o.lastResult(ctx, r.VMID, true)
	switch {
	case err != nil:
		return readNow
	case e == nil || e.Seq <= g.afterSeq:
		if o.caughtUp(r, g, e) {
			return caughtUp
		}
		return readNow
	}
	res, err := events.Decode[events.Result](e.Data)
	if err != nil {
		return readNow
	}
	if res.Observed == nil {
		// An action under way (its task started), or one that ended
		// without a read-back: the row may still be the broadcast of an
		// earlier step's read-back, which the fold holds.
		if o.lagsBehind(ctx, r, g.afterSeq, e.Seq, observedSeq) {
			return deferRead
		}
		return readNow
	}
	rb := res.Observed
	if !heldByFold(rb, e.Seq, observedSeq) {
		return readNow // the fold may hold an observation instead
	}
	if rb.VMID == r.VMID && explains(rb, r) {
		return deferRead
	}
	// A trailing broadcast differs from the newest read-back only in the
	// fields pvestatd broadcasts late; a status it contradicts is read.
	if rb.VMID != r.VMID || !liveAgree(rb, r) {
		return readNow
	}
	if !o.caughtUp(r, g, nil) && !o.lagsBehind(ctx, r, g.afterSeq, e.Seq, observedSeq) {
		return readNow
	}
	if rb.Status != r.Status {
		// The row may trail the read-back, or the guest may have stopped
		// (or started) since: status/current tells.
		statusReads.Add(1)
		st, err := o.px.GuestStatus(ctx, r.Ref())
		if err != nil || st == nil || st.Status != rb.Status {
			return readNow
		}
	}
	return deferRead
}

// liveAgree reports whether the fields /cluster/resources shows at once
// (node, kind, lock, template, HA state, pool, tags) say what ob says: a
// trailing broadcast differs from the newest read-back only in the late
// ones (status, name, maxcpu, maxmem).
func liveAgree(ob *events.Observed, r *pve.Resource) bool {
	return ob.Exists && ob.Node == r.Node && ob.Kind == eventKind(r.Kind) && ob.Lock == r.Lock &&
		ob.Template == r.Template && ob.HA == r.HAState && ob.Pool == r.Pool && slices.Equal(ob.Config.Tags, r.Tags)
}

// lagBack bounds the earlier results lagsBehind looks through.
const lagBack = 4

// lagsBehind reports whether r, a row the guest's newest read-back (at
// newest) does not explain, is the broadcast of an earlier step of the
// same change: a read-back of a result journalled after the observer's
// last read (after) and before newest says what r says (or, checked
// before it by explained, what that last read itself found: caughtUp with
// the snapshot's status, the budget having read the guest between the
// two steps). pvestatd's broadcast trails the executor by seconds, so a
// change of two steps (a config write, then the start that applies it)
// shows its first step's row after the second's read-back was journalled:
// at the end of an estate's change, each node's last guests, read at once
// outside the budget (converge bench --profile estate: 10 reads to one
// node in a second). The fold holds the newer read-back; the row catches
// up with it at the next broadcast. The live fields must say what the
// newest read-back says (liveAgree), and a status that contradicts it is
// read (status/current, explained): only the read-back's status defers.
// At most lagBack results are looked at, one direct get each, only for
// rows the newest read-back does not explain.
func (o *Observer) lagsBehind(ctx context.Context, r *pve.Resource, after, newest, observedSeq uint64) bool {
	for range lagBack {
		e, err := o.j.Next(ctx, events.KindResult, o.cfg.Cluster, r.VMID, after+1)
		if err != nil || e == nil || e.Seq >= newest {
			return false
		}
		after = e.Seq
		if res, err := events.Decode[events.Result](e.Data); err == nil && res.Observed != nil &&
			res.Observed.VMID == r.VMID && explains(res.Observed, r) {
			// Held by the fold, as the newest read-back must be.
			return heldByFold(res.Observed, e.Seq, observedSeq)
		}
	}
	return false
}

// heldByFold reports whether the fold holds ob, the read-back of the
// result at seq, given the guest's newest observation at observedSeq: no
// observation was journalled after it (after its basis, AfterSeq, for a
// derived one).
func heldByFold(ob *events.Observed, seq, observedSeq uint64) bool {
	if ob.AfterSeq > 0 {
		return observedSeq <= ob.AfterSeq
	}
	return observedSeq <= seq
}

// caughtUp reports whether r, a row that changed since g's last read,
// with no result of the guest journalled after that read (e, its newest,
// is older or nil), only caught up with what the observer knows: the
// fields pvestatd broadcasts late (name, maxcpu, maxmem, status) say what
// that read found (cores = maxcpu, memory = maxmem) and the status the
// fold holds (journalledOf: the observer's confirmed snapshot, or a
// read-back journalled after what it had read), and the live ones (node,
// lock, tags, template, HA state, pool, kind) did not change. A guest the
// budget read after its action, before the broadcast showed the action,
// was read again at once when it came, outside the budget: right after a
// mass change, a node's share of them in one burst. Its snapshot from the
// new row is what it was, or what its last read makes it, published as
// usual; a change the row cannot show is verification's.
func (o *Observer) caughtUp(r *pve.Resource, g *guestState, e *journal.Entry) bool {
	c := &g.cfg.Config
	if g.stale() {
		return false // its config predates its row
	}
	// The live fields: the row as read but for the late ones, which match
	// by construction (rowKey.matches compares every field).
	k := g.row
	k.Status, k.Name, k.MaxCPU, k.MaxMemMiB = r.Status, r.Name, r.MaxCPU, r.MaxMemMiB
	if !k.matches(r) {
		return false
	}
	if c.Name != r.Name || c.Cores != r.MaxCPU || int64(c.MemoryMiB) != r.MaxMemMiB {
		return false
	}
	return journalledOf(o.published[r.VMID], e).agrees(r.Status)
}

// explains reports whether ob says what r says, for every field of rowKey
// (TestExplainsEveryRowField keeps the two together).
func explains(ob *events.Observed, r *pve.Resource) bool {
	c := &ob.Config
	return ob.Exists && ob.Node == r.Node && ob.Kind == eventKind(r.Kind) && ob.Status == r.Status &&
		ob.Lock == r.Lock && ob.Template == r.Template && ob.HA == r.HAState && ob.Pool == r.Pool &&
		c.Name == r.Name && slices.Equal(c.Tags, r.Tags) && c.Cores == r.MaxCPU && int64(c.MemoryMiB) == r.MaxMemMiB
}

// verifiedAt is when g counts as last verified: its last read, or for a
// deferred guest the earlier time deferExplained gave it.
func (g *guestState) verifiedAt() time.Time {
	if !g.deferred.IsZero() && g.deferred.Before(g.readAt) {
		return g.deferred
	}
	return g.readAt
}

// stale reports that g's row was adopted without a read: its config
// predates the row, so no snapshot is built from it.
func (g *guestState) stale() bool { return !g.deferred.IsZero() }

package planner

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/converge-pve/converge/projector"
)

// docSig is what makes a guest's document worth rewriting: what status
// shows of the decision (its kind and reason) and the view as of the last
// event that changed it (every fold that changes a view moves its Seq:
// desired, observed, action, result, rejection, an operator's request),
// hashed together into one word. At 100,000 guests the seven sequences
// and flag it held before cost 80 B a guest more, the kind and reason
// strings' headers 30 B, and the Seq beside the hash 11 B
// (BenchmarkPlannerMemory); the documents it adds are those of the rare
// events that changed a view and nothing status shows. Two signatures
// with one 64-bit hash (about 2^-64 a comparison) would leave a status
// document one event behind: only what people read, never a decision.
// Zero is a guest with no document handed out (the map's zero value).
type docSig uint64

// sigSeed seeds the status hash; signatures are never kept beyond the
// process, so any seed does.
var sigSeed = maphash.MakeSeed()

func sigOf(v *projector.View, d Decision) docSig {
	var h maphash.Hash
	h.SetSeed(sigSeed)
	var seq [8]byte
	binary.LittleEndian.PutUint64(seq[:], v.Seq)
	h.Write(seq[:])
	h.WriteString(string(d.Status.Kind))
	h.WriteByte(0)
	h.WriteString(d.Status.Reason)
	if s := docSig(h.Sum64()); s != 0 {
		return s
	}
	return 1 // never the zero of a guest without a document
}

// slim copies a view for its document without the observations results
// embed (the view's own Observed is the newest of them).
func slim(v *projector.View) *projector.View {
	c := v.Clone()
	if c.LastResult != nil && c.LastResult.Observed != nil {
		r := *c.LastResult
		r.Observed = nil
		c.LastResult = &r
	}
	if c.Started != nil && c.Started.Observed != nil {
		r := *c.Started
		r.Observed = nil
		c.Started = &r
	}
	return c
}

// maxDocsPerFlush bounds the documents of one flush: during a mass change
// every guest's view changes at once, and writing them all each tick would
// cost the loop and crowd the journal's own writes. The rest go out with
// the following flushes (status lags, decisions do not).
const maxDocsPerFlush = 1000

// FlushDue is when the loop should call [Engine.FlushPrompt]: the zero
// time unless a guest reached a state a waiter stops on since the last
// flush, then PromptFlushInterval after that flush (flushes stay batches:
// at most one per PromptFlushInterval).
func (e *Engine) FlushDue() time.Time {
	if !e.prompt {
		return time.Time{}
	}
	return e.lastFlush.Add(PromptFlushInterval)
}

// FlushPrompt flushes if FlushDue has come.
func (e *Engine) FlushPrompt(now time.Time) {
	if at := e.FlushDue(); !at.IsZero() && !now.Before(at) {
		e.flush(now)
	}
}

// flush hands out the documents of changed guests this planner owns.
func (e *Engine) flush(now time.Time) {
	e.lastFlush, e.prompt = now, false
	f := e.out.Flush
	if f == nil {
		f = &Flush{}
		e.out.Flush = f
	}
	f.State, f.Seq, f.At, f.Guests = e.proj.State, e.proj.LastSeq, now, len(e.proj.Views)
	// One walk: a dirty guest is handed out or found unchanged since
	// written (or not this planner's) and forgotten; those beyond the
	// flush's bound stay dirty, unvisited. (A second walk over every dirty
	// guest cost each flush of a mass change at 100,000 guests as much
	// again as the documents it handed out.)
	e.dirtyHigh = max(e.dirtyHigh, len(e.dirty))
	for id := range e.dirty {
		if len(f.Docs) >= maxDocsPerFlush {
			break
		}
		delete(e.dirty, id)
		v := e.proj.Views[id]
		if v == nil || !e.mine(id) {
			// A guest that never was (undecodable first event), or one
			// its owner writes (marked again if it comes here).
			continue
		}
		d, ok := e.decision.get(id)
		if !ok {
			d = Plan(v, e.proj.State, e.cfg.Policy, now)
		}
		if sg := sigOf(v, d); e.written[id] != sg {
			e.written[id] = sg
			f.Docs = append(f.Docs, Doc{View: slim(v), Decision: d})
		}
	}
	// A map keeps the room it once needed: after a mass change (every
	// guest dirty) it is made anew once empty.
	if len(e.dirty) == 0 && e.dirtyHigh > maxDocsPerFlush {
		e.dirty, e.dirtyHigh = map[int]bool{}, 0
	}
}

// Unwritten reports documents the writer refused (busy with the previous
// flush) or failed to write: they go out again with a later flush.
func (e *Engine) Unwritten(vmids []int) {
	for _, id := range vmids {
		delete(e.written, id)
		e.dirty[id] = true
		// A settled guest's document goes out again promptly, not at
		// the next tick (FlushDue).
		if d, ok := e.decision.get(id); ok && e.caughtUp && d.Status.Kind.settled() {
			e.prompt = true
		}
	}
}

// RewriteAll marks every document for rewriting: the view store was
// dropped (converge rebuild) or lost, and is rebuilt from the fold.
func (e *Engine) RewriteAll() {
	clear(e.written)
	for id := range e.proj.Views {
		e.dirty[id] = true
	}
	e.out.Rewrite = true
}

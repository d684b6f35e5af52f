package planner

import (
	"slices"
	"time"
)

// sweepChunk is how many guests one Tick plans of a periodic full pass
// (FullPassInterval) when there are more: at 100,000 guests the whole
// pass held the planner's loop for about 350 ms a minute
// (BenchmarkFullPass100k), and every change arriving meanwhile waited for
// it. A chunk is a few milliseconds; 100,000 guests are swept in 100
// ticks (25 s at the default tick; an estate too large to be swept within
// FullPassInterval is swept again as soon as it was). An estate of at
// most sweepChunk guests is planned in one pass, as before.
const sweepChunk = 1000

// sweepIDs returns every guest's vmid, sorted, in the engine's reused
// buffer.
func (e *Engine) sweepIDs() []int {
	ids := e.idBuf[:0]
	for id := range e.proj.Views {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	e.idBuf = ids
	return ids
}

// periodicPass starts the periodic full pass: at once for a small estate
// (true), else as a sweep that Tick carries on chunk by chunk.
func (e *Engine) periodicPass(now time.Time) bool {
	if len(e.proj.Views) <= sweepChunk {
		e.fullPass(now)
		return true
	}
	e.lastFull = now
	e.sweep, e.swept = append(e.sweep[:0], e.sweepIDs()...), 0
	return false
}

// sweeping reports a sweep in progress.
func (e *Engine) sweeping() bool { return e.swept < len(e.sweep) }

// sweepOn plans the next chunk of the sweep in progress.
func (e *Engine) sweepOn(now time.Time) {
	end := min(e.swept+sweepChunk, len(e.sweep))
	for _, id := range e.sweep[e.swept:end] {
		if v := e.proj.Views[id]; v != nil {
			e.planGuest(v, now)
		}
	}
	e.swept = end
}

package planner

import "maps"

// decisions holds each guest's last decision. A guest plainly converged
// (no reason, steps, drift, retry or limit: most of an estate) is a bit
// in a vmid set and shares one value; any other holds its own, in a map,
// overwritten in place when it is planned again. The pointers never
// leave: readers get copies. At 100,000 guests a map of Decision values
// cost about 150 B a guest, and a map entry for each guest, plain ones
// pointing at the shared value, 23 B (BenchmarkPlannerMemory).
type decisions struct {
	plain vmidSet
	own   map[int]*Decision
	// ownHigh is the most guests own held since it was made: a map keeps
	// the room it once needed, so after a mass change (every guest
	// acting) it is made anew once most of them are plain again.
	ownHigh int
}

// plainConverged is the decision every plainly converged guest shares;
// never written.
var plainConverged = Decision{Status: Status{Kind: Converged}}

func isPlainConverged(d *Decision) bool {
	s := &d.Status
	return s.Kind == Converged && s.Reason == "" && len(s.Drift) == 0 && s.RetryAt.IsZero() && s.Limit == "" && len(d.Steps) == 0
}

// get returns a copy of vmid's decision; false if it was never planned.
func (ds *decisions) get(vmid int) (Decision, bool) {
	if p := ds.own[vmid]; p != nil {
		return *p, true
	}
	if ds.plain.has(vmid) {
		return plainConverged, true
	}
	return Decision{}, false
}

// minOwnRemake is the size below which own is never made anew: the copy
// would save less than it costs.
const minOwnRemake = 1024

// set records vmid's decision.
func (ds *decisions) set(vmid int, d Decision) {
	if isPlainConverged(&d) {
		ds.plain.add(vmid)
		if _, ok := ds.own[vmid]; !ok {
			return
		}
		delete(ds.own, vmid)
		if n := len(ds.own); ds.ownHigh > minOwnRemake && n <= ds.ownHigh/8 {
			// Not maps.Clone: it copies the tables, room and all.
			own := make(map[int]*Decision, n)
			maps.Copy(own, ds.own)
			ds.own, ds.ownHigh = own, n
		}
		return
	}
	ds.plain.remove(vmid)
	if p := ds.own[vmid]; p != nil {
		*p = d
		return
	}
	if ds.own == nil {
		ds.own = map[int]*Decision{}
	}
	own := new(Decision)
	*own = d
	ds.own[vmid] = own
	ds.ownHigh = max(ds.ownHigh, len(ds.own))
}

package planner

// decisions holds each guest's last decision. A guest plainly converged
// (no reason, steps, drift, retry or limit: most of an estate) points at
// one shared value; any other holds its own, overwritten in place when
// it is planned again. The pointers never leave: readers get copies. At
// 100,000 guests a map of Decision values cost about 150 B a guest
// (BenchmarkPlannerMemory).
type decisions map[int]*Decision

// plainConverged is the decision every plainly converged guest shares;
// never written.
var plainConverged = Decision{Status: Status{Kind: Converged}}

func isPlainConverged(d *Decision) bool {
	s := &d.Status
	return s.Kind == Converged && s.Reason == "" && len(s.Drift) == 0 && s.RetryAt.IsZero() && s.Limit == "" && len(d.Steps) == 0
}

// get returns a copy of vmid's decision; false if it was never planned.
func (ds decisions) get(vmid int) (Decision, bool) {
	if p := ds[vmid]; p != nil {
		return *p, true
	}
	return Decision{}, false
}

// set records vmid's decision.
func (ds decisions) set(vmid int, d Decision) {
	p := ds[vmid]
	switch {
	case isPlainConverged(&d):
		ds[vmid] = &plainConverged
	case p == nil || p == &plainConverged:
		own := new(Decision)
		*own = d
		ds[vmid] = own
	default:
		*p = d
	}
}

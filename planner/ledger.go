package planner

import "time"

// Grant decides one claim against a limits ledger key's entries: entries
// that no longer take room (live reports false) are dropped; a guest that
// already holds an entry keeps it (for a node, only for the same action);
// otherwise the entry is added if fewer than c.Limit remain. It returns the
// entries to store, whether they changed, and whether the claim holds.
func Grant(entries []Entry, c Claim, en Entry, live func(Entry) bool) (out []Entry, changed, ok bool) {
	out = make([]Entry, 0, len(entries)+1)
	for _, x := range entries {
		if !live(x) {
			changed = true
			continue
		}
		out = append(out, x)
	}
	for _, x := range out {
		if x.VMID == en.VMID && (c.Window > 0 || x.ID == en.ID) {
			return out, changed, true
		}
	}
	if len(out) >= c.Limit {
		return out, changed, false
	}
	return append(out, en), true, true
}

// Withdraw drops the guest's entry for action id (a claim granted for an
// action that was then not published).
func Withdraw(entries []Entry, vmid int, id string) (out []Entry, changed bool) {
	out = entries[:0:0]
	for _, x := range entries {
		if x.VMID == vmid && x.ID == id {
			changed = true
			continue
		}
		out = append(out, x)
	}
	return out, changed
}

// LiveFunc binds Engine.Live to a claim and a time, for Grant.
func (e *Engine) LiveFunc(c Claim, now time.Time) func(Entry) bool {
	return func(en Entry) bool { return e.Live(c, en, now) }
}

package projector

import "github.com/converge-pve/converge/events"

// Guest agent addresses (events.Addresses, pve.addresses.<cluster>.<vmid>)
// are informational: folded into View.Addresses and nothing else. They
// never change View.Observed, ObservedSeq or ObservedEventSeq (an action's
// basis, and what executors fence on), never count as an observation of
// the guest, and the change they make is reported as Change.Info, which
// the planner writes into the guest's document without planning it.

// foldAddresses folds a guest's addresses: the newest journalled report
// replaces the previous one, whatever its read_at (reports are ordered by
// the journal; there is nothing to order them against).
func (p *Projector) foldAddresses(vmid int, ev Event) Change {
	a, err := decodeAs[events.Addresses](ev)
	if err != nil {
		return Change{Err: err} // and no phantom guest for it
	}
	v := p.view(vmid)
	p.intern(&a.Publisher)
	p.intern(&a.Cluster)
	a.VMID = vmid // the subject decides which guest it is about
	v.Addresses, v.AddressesSeq = &a, ev.Seq
	v.Seq = ev.Seq // the guest's document changes
	return Change{Info: v}
}

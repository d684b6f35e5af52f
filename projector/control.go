package projector

import (
	"github.com/converge-pve/converge/events"
)

// foldControl folds an operator request. An invalid one changes nothing
// (it is reported, and skipped like any undecodable event).
func (p *Projector) foldControl(c *events.Control, ev Event) Change {
	if err := c.Validate(); err != nil {
		return Change{Err: err}
	}
	by := c.Publisher
	if by == "" {
		by = "unknown"
	}
	m := &Mark{Seq: ev.Seq, By: by, At: streamTime(ev, c.Time)}
	st := &p.State
	switch c.Command {
	case events.CommandResync:
		st.ResyncSeq, st.ResyncAt = ev.Seq, c.Time
		return Change{Cluster: true, Resync: true}
	case events.CommandPause:
		if c.All {
			st.PausedAll = m
			return Change{Cluster: true, All: true}
		}
		return p.eachGuest(c.VMIDs, ev, true, func(v *View) { v.Paused = m })
	case events.CommandResume:
		if c.All {
			st.PausedAll = nil
			for id, v := range p.Views {
				if v.Paused != nil {
					p.mutable(id, v).Paused = nil
				}
			}
			return Change{Cluster: true, All: true}
		}
		return p.eachGuest(c.VMIDs, ev, false, func(v *View) { v.Paused = nil })
	case events.CommandApprove:
		if c.All {
			st.ApprovedAll = m
			st.Losses = nil // an approval of everything accepts the inventory as it is
			return Change{Cluster: true, All: true}
		}
		return p.eachGuest(c.VMIDs, ev, false, func(v *View) { v.Approved = m })
	case events.CommandRelease:
		return p.eachGuest(c.VMIDs, ev, false, func(v *View) {
			if v.Desired == nil && v.Rejected == nil {
				return
			}
			v.Desired, v.Rejected, v.Released, v.Held = nil, nil, m, nil
			v.Failures, v.LastError, v.LastErrorKind, v.Terminal = 0, "", "", false
			v.Burst, v.Repeats = 0, 0
		})
	}
	return Change{}
}

// eachGuest applies fn to the named guests (creating views only if
// create: a pause may come before the guest's desired state), and reports
// them changed.
func (p *Projector) eachGuest(ids []int, ev Event, create bool, fn func(*View)) Change {
	var out []*View
	for _, id := range ids {
		if p.Views[id] == nil && !create {
			continue
		}
		v := p.view(id)
		fn(v)
		v.Seq = ev.Seq
		out = append(out, v)
	}
	return Change{Guests: out}
}

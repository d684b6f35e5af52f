package projector

import (
	"slices"

	"github.com/converge-pve/converge/events"
)

// foldHeartbeat folds an observer's heartbeat into the cluster state.
func (p *Projector) foldHeartbeat(ev Event) Change {
	hb, err := decodeAs[events.Heartbeat](ev)
	if err != nil {
		return Change{Err: err}
	}
	// The stream's time, not the observer's: an observer clock running
	// behind (or a heartbeat stamped in 2099) must not hide its silence.
	p.State.HeartbeatAt, p.State.HeartbeatSeq = streamTime(ev, hb.Time), ev.Seq
	p.State.Reachable, p.State.Error, p.State.Interval = hb.Reachable, hb.Error, hb.Interval
	p.State.VerifyPeriod = hb.VerifyPeriod
	if hb.PVE != nil {
		p.State.PVE = hb.PVE
	}
	if hb.Reachable && hb.AfterSeq > p.State.PassAfterSeq && hb.AfterSeq < ev.Seq {
		p.State.PassAfterSeq = hb.AfterSeq
		p.State.Unread = nil
		if len(hb.Unread) > 0 && len(hb.Unread) <= events.MaxUnread {
			p.State.Unread = slices.Sorted(slices.Values(hb.Unread))
		}
	}
	return Change{Cluster: true}
}

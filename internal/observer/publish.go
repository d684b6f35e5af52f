package observer

import (
	"context"
	"fmt"
	"slices"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// publish sends observations asynchronously, at most MaxInFlight
// unacknowledged, and records each acknowledged one as the vmid's last
// published snapshot. Unacknowledged ones are not recorded, so the next
// pass publishes them again.
func (o *Observer) publish(ctx context.Context, obs []*events.Observed, st *PassStats) error {
	o.acked = o.acked[:0]
	if len(obs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.AckTimeout)
	defer cancel()

	type flight struct {
		obs *events.Observed
		fut journal.Future
	}
	var (
		firstErr error
		window   = make([]flight, 0, min(len(obs), o.cfg.MaxInFlight))
		head     int
	)
	fail := func(ob *events.Observed, err error) {
		st.PublishErrors++
		if firstErr == nil {
			firstErr = fmt.Errorf("observer: publish observed %d: %w", ob.VMID, err)
		}
		o.log.Debug().Int("vmid", ob.VMID).Err(err).Msg("observed event not acknowledged; retrying next pass")
	}
	settle := func(f flight) {
		ack, err := f.fut.Wait(ctx)
		if err != nil {
			fail(f.obs, err)
			return
		}
		o.confirm(f.obs)
		o.acked = append(o.acked, ackedObs{vmid: f.obs.VMID, seq: ack.Seq, afterSeq: f.obs.AfterSeq})
		st.Published++
		if !f.obs.Exists {
			st.Gone++
		}
	}
	for _, ob := range obs {
		if len(window)-head >= o.cfg.MaxInFlight {
			settle(window[head])
			window[head] = flight{}
			head++
		}
		body, err := events.Encode(ob)
		if err != nil {
			fail(ob, err)
			continue
		}
		msg := events.Message{Subject: events.Subject(events.KindObserved, o.cfg.Cluster, ob.VMID), Data: body}
		fut, err := o.j.AppendAsync(msg, o.expect())
		if err != nil {
			fail(ob, err)
			continue
		}
		window = append(window, flight{obs: ob, fut: fut})
	}
	for _, f := range window[head:] {
		settle(f)
	}
	if firstErr != nil {
		o.log.Warn().Int("failed", st.PublishErrors).Int("acknowledged", st.Published).Err(firstErr).
			Msg("some observed events were not acknowledged; they are retried next pass")
	}
	return firstErr
}

// confirm records an acknowledged observation as the vmid's last published
// snapshot. One that changed the snapshot is unconfirmed: the projector
// adopts it only if its AfterSeq reaches the sequence of the observation it
// would replace, and an executor's read-back journalled while this pass
// read Proxmox is newer. The guest is read again, first within its node's
// verification budget, and the pass after that read publishes it once
// more, with a newer AfterSeq, so a real change never hides behind
// "already published". Until then the projector holds the read-back, as
// for a deferred guest (explain.go), and a row change is read at once.
// Before, the next pass read every unconfirmed guest at once, outside the
// budget: after a mass change, a node's share in one burst. A
// confirmation that changes nothing needs none.
func (o *Observer) confirm(ob *events.Observed) {
	changed := !sameObservation(ob, o.published[ob.VMID])
	o.published[ob.VMID] = ob
	if ob.Exists {
		delete(o.goneUnconf, ob.VMID)
		if g := o.guests[ob.VMID]; g != nil {
			g.unconfirmed, g.recheck, g.contra = changed, changed, false
		}
		return
	}
	if changed {
		o.goneUnconf[ob.VMID] = true
	} else {
		delete(o.goneUnconf, ob.VMID)
	}
}

// confirmContradictions marks the acknowledged observations that were
// published to contradict a read-back (status.go) unconfirmed, even when
// they equal the observer's last one: the read-back may have been
// journalled after the pass's AfterSeq, so the projector kept it; the next
// pass reads them at once (the projector holds a status known to be
// wrong) and publishes them again with a newer one.
func (o *Observer) confirmContradictions() {
	for _, vmid := range o.contra {
		if g := o.guests[vmid]; g != nil && slices.ContainsFunc(o.acked, func(a ackedObs) bool { return a.vmid == vmid }) {
			g.unconfirmed, g.recheck, g.contra = true, true, true
		}
	}
	o.contra = o.contra[:0]
}

// ackedObs is an observation this pass's publish got acknowledged.
type ackedObs struct {
	vmid     int
	seq      uint64 // its journal sequence
	afterSeq uint64 // Observed.AfterSeq: the journal's end before its read
}

// settleConfirmations spares the confirmations when nothing can have come
// between this pass's reads and its publishes: the journal grew by exactly
// the observations acknowledged, so no executor's read-back is newer than
// them (and the pass's own addresses, agent.go). On a busy journal each
// guest's is spared on its own (settled), width journal lookups at a
// time; on an unknown extent they stay due.
func (o *Observer) settleConfirmations(ctx context.Context, st PassStats, width int) {
	if len(o.acked) == 0 || !o.extentKnown {
		return
	}
	info, err := o.j.Info(ctx)
	if err != nil {
		return
	}
	quiet := info.LastSeq == st.AfterSeq+uint64(len(o.acked)+o.agents.appended)
	var todo []ackedObs
	for _, a := range o.acked {
		g := o.guests[a.vmid]
		switch {
		case quiet:
			o.confirmed(a.vmid)
		case g != nil && g.unconfirmed || o.goneUnconf[a.vmid]:
			todo = append(todo, a)
		}
	}
	ok := make([]bool, len(todo))
	parallel(ctx, width, len(todo), func(k int) { ok[k] = o.settled(ctx, todo[k]) })
	for k, a := range todo {
		if ok[k] {
			o.confirmed(a.vmid)
		}
	}
}

// confirmed records that vmid's last published snapshot needs no
// confirmation read.
func (o *Observer) confirmed(vmid int) {
	if g := o.guests[vmid]; g != nil {
		g.unconfirmed, g.recheck, g.contra = false, false, false
	}
	delete(o.goneUnconf, vmid)
}

// settled reports whether the fold holds the acknowledged observation a
// and nothing of its guest can have come between its read and it, so
// that it needs no confirmation. The projector adopts an observation
// whose AfterSeq reaches the sequence of the one it holds
// (projector.Supersedes) and every read-back of a result of the guest's
// own action: with no result of the guest journalled after a's read
// (AfterSeq), and a the guest's only observation since, every observation
// the fold held before a was journalled at or before a's AfterSeq, so it
// adopted a and holds it still. One batched get (lastResult) and one scan
// (Next) on the journal.
func (o *Observer) settled(ctx context.Context, a ackedObs) bool {
	if a.afterSeq == 0 {
		return false
	}
	res, observed, err := o.lastResult(ctx, a.vmid, true)
	if err != nil || res != nil && res.Seq > a.afterSeq || observed != a.seq {
		return false
	}
	first, err := o.j.Next(ctx, events.KindObserved, o.cfg.Cluster, a.vmid, a.afterSeq+1)
	return err == nil && first != nil && first.Seq == a.seq
}

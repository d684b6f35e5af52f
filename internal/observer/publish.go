package observer

import (
	"context"
	"fmt"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// publish sends observations asynchronously, at most MaxInFlight
// unacknowledged, and records each acknowledged one as the vmid's last
// published snapshot. Unacknowledged ones are not recorded, so the next
// pass publishes them again.
func (o *Observer) publish(ctx context.Context, obs []*events.Observed, st *PassStats) error {
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
		if _, err := f.fut.Wait(ctx); err != nil {
			fail(f.obs, err)
			return
		}
		o.published[f.obs.VMID] = f.obs
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

package observer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
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
		fut jetstream.PubAckFuture
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
		select {
		case <-f.fut.Ok():
			o.published[f.obs.VMID] = f.obs
			st.Published++
			if !f.obs.Exists {
				st.Gone++
			}
		case err := <-f.fut.Err():
			fail(f.obs, err)
		case <-ctx.Done():
			fail(f.obs, ctx.Err())
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
		msg := &nats.Msg{Subject: events.Subject(events.KindObserved, o.cfg.Cluster, ob.VMID), Data: body}
		fut, err := o.bus.JS.PublishMsgAsync(msg, o.ttl()...)
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

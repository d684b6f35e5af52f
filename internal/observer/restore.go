package observer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
)

// load fills o.published with the last observed event of every vmid of the
// cluster, read with one short-lived consumer that delivers the last
// message per stored subject (pve.observed.<cluster>.<vmid>.<partition>).
func (o *Observer) load(ctx context.Context) error {
	s, err := o.bus.Stream(ctx)
	if err != nil {
		return err
	}
	filter := events.Prefix + "." + string(events.KindObserved) + "." + o.cfg.Cluster + ".>"
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "converge observer: last observation per guest",
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", filter, err)
	}
	name := cons.CachedInfo().Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, name) // else it expires after InactiveThreshold
	}()

	want := cons.CachedInfo().NumPending
	seqs := map[int]uint64{}
	loaded := map[int]*events.Observed{}
	var got uint64
	for got < want {
		batch, err := cons.Fetch(int(min(want-got, 1000)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return err
		}
		n := 0
		last := false
		for m := range batch.Messages() {
			n++
			got++
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			last = meta.NumPending == 0
			info, err := events.ParseSubject(m.Subject())
			if err != nil || info.Cluster != o.cfg.Cluster || info.VMID == 0 {
				o.log.Warn().Str("subject", m.Subject()).Msg("ignoring an observed event on an unexpected subject")
				continue
			}
			ob, err := events.Decode[events.Observed](m.Data())
			if err != nil {
				o.log.Warn().Int("vmid", info.VMID).Uint64("seq", meta.Sequence.Stream).Err(err).
					Msg("ignoring an undecodable observed event")
				continue
			}
			if ob.VMID != info.VMID {
				ob.VMID = info.VMID // the subject decides which guest it is about
			}
			if meta.Sequence.Stream > seqs[info.VMID] {
				seqs[info.VMID] = meta.Sequence.Stream
				loaded[info.VMID] = &ob
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if last {
			break
		}
		if n == 0 {
			return fmt.Errorf("read %d of %d last observations, then nothing more arrived", got, want)
		}
	}
	o.published = loaded
	existing := 0
	for _, ob := range loaded {
		if ob.Exists {
			existing++
		}
	}
	o.lastCount = existing
	o.log.Info().Int("guests", len(loaded)).Int("existing", existing).Msg("loaded the last observation of every guest")
	return nil
}

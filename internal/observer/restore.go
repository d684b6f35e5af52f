package observer

import (
	"context"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// load fills o.published with the last observed event of every vmid of the
// cluster (the newest entry of each stored subject
// pve.observed.<cluster>.<vmid>.<partition>).
func (o *Observer) load(ctx context.Context) error {
	filter := events.Prefix + "." + string(events.KindObserved) + "." + o.cfg.Cluster + ".>"
	seqs := map[int]uint64{}
	loaded := map[int]*events.Observed{}
	err := o.j.LastPerSubject(ctx, filter, func(e journal.Entry) {
		info, err := events.ParseSubject(e.Subject)
		if err != nil || info.Cluster != o.cfg.Cluster || info.VMID == 0 {
			o.log.Warn().Str("subject", e.Subject).Msg("ignoring an observed event on an unexpected subject")
			return
		}
		ob, err := events.Decode[events.Observed](e.Data)
		if err != nil {
			o.log.Warn().Int("vmid", info.VMID).Uint64("seq", e.Seq).Err(err).Msg("ignoring an undecodable observed event")
			return
		}
		ob.VMID = info.VMID // the subject decides which guest it is about
		if e.Seq > seqs[info.VMID] {
			seqs[info.VMID] = e.Seq
			loaded[info.VMID] = &ob
		}
	})
	if err != nil {
		return err
	}
	o.published = loaded
	existing := 0
	for _, ob := range loaded {
		if ob.Exists {
			existing++
		}
	}
	o.lastCount = existing
	o.lastPerNode = existing // a bound until the first inventory tells the nodes
	o.log.Info().Int("guests", len(loaded)).Int("existing", existing).Msg("loaded the last observation of every guest")
	return nil
}

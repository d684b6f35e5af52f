package observer

import (
	"context"
	"time"

	"github.com/converge-pve/converge/events"
)

// An early pass for new guests. The planner clones a guest only once a
// complete pass begun after its desired state did not list it
// (projector.View.Missing): with passes every Interval (10 s), a batch of
// clones published just after one pass waited the whole Interval before
// its first clone (converge bench --profile clones: 10 s of a 146 s
// makespan). So between passes Run looks, every newGuestPoll, at the
// desired events journalled since the last pass began, and passes at
// once when one names a guest that pass did not list: one direct get when
// there are none. Early passes are at most one per earlyPassGap (a stream
// of new guests costs an inventory call a second, not one per guest), and
// each look reads at most newGuestScan events (a flood of changes to
// listed guests is passed over by the next pass, not read one by one).
const (
	newGuestPoll = 250 * time.Millisecond
	earlyPassGap = time.Second
	newGuestScan = 64
)

// newGuests reports whether a desired event journalled at or after the
// last pass's journal end names a guest that pass did not list; the
// events it read are not read again. A journal that cannot be read says
// no: the next pass comes at its Interval.
func (o *Observer) newGuests(ctx context.Context) bool {
	o.mu.Lock()
	from, known := o.desiredFrom, o.extentKnown && o.pass > 0
	o.mu.Unlock()
	if !known {
		return false
	}
	found := false
	for range newGuestScan {
		en, err := o.j.NextOfKind(ctx, events.KindDesired, o.cfg.Cluster, from)
		if err != nil || en == nil {
			break
		}
		from = en.Seq + 1
		info, err := events.ParseSubject(en.Subject)
		o.mu.Lock()
		_, listed := o.guests[info.VMID]
		o.mu.Unlock()
		if err == nil && !listed {
			found = true
			break
		}
	}
	o.mu.Lock()
	o.desiredFrom = max(o.desiredFrom, from)
	o.mu.Unlock()
	return found
}

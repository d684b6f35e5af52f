package projector

import (
	"sync"

	"github.com/converge-pve/converge/events"
)

// pre is an event's subject and body, decoded ahead of the fold.
type pre struct {
	info    events.SubjectInfo
	infoErr error
	val     any
	err     error
}

func decodeEvent(ev *Event) *pre {
	p := &pre{}
	if p.info, p.infoErr = events.ParseSubject(ev.Subject); p.infoErr != nil {
		return p
	}
	switch p.info.Kind {
	case events.KindDesired:
		p.val, p.err = events.DecodeDesired(ev.Data, p.info.VMID)
	case events.KindObserved:
		p.val, p.err = events.Decode[events.Observed](ev.Data)
	case events.KindAction:
		p.val, p.err = events.Decode[events.Action](ev.Data)
	case events.KindResult:
		p.val, p.err = events.Decode[events.Result](ev.Data)
	case events.KindHeartbeat:
		p.val, p.err = events.Decode[events.Heartbeat](ev.Data)
	case events.KindControl:
		p.val, p.err = events.Decode[events.Control](ev.Data)
	}
	return p
}

// Predecode decodes a batch of events on several goroutines, so that
// folding them (in order, with Apply) no longer waits on JSON. Decoding is
// pure; the fold stays sequential and gives exactly the views Apply alone
// would. Small batches are left alone.
func Predecode(evs []Event, workers int) {
	if workers < 2 || len(evs) < 64 {
		return
	}
	var wg sync.WaitGroup
	chunk := (len(evs) + workers - 1) / workers
	for lo := 0; lo < len(evs); lo += chunk {
		hi := min(lo+chunk, len(evs))
		wg.Add(1)
		go func(part []Event) {
			defer wg.Done()
			for i := range part {
				part[i].pre = decodeEvent(&part[i])
			}
		}(evs[lo:hi])
	}
	wg.Wait()
}

// decodeAs returns an event's body as T, predecoded or decoded now.
func decodeAs[T any](ev Event) (T, error) {
	if ev.pre != nil {
		if ev.pre.err != nil {
			var zero T
			return zero, ev.pre.err
		}
		if v, ok := ev.pre.val.(T); ok {
			return v, nil
		}
	}
	return events.Decode[T](ev.Data)
}

package bench

import (
	"context"
	"errors"
	"time"
)

// pauseOnce stops the executor in slot for PauseFor under load, and says
// whether it lost a lease meanwhile.
func (r *failoverRun) pauseOnce(ctx context.Context, slot int) (bool, error) {
	if err := r.balanced(ctx); err != nil {
		return false, err
	}
	if err := sleepCtx(ctx, r.o.Settle); err != nil {
		return false, err
	}
	p := r.execs[slot]
	_ = waitForEvery(ctx, 20*time.Millisecond, 5*(r.o.PowerTask+time.Second), "a task in flight", func() (int, int, bool) {
		return 0, 1, r.watch.startedBy(p.resultName()) > 0
	})
	before, err := r.heldBy(ctx, p)
	if err != nil {
		return false, err
	}
	// Read while it is still stopped: a lease it still holds then, it
	// renews when it goes on; a lost one has expired or another owner.
	var after map[int]bool
	var readErr error
	err = p.pause(ctx, r.o.PauseFor, func() { after, readErr = r.heldBy(ctx, p) })
	if err = errors.Join(err, readErr); err != nil {
		return false, err
	}
	for part := range before {
		if !after[part] {
			return true, nil
		}
	}
	return false, nil
}

// heldBy are the partitions p holds.
func (r *failoverRun) heldBy(ctx context.Context, p *execProc) (map[int]bool, error) {
	owners, err := leaseOwners(ctx, r.kv)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for part, m := range owners {
		if memberOf(m, p) {
			out[part] = true
		}
	}
	return out, nil
}

package pace

import (
	"context"
	"time"
)

// Default slices: half of one processor at most, in 1 ms turns (short
// enough that a change waiting behind a turn loses little, long enough
// that sleeping costs little).
const (
	DefaultWork = time.Millisecond
	DefaultRest = time.Millisecond
)

// Pacer paces one loop; it is not safe for concurrent use.
type Pacer struct {
	ctx        context.Context
	work, rest time.Duration
	since      time.Time
	now        func() time.Time
	sleep      func(context.Context, time.Duration)
}

// New returns a Pacer resting rest after each work of running; work <= 0
// disables pacing.
func New(ctx context.Context, work, rest time.Duration) *Pacer {
	return &Pacer{ctx: ctx, work: work, rest: rest, now: time.Now, sleep: sleep}
}

// Default is New with DefaultWork and DefaultRest.
func Default(ctx context.Context) *Pacer { return New(ctx, DefaultWork, DefaultRest) }

// Step is called between units of work; it rests when a slice is used up.
func (p *Pacer) Step() {
	if p == nil || p.work <= 0 {
		return
	}
	now := p.now()
	if p.since.IsZero() {
		p.since = now
		return
	}
	if now.Sub(p.since) < p.work {
		return
	}
	p.sleep(p.ctx, p.rest)
	p.since = p.now()
}

func sleep(ctx context.Context, d time.Duration) {
	if ctx == nil {
		time.Sleep(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

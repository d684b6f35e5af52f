package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f on its own goroutine d from now, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a time.Timer. As with Go 1.23's timers, after Stop or Reset no
// stale value is received from C.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Real is the wall clock.
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time                            { return time.Now() }
func (real) NewTimer(d time.Duration) Timer            { return realTimer{time.NewTimer(d)} }
func (real) NewTicker(d time.Duration) Ticker          { return realTicker{time.NewTicker(d)} }
func (real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }

// Or returns c, or Real if c is nil: the default of every Config.Clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Sleep waits d on c, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

package observer

import (
	"context"
	"time"
)

// VerifyRound runs one verification round, as Run does between passes.
func (o *Observer) VerifyRound(ctx context.Context) (reads, failed int) { return o.verifyRound(ctx) }

// Unlocked reports whether the observer's lock is free now (taken and
// released at once if it is).
func (o *Observer) Unlocked() bool {
	if !o.mu.TryLock() {
		return false
	}
	o.mu.Unlock()
	return true
}

// NewGuests is Run's look for new guests between passes (soon.go).
func (o *Observer) NewGuests(ctx context.Context) bool { return o.newGuests(ctx) }

// NextRound is how long Run waits for the next verification round after a
// round or pass that read something (read) or not.
func (o *Observer) NextRound(read bool) time.Duration { return o.nextRound(read) }

package observer

import "context"

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

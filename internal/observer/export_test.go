package observer

import "context"

// VerifyRound runs one verification round, as Run does between passes.
func (o *Observer) VerifyRound(ctx context.Context) (reads, failed int) { return o.verifyRound(ctx) }

// NewGuests is Run's look for new guests between passes (soon.go).
func (o *Observer) NewGuests(ctx context.Context) bool { return o.newGuests(ctx) }

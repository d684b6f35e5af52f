package observer

import "context"

// VerifyRound runs one verification round, as Run does between passes.
func (o *Observer) VerifyRound(ctx context.Context) (reads, failed int) { return o.verifyRound(ctx) }

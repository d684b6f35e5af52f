package views

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
)

// bucketCheck is how often WatchBucket checks that the bucket is the one
// being written to.
const bucketCheck = 2 * time.Second

// WatchBucket notices the bucket being deleted or replaced (converge
// rebuild, or an operator), until ctx ends: it recreates a missing bucket
// and calls recreated whenever the bucket is not the one seen before, so
// that the planner writes every document again from its fold.
func WatchBucket(ctx context.Context, store Store, clk clock.Clock, log zerolog.Logger, recreated func()) {
	var seen time.Time
	t := clk.NewTicker(bucketCheck)
	defer t.Stop()
	for {
		created, ok, err := store.Created(ctx)
		switch {
		case err == nil && !ok:
			log.Warn().Msg("views bucket missing; recreating it")
			if err := store.Provision(ctx); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("views bucket not recreated; will retry")
			}
		case err == nil:
			if !seen.IsZero() && !created.Equal(seen) {
				recreated()
			}
			seen = created
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

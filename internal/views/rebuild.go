package views

import (
	"context"
	"fmt"
	"time"

	"github.com/converge-pve/converge/internal/clock"
)

// CheckpointDropper deletes a planner checkpoint (bus.Checkpoints).
type CheckpointDropper interface {
	Delete(ctx context.Context, name string) (deleted bool, err error)
}

// Rebuilt is what Rebuild did.
type Rebuilt struct {
	ViewsDropped      bool `json:"views_dropped"`
	CheckpointDropped bool `json:"checkpoint_dropped"`
}

// Rebuild drops the views bucket and the planner's checkpoint named
// checkpoint, and creates the bucket again, empty. The journal is not
// touched: it is the source of truth. A running planner notices the new
// bucket (WatchBucket) and writes every document again from its fold; one
// started later folds the journal from the start, and first, if retention
// has cut the journal, what the keep stream holds of every guest
// (docs/retention.md): desired state survives a rebuild.
func Rebuild(ctx context.Context, store Store, ckpts CheckpointDropper, checkpoint string) (Rebuilt, error) {
	var r Rebuilt
	var err error
	if r.ViewsDropped, err = store.Drop(ctx); err != nil {
		return r, err
	}
	if r.CheckpointDropped, err = ckpts.Delete(ctx, checkpoint); err != nil {
		return r, err
	}
	if err := store.Provision(ctx); err != nil {
		return r, fmt.Errorf("recreate views bucket: %w", err)
	}
	return r, nil
}

// rewriteCheck is how often WaitRewritten polls the bucket.
const rewriteCheck = 500 * time.Millisecond

// WaitRewritten waits until a planner has written the cluster document
// again, at or beyond seq, the bucket holds a document for each of the
// guests that document counts, and their number has stopped growing
// (documents are written at most a thousand per flush: done when the count
// holds for three checks). A planner writes its cluster document at every
// flush, before it notices that the bucket was dropped (WatchBucket, every
// 2 s): the count, not the cluster document alone, says the guests are
// back. It returns the number of guest documents; ctx bounds the wait.
func WaitRewritten(ctx context.Context, r Reader, clk clock.Clock, seq uint64) (int, error) {
	last, stable := -1, 0
	for {
		if cd, err := r.ClusterDoc(ctx); err == nil && cd != nil && cd.Seq >= seq {
			if docs, err := r.List(ctx); err == nil && len(docs) >= cd.Guests {
				if len(docs) == last {
					if stable++; stable >= 3 {
						return len(docs), nil
					}
				} else {
					last, stable = len(docs), 0
				}
			}
		}
		if err := clock.Sleep(ctx, clk, rewriteCheck); err != nil {
			return 0, err
		}
	}
}

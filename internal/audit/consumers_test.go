package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/audit"
)

// Reads of the journal leave no consumer behind. nats.go's ordered
// consumers outlive their Stop by five minutes and nats-server refuses a
// stream's 1,001st consumer: an e2e test polling a guest's history every
// 20 ms locked the whole journal out of new consumers within a minute
// ("maximum consumers limit reached"), executors and planners included.
func TestReadsLeaveNoConsumers(t *testing.T) {
	w := newWriter(t)
	script(w)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 25 {
		if _, err := audit.Timeline(ctx, w.b.JS, "PVE", "pve", 101, 0, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := audit.FoldUntil(ctx, w.b.JS, "PVE", "pve", audit.Point{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n != 0 {
		t.Fatalf("50 reads left %d consumers on the journal, want 0", n)
	}
}

package executor

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/journal/journaltest"
)

// TestHeartbeat: the timer keeps beating while an action is handled, each
// beat re-arming it; once stop returns, neither the timer nor a task poll
// sends InProgress. Driven by a fake clock: no waiting.
func TestHeartbeat(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	d := journaltest.Deliver(journal.Entry{Seq: 1}, 1)
	beats := func() int { _, _, n := d.Counts(); return n }
	h := startHeartbeat(d, clk, 20*time.Millisecond, zerolog.Nop())
	for i := 1; i <= 3; i++ {
		clk.Advance(20 * time.Millisecond)
		if got := beats(); got != i {
			t.Fatalf("after %d periods: %d beats", i, got)
		}
	}
	// A task poll within half a period of the last beat sends nothing; one
	// after it does.
	clk.Advance(5 * time.Millisecond)
	h.touch()
	if got := beats(); got != 3 {
		t.Fatalf("poll right after a beat sent InProgress (%d beats)", got)
	}
	clk.Advance(6 * time.Millisecond)
	h.touch()
	if got := beats(); got != 4 {
		t.Fatalf("poll half a period after a beat: %d beats, want 4", got)
	}
	h.stop()
	n := beats()
	h.mu.Lock()
	h.last = time.Time{} // a poll would be due
	h.mu.Unlock()
	h.touch()
	h.tick()
	clk.Advance(time.Second)
	if got := beats(); got != n {
		t.Fatalf("%d beats after stop", got-n)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers left after stop", clk.Pending())
	}
}

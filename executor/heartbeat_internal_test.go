package executor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

type beatMsg struct {
	jetstream.Msg // only InProgress is called
	beats         atomic.Int32
	beat          chan struct{}
}

func (m *beatMsg) InProgress() error {
	m.beats.Add(1)
	select {
	case m.beat <- struct{}{}:
	default:
	}
	return nil
}

// TestHeartbeat: the timer keeps beating while an action is handled, each
// beat re-arming it; once stop returns, neither the timer nor a task poll
// sends InProgress.
func TestHeartbeat(t *testing.T) {
	m := &beatMsg{beat: make(chan struct{}, 1)}
	h := startHeartbeat(m, 20*time.Millisecond, zerolog.Nop())
	for i := 0; i < 3; i++ {
		select {
		case <-m.beat:
		case <-time.After(10 * time.Second):
			t.Fatalf("beat %d never came", i+1)
		}
	}
	h.stop()
	n := m.beats.Load()
	h.mu.Lock()
	h.last = time.Time{} // a poll would be due
	h.mu.Unlock()
	h.touch()
	h.tick()
	if got := m.beats.Load(); got != n {
		t.Fatalf("%d beats after stop", got-n)
	}
}

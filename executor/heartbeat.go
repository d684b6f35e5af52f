package executor

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
)

// heartbeat keeps an action's message alive with InProgress while it is
// handled: on a timer, and on each task poll (rate-limited). A timer, not
// a goroutine: most actions end long before the first beat.
type heartbeat struct {
	d       journal.Delivery
	clk     clock.Clock
	every   time.Duration
	log     zerolog.Logger
	mu      sync.Mutex
	last    time.Time
	stopped bool
	timer   clock.Timer
}

func startHeartbeat(d journal.Delivery, clk clock.Clock, every time.Duration, log zerolog.Logger) *heartbeat {
	h := &heartbeat{d: d, clk: clk, every: every, log: log, last: clk.Now()}
	h.mu.Lock()
	h.timer = clk.AfterFunc(every, h.tick)
	h.mu.Unlock()
	return h
}

func (h *heartbeat) tick() {
	h.touch()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.timer.Reset(h.every)
	}
}

// touch sends InProgress unless one went out less than every/2 ago, or the
// heartbeat was stopped.
func (h *heartbeat) touch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || h.clk.Now().Sub(h.last) < h.every/2 {
		return
	}
	h.last = h.clk.Now()
	if err := h.d.InProgress(); err != nil {
		h.log.Debug().Err(err).Msg("in-progress heartbeat")
	}
}

// stop ends the heartbeat: no InProgress is sent once it returns.
func (h *heartbeat) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
}

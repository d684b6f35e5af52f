package lograte

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// Limiter hands out log events within its rate; safe for concurrent use.
type Limiter struct {
	mu         sync.Mutex
	lim        *rate.Limiter
	suppressed int
}

// New returns a limiter of perSecond lines a second, bursts of burst.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// Event starts a log line at level on log, or returns nil when the rate
// is spent (the line is counted, and the next one says "not_logged_before").
func (l *Limiter) Event(log *zerolog.Logger, level zerolog.Level, now time.Time) *zerolog.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lim.AllowN(now, 1) {
		l.suppressed++
		return nil
	}
	ev := log.WithLevel(level)
	if l.suppressed > 0 {
		ev = ev.Int("not_logged_before", l.suppressed)
		l.suppressed = 0
	}
	return ev
}

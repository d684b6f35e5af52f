package executor

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// Failed actions are logged at warn, at most failLogRate a second (bursts
// of failLogBurst): a Proxmox outage fails every action at once, and the
// journal and `converge history` keep each failure whatever the log
// shows. The next line logged says how many were not.
const (
	failLogRate  = rate.Limit(2)
	failLogBurst = 10
)

type failureLog struct {
	lim        *rate.Limiter
	mu         sync.Mutex
	suppressed int
}

func newFailureLog() *failureLog {
	return &failureLog{lim: rate.NewLimiter(failLogRate, failLogBurst)}
}

// event is the warn event for a failed action, nil when the rate is
// spent (counted for the next one).
func (f *failureLog) event(log *zerolog.Logger, now time.Time) *zerolog.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.lim.AllowN(now, 1) {
		f.suppressed++
		return nil
	}
	ev := log.Warn()
	if f.suppressed > 0 {
		ev = ev.Int("failures_not_logged_before", f.suppressed)
		f.suppressed = 0
	}
	return ev
}

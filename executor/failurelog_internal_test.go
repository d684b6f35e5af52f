package executor

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A burst of failures logs failLogBurst lines; the next one allowed says
// how many were left out.
func TestFailureLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	f := newFailureLog()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for range failLogBurst + 5 {
		if ev := f.event(&log, now); ev != nil {
			ev.Msg("action finished")
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != failLogBurst {
		t.Fatalf("%d lines for a burst, want %d", n, failLogBurst)
	}
	buf.Reset()
	f.event(&log, now.Add(time.Second)).Msg("action finished")
	if !strings.Contains(buf.String(), `"failures_not_logged_before":5`) {
		t.Fatalf("next line: %s", buf.String())
	}
}

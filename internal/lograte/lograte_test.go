package lograte

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A burst logs burst lines; the next line allowed says how many were left
// out.
func TestBurstThenCount(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	l := New(2, 10)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for range 15 {
		if ev := l.Event(&log, zerolog.WarnLevel, now); ev != nil {
			ev.Msg("x")
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 10 {
		t.Fatalf("%d lines for a burst of 15, want 10", n)
	}
	buf.Reset()
	l.Event(&log, zerolog.WarnLevel, now.Add(time.Second)).Msg("x")
	if !strings.Contains(buf.String(), `"not_logged_before":5`) || !strings.Contains(buf.String(), `"level":"warn"`) {
		t.Fatalf("next line: %s", buf.String())
	}
}

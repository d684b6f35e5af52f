package planner

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones the test needs, whatever the machine has
)

func TestWindowNextAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := ParseWindow("Sun 04:00-05:00")
	// 2026-10-25: clocks go back 03:00 CEST -> 02:00 CET.
	now := time.Date(2026, 10, 25, 3, 30, 0, 0, berlin)
	got := w.Next(now)
	want := time.Date(2026, 10, 25, 4, 0, 0, 0, berlin)
	if !got.Equal(want) {
		t.Errorf("fall back: Next(%s) = %s, want %s", now, got, want)
	}
	w2, _ := ParseWindow("Sun 03:30-05:00")
	// 2026-03-29: clocks go forward 02:00 CET -> 03:00 CEST.
	now = time.Date(2026, 3, 29, 1, 0, 0, 0, berlin)
	got = w2.Next(now)
	want = time.Date(2026, 3, 29, 3, 30, 0, 0, berlin)
	if !got.Equal(want) {
		t.Errorf("spring forward: Next(%s) = %s, want %s", now, got, want)
	}
}

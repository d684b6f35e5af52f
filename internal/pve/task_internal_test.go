package pve

import (
	"testing"
	"time"
)

// The pauses between polls double from Interval to MaxInterval; within
// Fine they stay at most FineInterval, and past it double on from there
// (a task just longer than Fine is found a FineInterval or two late, not
// a MaxInterval).
func TestWaitPauses(t *testing.T) {
	ms := time.Millisecond
	o := WaitOptions{Fine: 1000 * ms, FineInterval: 50 * ms}.withDefaults()
	var got []time.Duration
	interval, elapsed := o.Interval, time.Duration(0)
	for range 30 {
		var p time.Duration
		p, interval = o.pause(interval, elapsed)
		got = append(got, p)
		elapsed += p
		if elapsed > 3*time.Second {
			break
		}
	}
	want := []time.Duration{20 * ms, 40 * ms} // doubling up to FineInterval
	for range 19 {
		want = append(want, 50*ms) // up to 1,010 ms elapsed
	}
	want = append(want, 50*ms, 100*ms, 200*ms, 400*ms, 800*ms, 1000*ms)
	if len(got) != len(want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("pause %d is %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
	// Without Fine: doubling from Interval to MaxInterval.
	p, next := WaitOptions{}.withDefaults().pause(640*ms, 0)
	if p != 640*ms || next != time.Second {
		t.Errorf("pause %v then %v, want 640ms then 1s", p, next)
	}
}

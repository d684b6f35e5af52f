package clocktest_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/clock/clocktest"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// TestFake: timers and tickers fire when the clock is advanced past them,
// in time order, AfterFunc on the caller's goroutine; stopped ones never.
func TestFake(t *testing.T) {
	c := clocktest.New(t0)
	var order []string
	c.AfterFunc(3*time.Second, func() { order = append(order, "after-3s") })
	stopped := c.AfterFunc(time.Second, func() { order = append(order, "stopped") })
	tm := c.NewTimer(2 * time.Second)
	tk := c.NewTicker(time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	c.Advance(1500 * time.Millisecond)
	select {
	case at := <-tk.C():
		if !at.Equal(t0.Add(time.Second)) {
			t.Fatalf("tick at %s", at)
		}
	default:
		t.Fatal("ticker did not fire at 1s")
	}
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	c.Advance(2 * time.Second) // to 3.5s: timer at 2s, ticks at 2s and 3s (one kept), after-3s
	if at := <-tm.C(); !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("timer fired at %s", at)
	}
	if at := <-tk.C(); !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("kept tick at %s, want the first undelivered one (2s)", at)
	}
	if len(order) != 1 || order[0] != "after-3s" {
		t.Fatalf("callbacks %v", order)
	}
	if !c.Now().Equal(t0.Add(3500 * time.Millisecond)) {
		t.Fatalf("now %s", c.Now())
	}
	tk.Stop()
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it active")
	}
	c.Advance(time.Second)
	if at := <-tm.C(); !at.Equal(t0.Add(4500 * time.Millisecond)) {
		t.Fatalf("reset timer fired at %s", at)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers still pending", c.Pending())
	}
}

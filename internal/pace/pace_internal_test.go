package pace

import (
	"context"
	"testing"
	"time"
)

// fakeClock advances only when told to, or when the pacer sleeps.
type fakeClock struct {
	t      time.Time
	rested []time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) {
	c.rested = append(c.rested, d)
	c.t = c.t.Add(d)
}

func newFake(work, rest time.Duration) (*Pacer, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := New(context.Background(), work, rest)
	p.now, p.sleep = c.now, c.sleep
	return p, c
}

// TestPacerRestsAfterEachSlice: the pacer rests exactly once per slice of
// work used up, for Rest, and measures the next slice from after the rest.
func TestPacerRestsAfterEachSlice(t *testing.T) {
	p, c := newFake(time.Millisecond, 3*time.Millisecond)
	// 100 units of 150 µs: 15 ms of work.
	for range 100 {
		p.Step()
		c.t = c.t.Add(150 * time.Microsecond)
	}
	p.Step()
	// Each slice is 7 units (1.05 ms ≥ 1 ms): 100 units make 14 full slices.
	if len(c.rested) != 14 {
		t.Fatalf("rested %d times for 15 ms of work in 1 ms slices, want 14", len(c.rested))
	}
	for _, d := range c.rested {
		if d != 3*time.Millisecond {
			t.Fatalf("rested %v, want 3ms", d)
		}
	}
}

// TestPacerBelowSliceNeverRests: work shorter than one slice runs straight
// through, and a disabled or nil pacer never rests.
func TestPacerBelowSliceNeverRests(t *testing.T) {
	p, c := newFake(10*time.Millisecond, time.Millisecond)
	for range 50 {
		p.Step()
		c.t = c.t.Add(100 * time.Microsecond)
	}
	if len(c.rested) != 0 {
		t.Fatalf("rested %d times within one slice", len(c.rested))
	}
	off, c2 := newFake(0, time.Millisecond)
	for range 50 {
		off.Step()
		c2.t = c2.t.Add(time.Second)
	}
	if len(c2.rested) != 0 {
		t.Fatalf("a disabled pacer rested %d times", len(c2.rested))
	}
	var none *Pacer
	none.Step()
}

// TestPacerRestEndsWithContext: a rest ends when the context does, so a
// paced loop never holds up a shutdown by more than one unit of work.
func TestPacerRestEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sleep(ctx, time.Hour)
	}()
	<-done
}

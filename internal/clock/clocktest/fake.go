package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/converge-pve/converge/internal/clock"
)

// Fake is a manual clock. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

var _ clock.Clock = (*Fake)(nil)

// New returns a fake clock reading t.
func New(t time.Time) *Fake { return &Fake{now: t} }

// Now implements clock.Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock d forward, firing everything that falls due on
// the way, in time order (ties in creation order). AfterFunc callbacks run
// on the caller's goroutine, one after another, so that a test sees their
// effects when Advance returns.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	f.mu.Unlock()
	for {
		f.mu.Lock()
		t := f.nextDue(end)
		if t == nil {
			f.now = end
			f.mu.Unlock()
			return
		}
		f.now = t.at
		fn := t.fire(f)
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
}

// Set moves the clock to t (forward or back) without firing anything.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.mu.Unlock()
}

// Pending is the number of timers and tickers waiting to fire.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

func (f *Fake) nextDue(end time.Time) *fakeTimer {
	sort.SliceStable(f.timers, func(i, j int) bool {
		if !f.timers[i].at.Equal(f.timers[j].at) {
			return f.timers[i].at.Before(f.timers[j].at)
		}
		return f.timers[i].id < f.timers[j].id
	})
	if len(f.timers) == 0 || f.timers[0].at.After(end) {
		return nil
	}
	return f.timers[0]
}

func (f *Fake) add(t *fakeTimer) {
	f.seq++
	t.id = f.seq
	f.timers = append(f.timers, t)
}

func (f *Fake) remove(t *fakeTimer) bool {
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

// NewTimer implements clock.Clock.
func (f *Fake) NewTimer(d time.Duration) clock.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	f.add(t)
	return t
}

// NewTicker implements clock.Clock.
func (f *Fake) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("clocktest: non-positive ticker interval")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), every: d, c: make(chan time.Time, 1)}
	f.add(t)
	return fakeTicker{t}
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time   { return k.t.c }
func (k fakeTicker) Stop()                 { k.t.Stop() }
func (k fakeTicker) Reset(d time.Duration) { k.t.Reset(d) }

// AfterFunc implements clock.Clock.
func (f *Fake) AfterFunc(d time.Duration, fn func()) clock.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), fn: fn}
	f.add(t)
	return t
}

type fakeTimer struct {
	f     *Fake
	id    int
	at    time.Time
	every time.Duration // tickers
	c     chan time.Time
	fn    func() // AfterFunc
}

// fire runs under f.mu: it sends on C (dropping a tick nobody took, as
// time.Ticker does) and reschedules a ticker; it returns an AfterFunc's
// callback, to be run without the lock.
func (t *fakeTimer) fire(f *Fake) func() {
	f.remove(t)
	if t.every > 0 {
		t.at = t.at.Add(t.every)
		f.add(t)
	}
	if t.fn != nil {
		return t.fn
	}
	select {
	case t.c <- f.now:
	default:
	}
	return nil
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	return t.f.remove(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	active := t.f.remove(t)
	t.at = t.f.now.Add(d)
	if t.every > 0 {
		t.every = d
	}
	t.f.add(t)
	return active
}

// drain empties C: after Stop or Reset no stale value is received.
func (t *fakeTimer) drain() {
	if t.c == nil {
		return
	}
	select {
	case <-t.c:
	default:
	}
}

package observer_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	ijournal "github.com/converge-pve/converge/internal/journal"
)

// Between passes the observer looks for desired events journalled since
// its last pass began that name a guest it did not list: those of listed
// guests, and those the last pass covers (journalled before it began),
// do not count, and an event is looked at once.
func TestNewGuests(t *testing.T) {
	clk := newClock()
	o, j := memObserver(t, newCountingPVE(3), clk)
	desired := func(vmid int) {
		j.Publish(events.Message{Subject: events.Subject(events.KindDesired, events.DefaultCluster, vmid), Data: []byte(`{}`)})
	}
	ctx := tctx(t)
	if o.NewGuests(ctx) {
		t.Fatal("new guests before any pass")
	}
	desired(500) // before the pass: the pass covers it
	pass(t, o)
	if o.NewGuests(ctx) {
		t.Fatal("a desired event the pass covers counted")
	}
	desired(101) // listed
	if o.NewGuests(ctx) {
		t.Fatal("a listed guest's desired event counted")
	}
	desired(102)
	desired(600)
	if !o.NewGuests(ctx) {
		t.Fatal("a desired event of a guest the pass did not list: not found")
	}
	if o.NewGuests(ctx) {
		t.Fatal("the same event counted twice")
	}
	desired(601)
	pass(t, o)
	if o.NewGuests(ctx) {
		t.Fatal("after a pass, an event it covers counted")
	}
}

// TestRunEarlyPass: Run passes soon after a desired event names a guest
// its last pass did not list (within a second of that pass, then at its
// next look), not an Interval (an hour here) later; the look goes through
// the journal over NATS.
func TestRunEarlyPass(t *testing.T) {
	_, b, clk, ctx, sub, stop := runDemo(t)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run returned %v", err)
		}
	}()
	m, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if hb, _ := events.Decode[events.Heartbeat](m.Data); hb.Pass != 1 {
		t.Fatalf("first heartbeat %+v", hb)
	}
	if _, err := b.Append(ctx, events.Message{Subject: events.Subject(events.KindDesired, "pve", 999), Data: []byte(`{}`)}, ijournal.Expect{}); err != nil {
		t.Fatal(err)
	}
	// Each step fires Run's look (every 250 ms); the heartbeat of the
	// early pass is waited for, not slept for.
	for range 200 {
		clk.Advance(250 * time.Millisecond)
		if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
			if hb, _ := events.Decode[events.Heartbeat](m.Data); hb.Pass != 2 {
				t.Fatalf("early heartbeat %+v", hb)
			}
			return
		}
	}
	t.Fatal("no early pass after a desired event of a guest not listed")
}

package journaltest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/journal/journaltest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func msg(kind events.Kind, vmid int) events.Message {
	return events.Message{Subject: events.Subject(kind, "pve", vmid), Data: []byte(`{}`)}
}

// TestJournal pins the in-memory journal to what converge relies on from
// JetStream (internal/bus's tests check the same of the real one): stored
// subjects carry the partition, fences refuse a moved subject, msg-ids
// deduplicate, direct reads find the newest and the next entries.
func TestJournal(t *testing.T) {
	ctx := context.Background()
	j := journaltest.New(16, func() time.Time { return t0 })
	a1, err := j.Append(ctx, msg(events.KindResult, 101), journal.FencedAt(0))
	if err != nil || a1.Seq != 1 {
		t.Fatalf("first append: %+v %v", a1, err)
	}
	if _, err := j.Append(ctx, msg(events.KindResult, 101), journal.FencedAt(0)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("stale fence: %v, want ErrFenced", err)
	}
	if _, err := j.Append(ctx, msg(events.KindResult, 102), journal.FencedAt(0)); err != nil {
		t.Fatalf("another subject's fence: %v", err)
	}
	x := journal.FencedAt(1)
	x.MsgID = "m"
	a3, err := j.Append(ctx, msg(events.KindResult, 101), x)
	if err != nil || a3.Seq != 3 {
		t.Fatalf("fenced at 1: %+v %v", a3, err)
	}
	if dup, err := j.Append(ctx, msg(events.KindResult, 101), journal.Expect{MsgID: "m"}); err != nil || !dup.Duplicate || dup.Seq != 3 {
		t.Fatalf("repeated msg-id: %+v %v", dup, err)
	}
	e, _ := j.Get(ctx, 3)
	if e == nil || e.Subject != events.StoredSubject(events.KindResult, "pve", 101, 16) || !e.Time.Equal(t0) {
		t.Fatalf("entry 3: %+v", e)
	}
	lasts, _ := j.Lasts(ctx, "pve", 101, events.KindAction, events.KindResult)
	if lasts[0] != nil || lasts[1] == nil || lasts[1].Seq != 3 {
		t.Fatalf("lasts: %v", lasts)
	}
	if n, _ := j.Next(ctx, events.KindResult, "pve", 101, 2); n == nil || n.Seq != 3 {
		t.Fatalf("next from 2: %+v", n)
	}
	j.FailAppends(errors.New("down"), 1)
	if _, err := j.Append(ctx, msg(events.KindDesired, 103), journal.Expect{}); err != nil {
		t.Fatalf("the append allowed before failing: %v", err)
	}
	if _, err := j.Append(ctx, msg(events.KindDesired, 103), journal.Expect{}); err == nil {
		t.Fatal("append to a failing journal succeeded")
	}
}

// TestConsumer: a work consumer hands out matching entries in order, once;
// after Redeliver, the unacknowledged ones again (and only those).
func TestConsumer(t *testing.T) {
	j := journaltest.New(1, func() time.Time { return t0 })
	for _, vmid := range []int{101, 102, 103} {
		j.Publish(msg(events.KindAction, vmid))
	}
	j.Publish(msg(events.KindResult, 101)) // not an action: filtered out
	got := make(chan journal.Delivery, 16)
	stop, err := j.Consume(context.Background(), journal.WorkSpec{Durable: "w", Filter: "pve.action.pve.*.0"},
		func(d journal.Delivery) { got <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var ds []journal.Delivery
	for range 3 {
		ds = append(ds, <-got)
	}
	for i, d := range ds {
		if d.Entry().Seq != uint64(i+1) || d.Delivered() != 1 {
			t.Fatalf("delivery %d: seq %d, delivered %d", i, d.Entry().Seq, d.Delivered())
		}
	}
	_ = ds[0].Ack(context.Background())
	_ = ds[2].Term()
	j.Redeliver("w")
	d := <-got
	if d.Entry().Seq != 2 || d.Delivered() != 2 {
		t.Fatalf("redelivery: seq %d, delivered %d; want the unacknowledged 2, second delivery", d.Entry().Seq, d.Delivered())
	}
	select {
	case extra := <-got:
		t.Fatalf("acknowledged or terminated entry %d delivered again", extra.Entry().Seq)
	default:
	}
}

package bus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/journal"
)

// TestConsumerDeletedIsRecreated: an operator deletes a work consumer
// while it is consumed (`nats consumer rm PVE executor-pve-p06`). The
// consumer is created again, Recreated hears it once, and entries
// published after the deletion are delivered (before: nats.go ended the
// consumption, and the partition's actions never ran until a restart).
func TestConsumerDeletedIsRecreated(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recreated atomic.Int32
	got := make(chan uint64, 16)
	spec := journal.WorkSpec{Durable: "work-test", Filter: "pve.action.pve.>", AckWait: 30 * time.Second, MaxAckPending: 8,
		Recreated: func() { recreated.Add(1) }}
	stop, err := b.Consume(ctx, spec, func(d journal.Delivery) {
		go func() {
			if err := d.Ack(ctx); err == nil {
				got <- d.Entry().Seq
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	publish := func() uint64 {
		t.Helper()
		a, err := b.Publish(ctx, events.Subject(events.KindAction, "pve", 101), []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		return a.Sequence
	}
	receive := func(want uint64) {
		t.Helper()
		for {
			select {
			case seq := <-got:
				if seq == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("entry %d never delivered (recreated %d times)", want, recreated.Load())
			}
		}
	}
	receive(publish())

	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer(ctx, spec.Durable); err != nil {
		t.Fatal(err)
	}
	receive(publish())
	if n := recreated.Load(); n != 1 {
		t.Fatalf("recreated %d times, want once", n)
	}
	if _, err := s.Consumer(ctx, spec.Durable); err != nil {
		t.Fatalf("the consumer is not there again: %v", err)
	}
}

// TestConsumerOfRestoredStream: the journal stream is deleted and
// provisioned again (restored) while a work consumer runs: nats.go ends
// the consumption for good, and the consumer is created again once the
// stream is back, whatever a lookup said meanwhile (found by review: a
// lookup that did not say "consumer not found" left the partition dead).
func TestConsumerOfRestoredStream(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan uint64, 16)
	spec := journal.WorkSpec{Durable: "work-restore", Filter: "pve.action.pve.>", AckWait: 30 * time.Second, MaxAckPending: 8}
	stop, err := b.Consume(ctx, spec, func(d journal.Delivery) {
		go func() {
			if err := d.Ack(ctx); err == nil {
				got <- d.Entry().Seq
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := b.JS.DeleteStream(ctx, bus.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := b.Publish(ctx, events.Subject(events.KindAction, "pve", 101), []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case seq := <-got:
			if seq == a.Sequence {
				return
			}
		case <-ctx.Done():
			t.Fatalf("entry %d of the restored stream never delivered", a.Sequence)
		}
	}
}

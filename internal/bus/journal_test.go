package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/journal"
)

func ptr[T any](v T) *T { return &v }

// TestPublishDesiredMessage publishes events.DesiredMessage's messages as
// any Go service would and reads them back: the stored subject carries the
// partition, the headers and the body are as published, and the returned
// sequence is the stored one (the desired revision). events'
// TestDesiredMessage checks the messages themselves.
func TestPublishDesiredMessage(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range []events.PublishOptions{{Publisher: "billing", CorrelationID: "order-7"}, {Cluster: "lab-2"}} {
		d := events.Desired{VMID: 4242, Power: ptr(events.PowerRunning)}
		m, err := events.DesiredMessage(&d, o)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := b.Append(ctx, m, journal.Expect{})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		e, err := b.Get(ctx, ack.Seq)
		if err != nil || e == nil {
			t.Fatalf("stored entry %d: %v %v", ack.Seq, e, err)
		}
		info, err := events.ParseSubject(e.Subject)
		if err != nil || e.Subject != fmt.Sprintf("%s.%d", m.Subject, info.Partition) || info.Partition < 0 {
			t.Errorf("stored subject %q (%+v, %v), want %s.<partition>", e.Subject, info, err, m.Subject)
		}
		for _, h := range []string{events.HeaderSchema, events.HeaderPublisher, events.HeaderCorrelationID} {
			if e.Header.Get(h) != m.Header.Get(h) {
				t.Errorf("stored %s = %q, published %q", h, e.Header.Get(h), m.Header.Get(h))
			}
		}
		if string(e.Data) != string(m.Data) {
			t.Errorf("stored body %s, published %s", e.Data, m.Data)
		}
	}
}

// TestAppendFenced: a fenced publish succeeds only while the subject ends
// where it expects, and a refusal is journal.ErrFenced; a repeated msg-id
// is a duplicate.
func TestAppendFenced(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := events.Message{Subject: events.Subject(events.KindResult, "pve", 101), Data: []byte(`{}`)}
	first, err := b.Append(ctx, msg, journal.FencedAt(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, msg, journal.FencedAt(0)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("second publish fenced at 0: %v, want ErrFenced", err)
	}
	x := journal.FencedAt(first.Seq)
	x.MsgID = "once"
	second, err := b.Append(ctx, msg, x)
	if err != nil || second.Duplicate {
		t.Fatalf("publish fenced at %d: %+v %v", first.Seq, second, err)
	}
	again, err := b.Append(ctx, msg, journal.Expect{MsgID: "once"})
	if err != nil || !again.Duplicate || again.Seq != second.Seq {
		t.Fatalf("repeated msg-id: %+v %v, want a duplicate of %d", again, err, second.Seq)
	}
	// The async appender reports the same.
	a, err := b.Async(16, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f, err := a.AppendAsync(msg, journal.FencedAt(first.Seq))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("async publish fenced at a stale sequence: %v, want ErrFenced", err)
	}
	lasts, err := b.Lasts(ctx, "pve", 101, events.KindDesired, events.KindResult)
	if err != nil || lasts[0] != nil || lasts[1] == nil || lasts[1].Seq != second.Seq {
		t.Fatalf("Lasts = %v, %v; want no desired and result %d", lasts, err, second.Seq)
	}
}
